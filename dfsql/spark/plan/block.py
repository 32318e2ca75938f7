"""One windowed block of a statement, planned: input stage → windows and panes →
aggregates → output stage (the statement's blocks: :mod:`dfsql.spark.plan.planner`).

1. the **input stage** (Spark SQL from the rewrite) projects keys, event time,
   processing time and the columns the aggregates read;
2. windows and panes are decided — natively by Spark where the semantics allow it (a
   batch input fires exactly one ON_TIME, last pane per key and window whatever the
   trigger, so it *is* ``GROUP BY window()`` / ``session_window()``), otherwise by the
   Dataflow model's driver over Arrow batches (:mod:`dfsql.spark.replay.panes`), or on a
   stream by :mod:`dfsql.spark.stream.plan`;
3. Spark computes every aggregate;
4. the **output stage** applies the SELECT expressions, HAVING, ORDER BY and LIMIT.

:meth:`BlockPlan.result` returns a :class:`PlannedBlock`, a value: the block's result
with what its replay or stream computed beside it.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlglot import exp

from dfsql.errors import AnalysisError, DfsqlError, WatermarkError
from dfsql.language.names import (
    EVENT_TIME,
    IN_QUERY,
    LATE_ROW,
    PANES_TABLE,
    PROCESSING_TIME,
    SORT_COLUMNS,
)
from dfsql.language.registered import with_registered_defaults
from dfsql.language.rewrite import Stages, rewrite
from dfsql.language.scan import Source
from dfsql.language.stages import with_relations, with_views
from dfsql.language.statement import Statement, WindowedBlock
from dfsql.language.tree_positions import written_at
from dfsql.model import clauses as c
from dfsql.spark import door
from dfsql.spark.errors import map_spark_error, spark_errors
from dfsql.spark.native_batch import batch_panes_sql, input_columns, null_time_rows_sql
from dfsql.spark.physical import choose
from dfsql.spark.plan.clock import clock_panes_sql, on_clock
from dfsql.spark.plan.original import from_columns, pane_columns_named, unresolved_pane_column
from dfsql.spark.planned import PlannedBlock
from dfsql.spark.replay.ordering import in_emit_order, shuffle_partitions
from dfsql.spark.replay.panes import replay_panes
from dfsql.spark.stream.backfill import history_input, stream_input
from dfsql.spark.stream.plan import check_streamable, native_panes, stream_panes
from dfsql.spark.values import (
    BUCKET_PROCESSOR,
    NATIVE_BATCH,
    NATIVE_STREAM,
    PhysicalPlan,
    StreamPlan,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from pyspark.sql import DataFrame, SparkSession

    from dfsql.language.continuous import Backfill

_counter = itertools.count()


def new_uid() -> str:
    """A suffix unique to one statement's temp view names."""
    return f"{next(_counter)}"


def interval(d: c.Duration) -> str:
    """A Spark interval string for a duration (exact, in microseconds)."""
    return f"{d.micros} microseconds"


