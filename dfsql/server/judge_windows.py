"""The judge's cost rule for Spark's own ``window()`` (issue #52): a plain statement's
``window(ts, '1 hour', '1 millisecond')`` makes Spark's analyser (its TimeWindowing rule)
expand each row into ceil(size / slide) windows, a projection per window built in the
driver: measured on one row, 2,000 windows take 9.5 s of analysis, 20,000 69 s, and no
statement timeout stops it. So a call asking for more windows per row than dfsql's own
bound on ``WINDOW SLIDING`` (:func:`dfsql.language.costs.max_windows_per_row`, ``dfsql
serve --max-windows-per-row``) is refused with 54000 at the call, in every form Spark
accepts: any case, a qualified name (``system.builtin.window``), ``IDENTIFIER('window')``,
named arguments, in a view, a CTE or ``EXECUTE IMMEDIATE '…'``'s text.

The durations are read as Spark reads them: Spark's own ``TimeWindow`` is built in the
JVM from the literals written, so that a duration is what Spark makes of it. Spark takes
only string, integer and long literals there; any other literal Spark refuses itself
(``INTERVAL '1' HOUR`` too, in Spark 4), and so does this rule let it. A duration that
is not a literal is refused here: Spark would refuse an expression or a variable, but a
parameter marker (``EXECUTE IMMEDIATE '… window(ts, ?, ?) …' USING …``) is bound to a
literal before the window is built, so its size is known only when it runs.

``session_window`` puts a row in one session and ``window_time`` reads a window's end:
neither multiplies rows, so neither is bounded here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsql.language.costs import CostError, max_windows_per_row, windows_per_row
from dfsql.server.judge_text import Refusal, fragment_of, start_of
from dfsql.spark.parsed_plan import Node, Tree

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: TimeWindow's parameters, by position and by name (its ExpressionDescription)
_NAMES = ("timecolumn", "windowduration", "slideduration", "starttime")
_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions"
#: the literals Spark's TimeWindow takes as durations
_TAKEN = ("StringType", "IntegerType", "LongType")


def window_refusal(spark: SparkSession, text: str, tree: Tree, node: Node) -> Refusal | None:
    """The refusal of a ``window()`` call over the bound, or None."""
    args = _window_arguments(tree, node)
    bound = max_windows_per_row()
    if args is None or bound <= 0:
        return None
    size_arg = args.get("windowduration")
    if size_arg is None:  # Spark refuses the call
        return None
    slide_arg = args.get("slideduration", size_arg)
    if any(a.name != "Literal" for a in (size_arg, slide_arg)):
        return Refusal(CostError, "window(…)'s durations are known only when the statement "
                       "runs (a parameter, a variable or an expression), and this server "
                       "bounds the windows per row before it runs (dfsql serve "
                       "--max-windows-per-row)", "write the durations as string literals: "
                       "window(ts, '10 minutes', '1 minute')", start_of(node),
                       fragment_of(text, node))
    durations = _durations(spark, text, size_arg, slide_arg)
    if durations is None or durations[1] <= 0:  # Spark refuses these itself
        return None
    n = windows_per_row(*durations)
    if n <= bound:
        return None
    return Refusal(CostError, f"window(…) puts each row in {n:,} windows (size / slide); "
                   f"the bound is {bound:,} windows per row (dfsql serve "
                   "--max-windows-per-row)", f"slide by at least size / {bound:,}, or use "
                   "a smaller window; window(ts, size) alone puts each row in one window",
                   start_of(node), fragment_of(text, node))


def _window_arguments(tree: Tree, node: Node) -> dict[str, Node] | None:
    """A ``window()`` call's arguments by TimeWindow's parameter names (None: not a call
    of ``window``)."""
    if node.name == "UnresolvedFunction":
        parts = node.values_under("nameParts")
        field = "arguments"
    elif node.name == "ExpressionWithUnresolvedIdentifier":
        name = tree.child(node, "identifierExpr")
        literal = name.value("value") if name is not None and name.name == "Literal" else None
        parts = [literal.rsplit(".", 1)[-1].strip("` ")] if literal else []
        field = "otherExprs"
    else:
        return None
    if not parts or parts[-1].lower() != "window":
        return None
    args: dict[str, Node] = {}
    for child in tree.children(node):
        head, _, index = child.field.partition(".")
        if head != field or not index.isdigit():
            continue
        if child.name == "NamedArgumentExpression":
            value = tree.child(child, "value")
            key = (child.value("key") or "").lower()
            if value is not None:
                args[key] = value
        elif int(index) < len(_NAMES):
            args.setdefault(_NAMES[int(index)], child)
    return args


def _durations(spark: SparkSession, text: str, size: Node,
               slide: Node) -> tuple[int, int] | None:
    """(size, slide) in µs as Spark's TimeWindow reads the literals as written (parsed
    again from their text by the session's parser), or None where Spark refuses them (a
    type or a text it does not take)."""
    if any(n.value("dataType") not in _TAKEN for n in (size, slide)):
        return None
    written = [fragment_of(text, n) for n in (size, slide)]
    if not all(written):
        return None
    try:
        parser = spark._jsparkSession.sessionState().sqlParser()
        lits = [parser.parseExpression(w) for w in written]
        window = getattr(spark.sparkContext._jvm, _EXPRESSIONS).TimeWindow(
            lits[0], lits[0], lits[1])
        return int(window.windowDuration()), int(window.slideDuration())
    except Exception:  # noqa: BLE001 (Spark's error, which it raises when it runs)
        return None
