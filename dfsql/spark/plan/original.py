"""When Spark's analysis of the user's own SELECT (:meth:`BlockPlan.analyse_original
<dfsql.spark.plan.block.BlockPlan.analyse_original>`) is spared.

That analysis runs the block as written, so that an unknown table or column is reported
exactly where the user wrote it, and gives Spark's own names for the output columns.
A SELECT that names a pane column (``window_start``, ``emit_time`` …) its FROM does not
have cannot be analysed as written: the column exists only after windowing, and Spark's
refusal of it is dfsql's most common answer. A refused analysis is the costliest step of
planning a small query (PySpark turns Spark's exception into its own with a dozen JVM
calls and the whole stack trace: 40–80 ms against 6–7 ms for an analysis that passes,
benchmarks/RESULTS.md, Nexmark q8), so a block that names pane columns its FROM lacks is
not analysed as written, and gives no names, exactly as the refused analysis would."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from dfsql.language.names import PANE_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.language.statement import WindowedBlock


def pane_columns_named(block: WindowedBlock) -> frozenset[str]:
    """The pane columns the block's query names (lower case; none for a block made
    without its tree)."""
    if block.select is None:
        return frozenset()
    named = {col.name.lower() for col in block.select.find_all(exp.Column)}
    return frozenset(named & set(PANE_COLUMNS))


def from_columns(input_stage: DataFrame) -> frozenset[str] | None:
    """The columns of the FROM under the block's input stage (lower case), read from
    Spark's analysed plan of it (``SELECT … FROM … [WHERE …]``: a projection over the
    FROM, or over a filter of it, whose columns are the FROM's); None where that plan is
    not at hand (Spark Connect) or has another shape."""
    jdf = getattr(input_stage, "_jdf", None)
    if jdf is None:
        return None
    plan = jdf.queryExecution().analyzed()
    if plan.nodeName() != "Project":
        return None
    return frozenset(n.lower() for n in plan.child().schema().fieldNames())


def unresolved_pane_column(exc: BaseException) -> bool:
    """True when Spark's error is that a pane column (window_start, emit_time …) is not
    a column of the user's FROM: those exist only after windowing. Any other error,
    even one whose message or query text mentions a pane column, is the user's."""
    cond = getattr(exc, "getCondition", lambda: None)() or ""
    if not cond.startswith("UNRESOLVED_COLUMN"):
        return False
    params = getattr(exc, "getMessageParameters", dict)() or {}
    name = params.get("objectName", "").split(".")[-1].strip("`").lower()
    return name in PANE_COLUMNS
