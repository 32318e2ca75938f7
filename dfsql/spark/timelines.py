"""The global watermark of a replay, computed on the executors (docs/reference.md#watermark).

The watermark is one function of processing time for every key, so it is computed once,
before the driver runs. Spark reduces the input on the executors to the instants at
which the watermark changes and only those reach the Python driver process — nothing
collects the input itself:

* ``DELAY d``: each partition keeps the rows that raise its running max of event time
  (in processing-time order); the driver takes the running max across those records
  (the model's own reduction, :meth:`~dfsql.model.watermarks.Timeline.of`). One job, no
  shuffle: a second task to combine them cost a small replay 135 ms of its 330 (twice
  what the one step costs) and a 1M-row replay 0.2 s (benchmarks/RESULTS.md).
* ``PERFECT``: each partition reduces its rows to the smallest event time per arrival
  instant; one task reduces those again and takes the smallest among the instants after
  each, keeping only the instants where that changes (the model's own two steps).
* ``PERCENTILE q``: each partition counts its rows per (arrival, rounded delay); one task
  runs those counts in arrival order and keeps the instants where the nearest-rank
  percentile changes (a rising timeline).
* ``FROM t``: the user's watermark table, which is already the change points.

First and last arrival (where a replay's emit times lie) come with DELAY's pass, and
otherwise from one row per partition (also one job without a shuffle); a NULL event time
belongs to no window and moves no watermark. The resulting
:class:`~dfsql.model.watermarks.Timeline` is as large as the watermark's changes; the
replay ships it to the tasks with :func:`ship` (a broadcast where Spark has one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dfsql.errors import DataError, DfsqlError, SourceError
from dfsql.language.names import EVENT_TIME, PROCESSING_TIME
from dfsql.model import clauses as c
from dfsql.model import watermarks as wmod
from dfsql.model.firings import time_text, zone
from dfsql.model.lexsort import lexsort
from dfsql.model.watermarks import DelayHistogram, Timeline, percentile_lags, round_delay
from dfsql.session import spark_context
from dfsql.spark import door
from dfsql.spark.errors import spark_errors
from dfsql.spark.values import late_row_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.spark.values import ReplayPlan

_TS = f"{PROCESSING_TIME} TIMESTAMP, {EVENT_TIME} TIMESTAMP"


def us(arr, null: int | None = None) -> np.ndarray:
    """An Arrow timestamp column as int64 microseconds (numpy, zero-copy where possible).

    A NULL becomes ``null`` (the caller says what a NULL means; without it the column
    must have none: numpy would otherwise turn it into a float NaN)."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_timestamp(arr.type) and arr.type.unit != "us":
        arr = arr.cast(pa.timestamp("us", tz=arr.type.tz))
    arr = arr.cast(pa.int64())
    if null is not None and arr.null_count:
        arr = arr.fill_null(null)
    return arr.to_numpy(zero_copy_only=False)


def watermark_timeline(plan: ReplayPlan, inp: DataFrame) -> tuple[Timeline, int | None,
                                                                  int | None]:
    """The watermark as a function of processing time, and the first and last arrivals
    of the whole input (None when it is empty)."""

    cl = plan.clauses
    wm = cl.watermark
    if isinstance(wm, c.WatermarkDelay):
        with spark_errors(None):
            rec = _delay_records(inp).toArrow()
        p, e = rec.column(PROCESSING_TIME), rec.column(EVENT_TIME)
        if p.null_count:  # the records keep one such row: count them all for the message
            with spark_errors(None):
                check_processing_time(cl, inp.where(f"{PROCESSING_TIME} IS NULL").count())
        p_all = us(p.filter(p.is_valid()))
        first, last = (int(p_all.min()), int(p_all.max())) if len(p_all) else (None, None)
        has_e = (p.is_valid().to_numpy(zero_copy_only=False)
                 & e.is_valid().to_numpy(zero_copy_only=False))
        return wmod.delay_timeline(us(e, null=0)[has_e], us(p, null=0)[has_e],
                                   wm.delay.micros), first, last
    first, last = _arrival_range(plan, inp)
    if isinstance(wm, c.WatermarkPerfect):
        with spark_errors(None):
            t = _perfect_changes(inp).toArrow()
        return wmod.Timeline.of(us(t.column("t")), us(t.column("wm"))), first, last
    if isinstance(wm, c.WatermarkPercentile):
        with spark_errors(None):
            t = _percentile_changes(inp, wm).toArrow()
        return wmod.Timeline.rising(us(t.column("t")), t.column("lag").to_numpy()), first, last
    if isinstance(wm, c.WatermarkFrom):
        return from_table_timeline(plan, wm), first, last
    raise TypeError(f"unknown watermark {wm!r}")


