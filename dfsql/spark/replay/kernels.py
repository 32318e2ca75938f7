"""The replay's aggregates computed in its driver, by the model's kernels.

When every aggregate of a replayed block is a COUNT, SUM, MIN, MAX or AVG that
:mod:`dfsql.model.aggregates` computes exactly (types below; FILTER kept; DISTINCT only
where it changes nothing, MIN / MAX), the driver emits one row per pane holding its
aggregates, instead of one row per element listing the panes that aggregate it for Spark
to explode and aggregate (:func:`dfsql.spark.replay.panes._panes_exploded` and
``_panes_two_level``, which stay the general case: any other aggregate or type).

Spark still evaluates what the aggregates read — an argument that is an expression, a
FILTER's condition — before the driver, as input columns; the kernels only reduce them.
Exact means the same rows as the Spark path (tests/spark/replay/test_replay_aggregates.py):

* SUM of TINYINT … BIGINT is a BIGINT (wrapping on overflow, or an error in ANSI mode, as
  Spark's), of FLOAT / DOUBLE a DOUBLE; AVG of those is a DOUBLE; COUNT is a BIGINT;
  MIN / MAX keep a numeric, BOOLEAN, DATE or TIMESTAMP type;
* a DECIMAL, a string, an interval or anything else keeps the Spark path.

``spark.conf.set("dfsql.replay.aggregateKernels", "false")`` forces the Spark path (the
property tests hold the two equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dfsql.model.aggregates import Route, pane_aggregate

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from dfsql.spark.values import ReplayPlan

#: Spark conf that turns the kernels off (any value but "false" leaves them on)
KERNELS_CONF = "dfsql.replay.aggregateKernels"

_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_FLOATING = ("float", "double")
_ORDERED = (*_INTEGRAL, *_FLOATING, "boolean", "date", "timestamp", "timestamp_ntz")


@dataclass(frozen=True)
class KernelAggregate:
    """One aggregate: ``how`` of input column ``value`` (None: COUNT(*)) over the rows
    where input column ``where`` is true (None: all), as column ``alias`` of Spark type
    ``spark_type``."""

    alias: str
    how: str
    value: str | None
    where: str | None
    spark_type: str


@dataclass(frozen=True)
class Kernels:
    """The aggregates of a block as the driver computes them (picklable: it travels to
    the executors inside the driver)."""

    aggregates: tuple[KernelAggregate, ...]
    #: input columns Spark adds before the driver: (name, Spark SQL over the input stage)
    inputs: tuple[tuple[str, str], ...]
    #: "raise" in ANSI mode (a SUM of integers that overflows fails, as Spark's)
    overflow: str

    def fields(self) -> list[str]:
        """The aggregate columns of the driver's output schema."""
        return [f"`{a.alias}` {a.spark_type}" for a in self.aggregates]

    def panes_sql(self, view: str, pane_rows: str, keys: list[str], meta: list[str],
                  ranked: bool) -> str:
        """The panes table, read straight from the driver's pane rows (SQL over ``view``,
        the rows where ``pane_rows`` holds): each row is one pane with its aggregates; a
        ranked pane's id (its one-element list) is its §7 rank. A COUNT is never NULL
        (a column Spark knows to be NOT NULL, as its own COUNT's)."""
        aggs = [f"coalesce(`{a.alias}`, 0L) AS `{a.alias}`" if a.how == "count"
                else f"`{a.alias}`" for a in self.aggregates]
        cols = [*[f"`{k}`" for k in keys], *aggs, *meta]
        if ranked:
            cols.append("__gids[0] AS __pane_rank")
        return f"SELECT {', '.join(cols)} FROM {view} WHERE {pane_rows}"

    def with_inputs(self, inp: DataFrame) -> DataFrame:
        """The input stage with the columns the kernels read."""
        from pyspark.sql import functions as F  # noqa: N812

        if not self.inputs:
            return inp
        return inp.withColumns({name: F.expr(sql) for name, sql in self.inputs})

    def arrow_schema(self, table_schema: pa.Schema) -> pa.Schema:
        """The table's schema with the aggregate columns' Arrow types beside it (what the
        driver's union of output rows reads its types from)."""
        import pyarrow as pa

        fields = list(table_schema)
        for a in self.aggregates:
            if a.how == "count":
                t = pa.int64()
            elif a.how == "avg" or (a.how == "sum" and a.spark_type == "double"):
                t = pa.float64()
            elif a.how == "sum":
                t = pa.int64()
            else:  # MIN / MAX keep their column's type
                t = table_schema.field(a.value).type
            fields.append(pa.field(a.alias, t))
        return pa.schema(fields)

    def pane_columns(self, table: pa.Table, r, n_panes: int) -> dict[str, pa.Array]:
        """Each pane's aggregates over the rows of ``table`` that the driver's result
        ``r`` routes to it (a :class:`dfsql.model.group_also_by_window.FlatResult`)."""
        import pyarrow.compute as pc

        route = Route(r.element_first_pane, r.cover_pane, r.cover_delta, n_panes)
        rows = r.element_row
        read: dict[str, tuple[np.ndarray, np.ndarray | None, pa.DataType]] = {}

        def column(name: str):
            if name not in read:
                read[name] = _numpy(table.column(name), rows)
            return read[name]

        def not_null(name: str) -> np.ndarray | None:
            """COUNT(x) needs only where x is not NULL (x may be of any type)."""
            if name in read:
                return read[name][1]
            col = table.column(name)
            if not col.null_count:
                return None
            return pc.is_valid(col).to_numpy(zero_copy_only=False)[rows]

        out: dict[str, pa.Array] = {}
        schema = self.arrow_schema(table.schema)
        for a in self.aggregates:
            counted = None
            values = None
            if a.where is not None:
                w, w_valid, _ = column(a.where)
                counted = w if w_valid is None else w & w_valid
            if a.value is not None:
                if a.how == "count":
                    valid = not_null(a.value)
                else:
                    values, valid, _ = column(a.value)
                if valid is not None:
                    counted = valid if counted is None else counted & valid
            got, has = pane_aggregate(a.how, route, values, counted, overflow=self.overflow)
            out_type = schema.field(a.alias).type
            out[a.alias] = _arrow(got, has, out_type)
        return out