class BlockPlan:
    """Everything needed to run one windowed block; results are lazy DataFrames."""

    def __init__(self, stmt: Statement, block: WindowedBlock, spark: SparkSession, uid: str,
                 registry: dict, backfill: Backfill | None = None) -> None:
        self.stmt = stmt
        #: a continuous query's history (BACKFILL FROM), read in the stream's place
        self.backfill = backfill
        self.spark = spark
        self.uid = uid
        self.src: Source = stmt.source
        self.registry = registry
        #: ON and PROCESSING TIME as the statement wrote them (a registered default's tree
        #: holds the registration's offsets, not the statement's): for errors' positions
        self._written_clauses = block.trees
        block = with_registered_defaults(block, registry)
        self.block = block
        self.clauses = block.clauses
        self.stages: Stages = rewrite(block, self.src, signed=reads_changelog(stmt, block))
        #: the temp views this plan registered (dropped once the statement is planned)
        self.registered: list[str] = []
        self._input: DataFrame | None = None
        self._timed_input: DataFrame | None = None
        #: the input stage's time columns read as TIMESTAMP (a DATE or TIMESTAMP_NTZ
        #: column, once the type check has seen it: :meth:`_checked_input`)
        self._time_casts: frozenset[str] = frozenset()

    def temp_view(self, df: DataFrame, name: str) -> None:
        """Register ``df`` as a temp view that only this statement's SQL reads: it is
        dropped once the statement is planned (a DataFrame is analysed when created, so
        the result keeps the view's plan, not its name)."""
        df.createOrReplaceTempView(name)
        self.registered.append(name)

    def name(self, base: str) -> str:
        return f"{base}_{self.uid}"

    @property
    def views(self) -> dict[str, str]:
        """The inner blocks' placeholder names → their views in this statement run."""
        return self.block.views(self.uid)

    def input_sql(self, timed: bool = False, relations: Mapping[str, str] | None = None,
                  ) -> str:
        """The input stage, reading the inner blocks' results under this run's views, its
        DATE or TIMESTAMP_NTZ event and processing times read as TIMESTAMPs; ``timed``:
        every row of the FROM, WHERE's verdict as a column (:meth:`timed_input_df`);
        ``relations``: tables read as other views instead (a backfill's history)."""
        if not self._time_casts and not relations:
            return self.stages.input_sql_for(self.views, timed)
        tree = with_views(self.stages.timed_input if timed else self.stages.input,
                          self.views)  # a copy
        if relations:
            tree = with_relations(tree, relations)
        for e in tree.expressions:
            if isinstance(e, exp.Alias) and e.alias in self._time_casts:
                e.set("this", exp.cast(e.this, exp.DataType.Type.TIMESTAMP))
        return tree.sql("spark")

    # ------------------------------------------------------------------ validation
    def _map_fragment(self, exc: BaseException) -> DfsqlError | None:
        """Map a Spark error on a generated stage back to the user's text: at the node of
        the block's tree the error is about (:func:`written_at`), else the block's start."""
        mapped = map_spark_error(exc, None)
        if mapped is None:
            return None
        trees = [(self.block.select, self.block.span[0])] if self.block.select else []
        trees += [(tree, e.pos.offset) for e, tree in self._written_clauses if e.pos.offset >= 0]
        fragment = next((ctx.fragment() for ctx in getattr(exc, "getQueryContext", list)()),
                        None)
        params = getattr(exc, "getMessageParameters", dict)() or {}
        renamed = {view: name for name, view in self.views.items()}
        at = written_at(trees, fragment, params.values(), renamed)
        p = self.src.pos(self.block.span[0] if at is None else at)
        return type(mapped)(mapped.message, p.line, p.column, mapped.hint)

    @contextmanager
    def _fragment_errors(self) -> Iterator[None]:
        """Spark's errors inside the block, on a generated stage, as the user's
        (:meth:`_map_fragment`); any other error as it is."""
        with spark_errors(None, mapper=self._map_fragment):
            yield

    def analyse_original(self) -> list[str] | None:
        """Analyse the user's SELECT (extension region blanked) with Spark.

        Its offsets are the user's, so unknown tables and columns are reported exactly
        where they were written; its schema gives Spark's own output column names.
        """
        from pyspark.errors import PySparkException

        sql = self.block.sql_for(self.uid)
        try:
            df = door.sql(self.spark, sql)
            return list(df.columns)
        except PySparkException as exc:
            if unresolved_pane_column(exc):
                return None  # the SELECT names window columns that only exist after windowing
            mapped = map_spark_error(exc, self.src, lambda k: k + self.block.span[0], sql)
            if mapped is None:
                raise
            raise mapped from None

    def original_names(self) -> tuple[list[str] | None, bool]:
        """Spark's names of the block's output (:meth:`analyse_original`), and whether
        that analysis was spared: a block that names pane columns its FROM lacks is not
        analysed as written (:mod:`dfsql.spark.plan.original`), and gives no names, as the
        refused analysis would; :meth:`_original_errors` runs it after all for a mistake."""
        from pyspark.errors import PySparkException

        named = pane_columns_named(self.block)
        if named:
            try:
                read = from_columns(self.input_df())
            except (PySparkException, DfsqlError):
                read = None  # the analysis as written reports it where it was written
            if read is not None and not named & read:
                return None, True
        return self.analyse_original(), False

    @contextmanager
    def _original_errors(self, spared: bool) -> Iterator[None]:
        """A failure after a spared analysis: the analysis as written first, so that a
        mistake is reported where the user wrote it, as it would have been before."""
        from pyspark.errors import PySparkException

        try:
            yield
        except (PySparkException, DfsqlError):
            if spared:
                self.analyse_original()
            raise

    def input_df(self) -> DataFrame:
        """The input stage, checked; analysed once per plan (every path reads it, and
        :meth:`is_streaming` before them)."""
        if self._input is None:
            self._input = self._checked_input()
        return self._input

    def timed_input_df(self, relations: Mapping[str, str] | None = None) -> DataFrame:
        """The input of a block that runs in processing time (a replay, a stream, EXPLAIN
        FIRINGS and WATERMARK): time belongs to the input (docs/reference.md#processing-time), so every
        row the FROM reads drives the watermark, the clock and the replay's end, and the
        column :data:`~dfsql.language.names.IN_QUERY` says which rows WHERE keeps, the
        only ones that enter windows (:func:`in_query`). A row WHERE removes that has no
        processing time never arrives: it is left out. Without a WHERE, the input stage.
        ``relations``: tables read as other views instead (a backfill's history in its
        stream's place), analysed anew."""
        inp = self.input_df()
        timed = self.stages.filters_input
        if not timed and not relations:
            return inp
        if self._timed_input is None or relations:
            df = self._analysed_input(timed, relations)
            if timed and PROCESSING_TIME in df.columns:
                df = df.where(f"{IN_QUERY} OR {PROCESSING_TIME} IS NOT NULL")
            if relations:
                return df
            self._timed_input = df
        return self._timed_input

    def _checked_input(self) -> DataFrame:
        """The input stage after checking the ON and PROCESSING TIME types
        (docs/reference.md#window, #processing-time). A DATE or TIMESTAMP_NTZ time is read as a TIMESTAMP in the session time
        zone (Spark's CAST: a DATE at its midnight, a TIMESTAMP_NTZ at its wall-clock
        time there), once, here: every path (Spark's window(), the replay's Arrow
        driver, a stream) then sees one type, and window_start, window_end and
        emit_time are TIMESTAMPs whatever the input's type."""
        from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

        df = self._analysed_input()
        schema = df.schema
        casts = set()
        for column, expr, clause, named in (
                (EVENT_TIME, self.clauses.on, "ON", "the ON expression"),
                (PROCESSING_TIME, self.clauses.processing_time, "PROCESSING TIME",
                 "PROCESSING TIME")):
            if column not in df.columns:
                continue
            t = schema[column].dataType
            if not isinstance(t, TimestampType | TimestampNTZType | DateType):
                line, col = c.line_col(expr.pos if expr else None)
                raise AnalysisError(
                    f"{named} must be a TIMESTAMP, TIMESTAMP_NTZ or DATE, but {expr} is "
                    f"{t.simpleString()}", line, col,
                    f"convert it, e.g. {clause} CAST({expr} AS TIMESTAMP)")
            if not isinstance(t, TimestampType):
                casts.add(column)
        if casts:
            self._time_casts = frozenset(casts)
            df = self._analysed_input()
        return df

    def _analysed_input(self, timed: bool = False,
                        relations: Mapping[str, str] | None = None) -> DataFrame:
        with self._fragment_errors():
            df = door.sql(self.spark, self.input_sql(timed, relations))
            df.schema  # noqa: B018 - analyses it: a mistake is reported here
        return df

    def is_streaming(self) -> bool:
        """Whether the block reads a streaming source (its input stage is a stream)."""
        return self.input_df().isStreaming

    def check_clauses(self) -> None:
        cl = self.clauses
        if isinstance(cl.watermark, c.WatermarkPerfect) and cl.processing_time is None:
            line, col = c.line_col(cl.watermark.pos)
            raise WatermarkError("WATERMARK PERFECT needs PROCESSING TIME", line, col,
                                 "the perfect watermark looks ahead in a replayed table")
        if cl.on is None and not isinstance(cl.window, c.GlobalWindows):
            line, col = c.line_col(cl.window.pos)
            raise AnalysisError("ON <event time> is required for this window", line, col,
                                "write e.g. ON event_time after the window, or register the "
                                "source with dfsql.register(name, df, event_time=...)")

    # ------------------------------------------------------------------ execution
    def batch_panes(self) -> DataFrame:
        """A batch input: every key and window gets one ON_TIME, last pane — natively."""
        inp = self.name("__dfsql_in")
        self.temp_view(self.input_df(), inp)
        with self._fragment_errors():  # a generated stage: placed in the user's block
            return door.sql(self.spark, batch_panes_sql(self, inp))

    def _output_df(self, panes_sql: str | None = None, ordered: bool = True,
                   stages: Stages | None = None) -> DataFrame:
        """The output stage (of ``stages``, by default the block's) over the panes: the
        temp view, or else the given subquery; without its default ORDER BY when not
        ``ordered`` (the stage must have one)."""
        view = self.name(PANES_TABLE)
        source = view if panes_sql is None else f"({panes_sql}) AS {view}"
        out_sql = (stages or self.stages).output.sql(source, ordered)
        with self._fragment_errors():
            return door.sql(self.spark, out_sql)

    def _input_subquery(self) -> str:
        """The input stage as a parenthesised subquery under its view's name, for the
        batch stages written as one statement."""
        return f"({self.input_sql()}) AS {self.name('__dfsql_in')}"

    def _batch_result(self) -> DataFrame:
        """A batch block as one statement: input, panes and output stages as subqueries.

        The same SQL as the step-by-step path, without analysing each stage again for a
        temp view (planning time is a fair share of a small batch query's). Any failure
        is reported by the step-by-step path, so errors stay exactly what they were."""
        from pyspark.errors import PySparkException

        self.input_df()  # checks the ON / PROCESSING TIME types
        inp = self._input_subquery()
        try:
            return self._output_df(batch_panes_sql(self, inp))
        except (PySparkException, DfsqlError):  # report it as the step-by-step path does
            self.temp_view(self.batch_panes(), self.name(PANES_TABLE))
            return self._output_df()

    def _clock_result(self, ordered: bool) -> DataFrame | None:
        """Such a block's result, in §7's order if ``ordered`` (None: the replay)."""
        self.input_df()  # checks the ON / PROCESSING TIME types
        made = clock_panes_sql(self, self._input_subquery())
        order_by = self.stages.default_order_by
        if made is None or order_by is None:
            return None if made is None else self._output_df(made[0])
        df = self._output_df(made[0], ordered=False)
        if ordered and made[1] is not None and _is_timestamp(df, "emit_time"):
            df = in_emit_order(df, order_by, *made[1], shuffle_partitions(self.spark))
        elif ordered:
            df = self._output_df(made[0])
        return df.drop(*SORT_COLUMNS)

    def result(self, ordered: bool = True) -> tuple[DataFrame, PlannedBlock]:
        """The block's result; without §7's default order when not ``ordered`` (a result
        that only feeds another windowed query's aggregation, where order is lost), and what
        planning it computed beside."""
        self.check_clauses()
        names, spared = self.original_names()
        with self._original_errors(spared):
            return self._result(names, ordered)

    def _result(self, names: list[str] | None,
                ordered: bool) -> tuple[DataFrame, PlannedBlock]:
        clock = on_clock(self, reads_changelog(self.stmt, self.block))  # windows on the clock
        df = None if clock is None else self._clock_result(ordered)
        if df is not None:
            return self._with_original_names(df, names), PlannedBlock(self, clock)
        physical = choose(self)
        if physical.executor in (NATIVE_STREAM, BUCKET_PROCESSOR):
            return self._stream_result(names, physical)
        if physical.executor == NATIVE_BATCH:
            df = self._batch_result()
            if self.clauses.late_rows_into:
                self._batch_late_rows().createOrReplaceTempView(self.clauses.late_rows_into)
            return self._with_original_names(df, names), PlannedBlock(self, physical)
        replayed = replay_panes(self, physical)
        self.temp_view(replayed.panes, self.name(PANES_TABLE))
        order_by = self.stages.default_order_by
        if order_by is not None and not ordered:
            df = self._output_df(ordered=False).drop(*SORT_COLUMNS)
        elif order_by is not None and replayed.emit_range is not None:
            # §7's order, partitioned by slices of the known emit-time range instead
            # of a sampled range exchange (see dfsql.spark.replay.ordering)
            df = self._output_df(ordered=False)
            if _is_timestamp(df, "emit_time"):
                df = in_emit_order(df, order_by, *replayed.emit_range,
                                   shuffle_partitions(self.spark)).drop(*SORT_COLUMNS)
            else:  # the SELECT list named another column emit_time
                df = self._output_df()
        else:
            df = self._output_df()
        return self._with_original_names(df, names), PlannedBlock(self, physical, replayed)

    def shape(self) -> DataFrame:
        """A DataFrame with the block's result columns that runs nothing when made
        (EXPLAIN's stand-in for an inner block): a stream's result as planned, else the
        batch result, whose columns a replay's result has too."""
        self.check_clauses()
        names, spared = self.original_names()
        with self._original_errors(spared):
            return self._shape(names)

    def _shape(self, names: list[str] | None) -> DataFrame:
        physical = choose(self)
        if physical.executor in (NATIVE_STREAM, BUCKET_PROCESSOR):
            return self._stream_result(names, physical)[0]
        if physical.executor == NATIVE_BATCH or self.stages.default_order_by is None:
            return self._with_original_names(self._batch_result(), names)
        # a replay in §7's order: its output stage reads the rank the replay gives each
        # pane; Spark's batch panes carry a constant one (a stand-in needs only columns)
        self.input_df()  # checks the ON / PROCESSING TIME types
        panes = batch_panes_sql(self, self._input_subquery(), ranked=True)
        return self._with_original_names(
            self._output_df(panes, ordered=False).drop(*SORT_COLUMNS), names)

    def _batch_late_rows(self) -> DataFrame:
        """LATE ROWS INTO of a batch block: its elements without an event time (none for
        GLOBAL without ON)."""
        late = door.sql(self.spark, null_time_rows_sql(self, self._input_subquery(),
                                                 EVENT_TIME in input_columns(self)))
        return late.withColumn("event_time", late["event_time"].cast("timestamp"))

    def _with_original_names(self, df: DataFrame, names: list[str] | None,
                             hidden: tuple[str, ...] = (),
                             stages: Stages | None = None) -> DataFrame:
        """The output columns under the names the user's query gives them (Spark's own
        analysis of the original text), the ``hidden`` columns after them kept as they are."""
        if names is None:
            return df
        output_names = (stages or self.stages).output_names
        wanted = list(names) + [n for n in output_names[len(names):]]
        visible = [n for n in df.columns if n not in hidden]
        if len(wanted) == len(visible) and wanted != visible:
            df = df.toDF(*wanted, *[h for h in hidden if h in df.columns])
        return df

    def _stream_result(self, names: list[str] | None,
                       physical: PhysicalPlan) -> tuple[DataFrame, PlannedBlock]:
        """A live stream's result (append mode): the panes of :mod:`dfsql.spark.stream.plan`
        through the output stage, each micro-batch's rows in no order (a streaming
        DataFrame cannot be sorted); its :class:`StreamPlan` keeps the hidden sort columns
        and the state store the query needs (the session's is left as it is)."""
        cl = self.clauses
        native = physical.executor == NATIVE_STREAM
        stages = self.stages
        if cl.processing_time is None or cl.late_rows_into:
            # the engine's clock is still a changelog; dropped rows ride with the panes
            # (the output stage differs, the input and the aggregates do not)
            stages = rewrite(self.block, self.src, changelog=cl.processing_time is None,
                             late_rows=bool(cl.late_rows_into),
                             signed=reads_changelog(self.stmt, self.block))
        check_streamable(self, stages)
        with spark_errors(self.src):
            history = None if self.backfill is None else history_input(self, self.backfill)
            state = None  # Spark's own operator keeps its own state
            if native:
                panes = native_panes(self)
            else:
                panes, *state = stream_panes(
                    self, stream_input(self, self.backfill), history,
                    restate=self.backfill is not None and self.backfill.restate)
        self.temp_view(panes, self.name(PANES_TABLE))
        late = cl.late_rows_into
        hidden = (*SORT_COLUMNS, LATE_ROW) if late else SORT_COLUMNS
        df = self._with_original_names(self._output_df(ordered=False, stages=stages), names,
                                       hidden, stages)
        # transformWithState runs only on RocksDB: the stream starts on it (dfsql.start)
        # a window's row in a table: its group keys and the window (GLOBAL's is NULL)
        row_key = (*stages.key_output_names, *(
            () if isinstance(cl.window, c.GlobalWindows) else ("window_start", "window_end")))
        stream = StreamPlan(df, stages.default_order_by, late, physical.state_store,
                            row_key, tuple((k.sql, k.at) for k in stages.unselected_keys),
                            tuple(state) if state else None)
        if late:  # the result itself: the panes (dfsql.start sends the rest to the view)
            df = df.where(f"{LATE_ROW} IS NULL")
        return df.drop(*hidden), PlannedBlock(self, physical, stream=stream)

    def null_time_count(self) -> int:
        """How many elements have no event time (what a batch block drops)."""
        if EVENT_TIME not in input_columns(self):
            return 0
        inp = self._input_subquery()
        return door.sql(self.spark, f"SELECT 1 FROM {inp} WHERE {EVENT_TIME} IS NULL").count()


def _is_timestamp(df: DataFrame, name: str) -> bool:
    from pyspark.sql.types import TimestampType

    fields = [f for f in df.schema.fields if f.name.lower() == name]
    return len(fields) == 1 and isinstance(fields[0].dataType, TimestampType)


def reads_changelog(stmt: Statement, block: WindowedBlock) -> bool:
    """Whether ``block`` replays (PROCESSING TIME) an ACCUMULATING AND RETRACTING result of
    the statement as a changelog: every pane and retraction is an element at its
    emit_time, and the block's aggregates subtract the retractions (docs/reference.md#emit). A
    batch block reads that result with its retractions cancelled in advance
    (:func:`net_changelog`), which gives the same final values in one pane."""
    return block.clauses.processing_time is not None and any(
        stmt.blocks[i].clauses.accumulation is c.Accumulation.ACCUMULATING_AND_RETRACTING
        for i in block.inner)