def from_table_timeline(plan: ReplayPlan, wm: c.WatermarkFrom) -> Timeline:
    """``WATERMARK FROM <table> [BY writer [IDLE TIMEOUT d]]``: the table's timeline."""

    series, writers = _read_watermark_table(plan, wm)
    if writers is None:
        return wmod.series_timeline(*series)
    timeout = None if wm.idle_timeout is None else wm.idle_timeout.micros
    return wmod.writers_timeline(*writers, timeout)


def check_processing_time(cl: c.Clauses, nulls: int) -> None:
    """A row without a processing time never arrives: a bounded replay refuses it rather
    than leave it out unseen (docs/reference.md#processing-time: no row is lost silently); the user says
    what it means, by filtering it out or giving it an arrival time."""
    if nulls:
        pt = cl.processing_time
        rows = "1 row" if nulls == 1 else f"{nulls:,} rows"
        raise DataError(
            f"PROCESSING TIME {pt} is NULL in {rows}: a row without a processing time "
            "never arrives",
            pt.pos.line if pt else None, pt.pos.column if pt else None,
            f"leave them out (WHERE {pt} IS NOT NULL) or give them an arrival time "
            f"(PROCESSING TIME COALESCE({pt}, ...))")


def _arrival_range(plan: ReplayPlan, inp: DataFrame) -> tuple[int | None, int | None]:
    """First and last arrival, from one row per partition (and no NULL processing time)."""
    import pyarrow.compute as pc

    with spark_errors(None):
        t = inp.select(PROCESSING_TIME).mapInArrow(arrival_ranges, _RANGES).toArrow()
    rows, known = (pc.sum(t.column(k)).as_py() or 0 for k in ("n", "known"))
    check_processing_time(plan.clauses, rows - known)
    first, last = pc.min(t.column("lo")).as_py(), pc.max(t.column("hi")).as_py()
    return (None, None) if first is None else (int(first), int(last))


_RANGES = "lo BIGINT, hi BIGINT, n BIGINT, known BIGINT"


def arrival_ranges(batches):
    """mapInArrow over one partition's arrivals: its first and last (int64 µs; NULL when
    none is known), its rows, and its rows with a known arrival."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = [b.column(0) for b in batches if b.num_rows]
    if not chunks:
        return
    arrivals = pa.chunked_array(chunks)
    bounds = pc.min_max(arrivals)
    yield pa.RecordBatch.from_arrays(
        [pa.array([bounds[k].value], pa.int64()) for k in ("min", "max")]
        + [pa.array([n], pa.int64()) for n in (len(arrivals),
                                                len(arrivals) - arrivals.null_count)],
        names=["lo", "hi", "n", "known"])


# --------------------------------------------------------------------------- DELAY


def _delay_records(inp: DataFrame) -> DataFrame:
    """Each partition's running-max changes of event time over processing time, its last
    arrival and a NULL processing time if it has one: the driver's Timeline.of combines
    them into the global changes."""
    return inp.select(PROCESSING_TIME, EVENT_TIME).mapInArrow(_running_max_records, _TS)


def _running_max_records(batches):
    """The (processing time, event time) rows that raise the running max of event time in
    processing-time order; the last arrival (event time NULL) and one row with a NULL
    processing time, if any, pass through for the caller's checks."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    t = pa.concat_tables(tables)
    ts = pa.timestamp("us", tz="UTC")
    nulls = t.filter(pc.is_null(t.column(0)))
    if nulls.num_rows:
        yield from nulls.slice(0, 1).rename_columns([PROCESSING_TIME, EVENT_TIME]).to_batches()
    t = t.filter(pc.is_valid(t.column(0)))
    if not t.num_rows:
        return
    # the last arrival (event time NULL): where the input ends
    yield pa.RecordBatch.from_arrays(
        [pa.array([pc.max(t.column(0)).cast(pa.int64()).as_py()], pa.int64()).cast(ts),
         pa.nulls(1, ts)], names=[PROCESSING_TIME, EVENT_TIME])
    t = t.filter(pc.is_valid(t.column(1)))  # a NULL event time moves no watermark
    if not t.num_rows:
        return
    # the running max at the last row of each instant, kept where it grows: the model's
    # own reduction of a timeline's raw points
    tl = Timeline.of(us(t.column(0)), us(t.column(1)))
    yield pa.RecordBatch.from_arrays([pa.array(tl.times).cast(ts),
                                      pa.array(tl.values).cast(ts)],
                                     names=[PROCESSING_TIME, EVENT_TIME])