def _numpy(col, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, pa.DataType]:
    """(values, not-NULL mask or None, Arrow type) of an Arrow column at ``rows``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    typ = arr.type
    valid = None
    if arr.null_count:
        valid = pc.is_valid(arr).to_numpy(zero_copy_only=False)[rows]
    if pa.types.is_timestamp(typ) or pa.types.is_date64(typ):
        arr = arr.cast(pa.int64())
    elif pa.types.is_date32(typ):
        arr = arr.cast(pa.int32())
    if arr.null_count:
        arr = pc.fill_null(arr, False if pa.types.is_boolean(arr.type) else 0)
    return arr.to_numpy(zero_copy_only=False)[rows], valid, typ


def _arrow(values: np.ndarray, has: np.ndarray, typ: pa.DataType) -> pa.Array:
    """Per-pane values as an Arrow array of ``typ``, NULL where a pane has none."""
    import pyarrow as pa

    mask = None if has.all() else ~has
    if pa.types.is_timestamp(typ) or pa.types.is_date64(typ):
        return pa.array(values.astype(np.int64), type=pa.int64(), mask=mask).cast(typ)
    if pa.types.is_date32(typ):
        return pa.array(values.astype(np.int32), type=pa.int32(), mask=mask).cast(typ)
    return pa.array(values, mask=mask).cast(typ)


def kernels_for(plan: ReplayPlan, inp: DataFrame) -> Kernels | None:
    """The kernels for the block's aggregates, or None when one of them is not a
    kernel's: then Spark aggregates, the general case (the choice, and the session
    setting that turns the kernels off: :func:`dfsql.spark.physical.choose`)."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F  # noqa: N812

    spark = plan.spark
    if not plan.stages.aggregate_calls:
        return None  # nothing to compute: the Spark path carries the keys and windows
    # (alias, how, argument SQL or None, FILTER condition SQL or None, and the column each
    # of those two is when it is one plain column, from the call's tree)
    parsed = []
    for call in plan.stages.aggregate_calls:
        if not call.decomposable or len(call.arguments) != 1:
            return None  # the model's rule: dfsql.model.aggregates.decomposable
        if call.arguments == ("*",) and not call.star:
            return None  # only COUNT takes *
        parsed.append((call.alias, call.function, None if call.star else call.arguments[0],
                       call.filter, call.argument_columns[0], call.filter_column))

    # what Spark would make of them (analysis only, nothing runs): result and input types
    reads = list(dict.fromkeys(s for _, _, a, w, _, _ in parsed for s in (a, w)
                               if s is not None))
    try:
        typed = inp.groupBy().agg(
            *[F.expr(sql).alias(alias) for sql, alias in plan.stages.aggregates],
            *[F.first(F.expr(s)) for s in reads]).schema
    except PySparkException:  # let the Spark path report it
        return None
    result_types = [f.dataType.simpleString() for f in typed.fields[:len(parsed)]]
    read_types = dict(zip(reads, (f.dataType.simpleString()
                                  for f in typed.fields[len(parsed):]), strict=True))

    columns = set(inp.columns)
    names: dict[str, str] = {}
    inputs: list[tuple[str, str]] = []

    def column(sql: str, plain: str | None) -> str:
        """The input column holding ``sql``: ``plain``, the column it is, if the input has
        it, else a new one."""
        if sql not in names:
            if plain in columns:
                names[sql] = plain
            else:
                names[sql] = f"__kin{len(inputs)}"
                inputs.append((names[sql], sql))
        return names[sql]

    out = []
    for (alias, how, arg, where, arg_column, where_column), rtype in zip(parsed, result_types,
                                                                          strict=True):
        atype = read_types.get(arg)
        if where is not None and read_types[where] != "boolean":
            return None
        ok = {"count": rtype == "bigint",
              "sum": (atype in _INTEGRAL and rtype == "bigint")
              or (atype in _FLOATING and rtype == "double"),
              "avg": atype in (*_INTEGRAL, *_FLOATING) and rtype == "double",
              "min": atype in _ORDERED and rtype == atype,
              "max": atype in _ORDERED and rtype == atype}[how]
        if not ok:
            return None
        out.append(KernelAggregate(alias, how, None if arg is None else column(arg, arg_column),
                                   None if where is None else column(where, where_column),
                                   rtype))
    ansi = spark.conf.get("spark.sql.ansi.enabled", "false").strip().lower() == "true"
    return Kernels(tuple(out), tuple(inputs), "raise" if ansi else "wrap")