# --------------------------------------------------------------------------- PERFECT


def _perfect_changes(inp: DataFrame) -> DataFrame:
    """Instants where the smallest event time among rows not yet arrived changes, by the
    model's two steps: each partition reduces its rows to the earliest event time per
    arrival instant (:func:`~dfsql.model.watermarks.earliest_per_arrival`); one task
    reduces those again and takes the smallest over the later instants
    (:func:`~dfsql.model.watermarks.perfect_changes`)."""
    per_partition = (inp.where(f"{EVENT_TIME} IS NOT NULL").select(PROCESSING_TIME, EVENT_TIME)
                     .mapInArrow(earliest_records, "t BIGINT, m BIGINT"))
    return per_partition.repartition(1).mapInArrow(perfect_records, "t BIGINT, wm BIGINT")


def _columns(batches) -> tuple[np.ndarray, np.ndarray] | None:
    """A mapInArrow task's two columns as int64 µs (None when it has no rows)."""
    import pyarrow as pa

    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return None
    t = pa.concat_tables(tables)
    return us(t.column(0)), us(t.column(1))


def earliest_records(batches):
    """mapInArrow over (arrival, event time) rows: the earliest event time per instant."""
    import pyarrow as pa

    cols = _columns(batches)
    if cols is not None:
        t, m = wmod.earliest_per_arrival(*cols)
        yield pa.RecordBatch.from_pydict({"t": t, "m": m})


def perfect_records(batches):
    """mapInArrow over every partition's :func:`earliest_records`: PERFECT's changes."""
    import pyarrow as pa

    cols = _columns(batches)
    if cols is not None:
        t, wm = wmod.perfect_changes(*wmod.earliest_per_arrival(*cols))
        yield pa.RecordBatch.from_pydict({"t": t, "wm": wm})


# --------------------------------------------------------------------------- PERCENTILE


def _percentile_changes(inp: DataFrame, wm: c.WatermarkPercentile) -> DataFrame:
    """(instant, lag) where the delay percentile plus DELAY changes: each partition
    reduces its rows to a count per (arrival, rounded delay); one task runs those in
    arrival order."""
    fn = _PercentileLags(wm.percentile, wm.delay.micros)
    return (inp.where(f"{EVENT_TIME} IS NOT NULL").select(PROCESSING_TIME, EVENT_TIME)
            .mapInArrow(delay_counts, "t BIGINT, d BIGINT, n BIGINT")
            .repartition(1).sortWithinPartitions("t")
            .mapInArrow(fn, "t TIMESTAMP, lag BIGINT"))


def delay_counts(batches):
    """mapInArrow over (arrival, event time) rows: how many rows arrived at each instant
    with each rounded delay (the model's :func:`~dfsql.model.watermarks.round_delay`)."""
    import pyarrow as pa


    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    t = pa.concat_tables(tables)
    a, e = us(t.column(0)), us(t.column(1))
    yield pa.RecordBatch.from_pydict(dict(zip("tdn", count_pairs(a, round_delay(a - e)),
                                              strict=True)))


def count_pairs(a: np.ndarray, d: np.ndarray, n: np.ndarray | None = None):
    """Distinct (a, d) pairs, sorted, with their (summed) counts."""
    if n is None:
        n = np.ones(len(a), np.int64)
    if not len(a):
        return a, d, n
    o = lexsort((d, a))
    a, d, n = a[o], d[o], n[o]
    new = np.r_[True, (a[1:] != a[:-1]) | (d[1:] != d[:-1])]
    starts = np.flatnonzero(new)
    return a[starts], d[starts], np.add.reduceat(n, starts)


class _PercentileLags:
    """mapInArrow over (arrival, rounded delay, count) in arrival order: the model's
    running percentile, emitting only the instants where the lag changes."""

    def __init__(self, q: float, delay: int) -> None:
        self.q, self.delay = q, delay

    def __call__(self, batches):
        import pyarrow as pa


        tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        if not tables:
            return
        t = pa.concat_tables(tables)
        a, d, n = count_pairs(*(t.column(i).to_numpy() for i in range(3)))
        times, lags, _ = percentile_lags(DelayHistogram.empty(), a, d, n, self.q, self.delay)
        tl = Timeline.rising(times, lags)
        assert tl.lags is not None
        yield pa.RecordBatch.from_arrays(
            [pa.array(tl.times).cast(pa.timestamp("us", tz="UTC")), pa.array(tl.lags)],
            names=["t", "lag"])


# --------------------------------------------------------------------------- FROM


def watermark_table(plan: ReplayPlan, wm: c.WatermarkFrom) -> DataFrame:
    """The FROM table's columns, in order: (processing_time, watermark), or with BY
    (writer, processing_time, noted_time); a positioned error names what is missing."""

    pos = wm.pos
    want = ["processing_time", "watermark"] if wm.writer is None else [
        wm.writer, "processing_time", "noted_time"]
    with spark_errors(plan.src, lambda k: pos.offset):
        df = door.table(plan.spark, wm.table)
        cols = [x.lower() for x in df.columns]
    missing = [w for w in want if w.lower() not in cols]
    if missing:
        raise SourceError(
            f"WATERMARK FROM {wm.table} needs columns ({', '.join(want)}); "
            f"it has ({', '.join(df.columns)})", pos.line, pos.column,
            "a watermark table has one row per (processing_time, watermark)" if wm.writer is None
            else "a writers' table has one row per (writer, processing_time, noted_time)")
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.types import DateType, TimestampNTZType

    # a DATE or TIMESTAMP_NTZ time is a TIMESTAMP in the session time zone, as the
    # query's own event and processing times are (BlockPlan._checked_input)
    types = {f.name.lower(): f.dataType for f in df.schema.fields}
    return df.select(*want[:-2], *[
        F.col(w).cast("timestamp").alias(w)
        if isinstance(types[w.lower()], DateType | TimestampNTZType) else F.col(w)
        for w in want[-2:]])


def _read_watermark_table(plan: ReplayPlan, wm: c.WatermarkFrom):
    t = watermark_table(plan, wm).toArrow()
    if wm.writer is None:
        return (us(t.column(0)), us(t.column(1))), None
    import pyarrow.compute as pc

    writer_ids = pc.dictionary_encode(t.column(0)).combine_chunks().indices.to_numpy(
        zero_copy_only=False)
    return None, (writer_ids.astype(np.int64), us(t.column(1)), us(t.column(2)))


# --------------------------------------------------------------------------- shipping


class Shipped:
    """A value the replay's tasks read: a broadcast variable where the session has a
    SparkContext (classic Spark), else the value itself in the task's closure (Spark
    Connect has no broadcast)."""

    def __init__(self, spark, value: Any) -> None:

        self._bc = None
        self._value = None
        sc = spark_context(spark)
        if sc is not None:
            self._bc = sc.broadcast(value)
        else:
            self._value = value

    def get(self) -> Any:
        return self._bc.value if self._bc is not None else self._value


def holding_writer(plan: ReplayPlan, wm: c.WatermarkFrom, end_time: int) -> str | None:
    """``FROM … BY writer``: the writer holding the watermark at ``end_time``
    (:func:`dfsql.model.watermarks.holding_writer`), read from the writers' table."""
    t = watermark_table(plan, wm).toArrow()
    timeout = None if wm.idle_timeout is None else wm.idle_timeout.micros
    writer = wmod.holding_writer(t.column(0).to_pylist(), us(t.column(1), null=0),
                                 us(t.column(2), null=0), timeout, end_time)
    return None if writer is None else str(writer)


def ahead_note(plan: ReplayPlan, timeline: Timeline | None) -> str | None:
    """The dropped-row warning's note when the replay's watermark ran ahead of processing
    time (:meth:`~dfsql.model.watermarks.Timeline.ahead_of_processing_time`): when, to
    what, and for DELAY the row that moved it there (its event time, and its keys read
    back from the input: one filtered scan, only for a warning), else None."""
    ahead = None if timeline is None else timeline.ahead_of_processing_time()
    if ahead is None:
        return None
    at, wm = ahead
    tz = zone(plan.spark.conf.get("spark.sql.session.timeZone"))
    note = (f"The watermark ran ahead of processing time: at {time_text(at, tz)} it "
            f"became {time_text(wm, tz)}")
    if not isinstance(plan.clauses.watermark, c.WatermarkDelay):
        return note
    event = wm + plan.clauses.watermark.delay.micros
    note += f", moved there by the row arriving then with event time {time_text(event, tz)}"
    keys = late_row_columns(plan).keys
    if not keys:
        return note
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F  # noqa: N812

    try:  # the keys only name the row: a warning never fails for them
        rows = (plan.timed_input_df()
                .where((F.unix_micros(F.col(PROCESSING_TIME)) == at)
                       & (F.unix_micros(F.col(EVENT_TIME).cast("timestamp")) == event))
                .select(*[k for k, _ in keys]).limit(1).collect())
    except (PySparkException, DfsqlError):
        rows = []
    if rows:
        note += " (" + ", ".join(f"{n} = {v!r}" for (_, n), v in
                                 zip(keys, rows[0], strict=True)) + ")"
    return note
