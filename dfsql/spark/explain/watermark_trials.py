"""``EXPLAIN WATERMARK … TRY …`` on Spark (docs/reference.md#explaining-time): every watermark tried over
one read and one shuffle of the input, not one query per watermark.

1. The watermark is one function of processing time for every key, so each watermark's
   :class:`~dfsql.model.watermarks.Timeline` is computed once, on the driver, by the
   model (:func:`~dfsql.model.watermarks.timeline_for`) from the input's (processing
   time, event time) columns, read once as Arrow (16 bytes a row); a ``FROM`` table's
   is read from that table. Each comes with its end instant (the replay's end floor).
2. The input, cut to its keys and times, is repartitioned and sorted as the replay's is
   (by key, and for FIXED windows by window too: see :func:`dfsql.spark.replay.panes.by_window`),
   and one ``mapInArrow`` runs the model once per timeline over each run of whole keys
   (:func:`~dfsql.model.watermark_trials.run_trials`). A task merges its statistics and
   sends one small row per watermark.
3. The driver merges the tasks' rows and returns one row per watermark, the query's own
   first. The statement runs when it is planned (as EXPLAIN ANALYZE would): its result is
   those few rows.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from dfsql.errors import SourceError, WatermarkError
from dfsql.language.names import EVENT_TIME, PROCESSING_TIME
from dfsql.language.registered import registered_defaults
from dfsql.language.vocabulary import CLAUSE_WORDS
from dfsql.model import clauses as c
from dfsql.model.result import end_floor_of
from dfsql.model.trigger_notation import duration_text
from dfsql.model.watermark_trials import Latencies, TrialStats, run_trials
from dfsql.model.watermarks import Timeline, timeline_for
from dfsql.model.windows import NEG_INF, NULL_EVENT_TIME
from dfsql.spark.errors import spark_errors
from dfsql.spark.replay.driver import key_runs
from dfsql.spark.replay.ordering import shuffle_partitions
from dfsql.spark.replay.panes import by_window
from dfsql.spark.timelines import Shipped, check_processing_time, from_table_timeline, us
from dfsql.spark.values import in_query

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dfsql.language.watermark_tries import TriedWatermark
    from dfsql.spark.planned import BlockView

#: the result's columns: latencies in seconds (DOUBLE), NULL without an ON_TIME pane
RESULT_SCHEMA = ("watermark STRING, late_rows BIGINT, late_fraction DOUBLE, "
                 "dropped_rows BIGINT, dropped_fraction DOUBLE, panes BIGINT, "
                 "retractions BIGINT, on_time_latency_p50_s DOUBLE, "
                 "on_time_latency_p90_s DOUBLE, on_time_latency_p99_s DOUBLE")
_STATS_SCHEMA = ("trial INT, rows BIGINT, late BIGINT, dropped BIGINT, panes BIGINT, "
                 "retractions BIGINT, exact BOOLEAN, lat_values ARRAY<BIGINT>, "
                 "lat_counts ARRAY<BIGINT>")


def explain_watermark(plan: BlockView, tries: tuple[TriedWatermark, ...]) -> DataFrame:
    """One row per watermark — the query's own, then each tried one — of what replaying
    the block under it gives (see the module doc and
    :mod:`dfsql.model.watermark_trials` for what each column counts)."""
    cl = plan.clauses
    plan.check_clauses()
    if cl.processing_time is None:
        raise plan.src.error(
            WatermarkError, "EXPLAIN WATERMARK replays the table in arrival order: the query "
            "needs PROCESSING TIME", plan.block.region[1],
            "add PROCESSING TIME <arrival column> after the WATERMARK clause (without it a "
            "table arrives all at once and no watermark makes a row late)")
    if plan.is_streaming():
        perfect = next((wm for wm in [cl.watermark, *(t.watermark for t in tries)]
                        if isinstance(wm, c.WatermarkPerfect)), None)
        where = perfect.pos.offset if perfect else plan.block.span[0]
        raise plan.src.error(
            SourceError, "WATERMARK PERFECT looks ahead in a bounded table, and this query "
            "reads a stream" if perfect else "EXPLAIN WATERMARK replays a bounded table, "
            "and this query reads a stream", where,
            "explain the watermark on a bounded copy of the stream's history, e.g. a "
            "parquet table of its rows")
    inp = plan.timed_input_df()
    if EVENT_TIME not in inp.columns:  # GLOBAL without ON, as the replay reads it
        from pyspark.sql import functions as F  # noqa: N812

        inp = inp.withColumn(EVENT_TIME, F.timestamp_seconds(F.lit(0)))
    watermarks = [cl.watermark, *(t.watermark for t in tries)]
    # every row drives time (docs/reference.md#allowed-lateness); only those WHERE keeps are replayed and
    # counted: a row WHERE removes is never late or dropped
    trials = _timelines(plan, inp, watermarks)
    stats = _replayed(plan, in_query(inp), trials)
    labels = [_own_label(plan), *(t.text for t in tries)]
    rows = [_row(label, s) for label, s in zip(labels, stats, strict=True)]
    return plan.spark.createDataFrame(rows, RESULT_SCHEMA)


def _own_label(plan: BlockView) -> str:
    """The query's own watermark as written (or registered), said where it comes from."""
    cl = plan.clauses
    registered = registered_defaults(plan.stmt.blocks[plan.block.index], plan.registry)
    if "watermark" in registered.registered:
        table, text = registered.registered["watermark"]
        return f"{' '.join(text.split())} (registered with {table})"
    wm = cl.watermark
    if not cl.watermark_given and isinstance(wm, c.WatermarkDelay):
        return f"DELAY {duration_text(wm.delay)} (the query's default)"
    if isinstance(wm, c.WatermarkDelay) and wm.from_relation:
        return f"{wm} (the query's, from its relation's WATERMARK … DELAY OF)"
    # the clause as written: its tokens, from after the word WATERMARK to the next
    # clause's word (at the clause's depth) or the region's end
    tokens = plan.stmt.scanned.tokens if plan.stmt.scanned is not None else []
    at = next((k for k, t in enumerate(tokens) if t.start == wm.pos.offset), None)
    if at is None:
        return f"{wm} (the query's)"
    stop = next((t.start for t in tokens[at + 1:] if t.depth < tokens[at].depth or (
        t.depth == tokens[at].depth and t.is_word(*_NEXT_CLAUSE))), plan.block.region[1])
    span = (tokens[at].end, min(stop, plan.block.region[1]))
    written = plan.src.text[span[0]:span[1]]
    commented = written != plan.stmt.scanned.cleaned[span[0]:span[1]]
    said = " ".join(written.split()) if not commented else str(wm)
    return f"{said} (the query's)"


#: the words that end a WATERMARK clause: a later clause's
_NEXT_CLAUSE = tuple(CLAUSE_WORDS - {"WINDOW", "WATERMARK"})


def _timelines(plan: BlockView, inp: DataFrame,
               watermarks: list[c.Watermark]) -> list[tuple[Timeline, int]]:
    """Each watermark's timeline and end floor, from one read of the input's times."""
    with spark_errors(None):
        times = inp.select(PROCESSING_TIME, EVENT_TIME).toArrow()
    p = times.column(PROCESSING_TIME)
    check_processing_time(plan.clauses, p.null_count)
    arrival = us(p)
    event = us(times.column(EVENT_TIME), null=NULL_EVENT_TIME)
    last = int(arrival.max()) if len(arrival) else NEG_INF
    out = []
    for wm in watermarks:
        tl = (from_table_timeline(plan, wm) if isinstance(wm, c.WatermarkFrom)
              else timeline_for(wm, event, arrival))
        out.append((tl, end_floor_of(plan.clauses.trigger, last, tl)))
    return out


def _replayed(plan: BlockView, inp: DataFrame,
              trials: list[tuple[Timeline, int]]) -> list[TrialStats]:
    """Every trial's statistics, from one shuffle of the input's keys and times."""
    from pyspark.sql import functions as F  # noqa: N812

    cl = replace(plan.clauses, late_rows_into=None)
    keys = list(plan.stages.key_columns)
    small = inp.select(*[F.col(f"`{n}`") for n in [*keys, EVENT_TIME, PROCESSING_TIME]])
    per_window: list[str] = []
    if isinstance(cl.window, c.FixedWindows):  # one window a row: spread over the tasks
        small, per_window, _ = by_window(small, cl)
    group = [*keys, *per_window]
    parts = shuffle_partitions(plan.spark) if group else 1
    ordered = small.repartition(parts, *group) if group else small.repartition(1)
    ordered = ordered.sortWithinPartitions(*group, PROCESSING_TIME)
    driver = _TrialDriver(cl, Shipped(plan.spark, trials), group)
    with spark_errors(plan.src):
        got = ordered.mapInArrow(driver, _STATS_SCHEMA).toArrow().to_pydict()
    merged = [TrialStats() for _ in trials]
    for i, trial in enumerate(got["trial"]):
        part = TrialStats(got["rows"][i], got["late"][i], got["dropped"][i], got["panes"][i],
                          got["retractions"][i],
                          Latencies(np.asarray(got["lat_values"][i], np.int64),
                                    np.asarray(got["lat_counts"][i], np.int64),
                                    got["exact"][i]))
        merged[trial] = merged[trial].merge(part)
    return merged


def _row(label: str, s: TrialStats) -> tuple:
    def frac(n: int) -> float | None:
        return n / s.rows if s.rows else None

    def seconds(q: float) -> float | None:
        v = s.latencies.percentile(q)
        return None if v is None else v / 1e6

    return (label, s.late_rows, frac(s.late_rows), s.dropped_rows, frac(s.dropped_rows),
            s.panes, s.retractions, seconds(50), seconds(90), seconds(99))


class _TrialDriver:
    """The function given to ``mapInArrow``: the model once per watermark over each run
    of whole keys of a partition, merged into one row per watermark."""

    def __init__(self, clauses: c.Clauses, trials: Shipped, group: list[str]) -> None:
        self.clauses = clauses
        self.trials = trials
        self.group = group

    def __call__(self, batches):
        import pyarrow as pa

        trials = self.trials.get()
        merged: list[TrialStats] | None = None
        for table, ids in key_runs(batches, self.group):
            et = us(table.column(EVENT_TIME), null=NULL_EVENT_TIME)
            pt = us(table.column(PROCESSING_TIME))
            stats = run_trials(ids, et, pt, self.clauses, trials)
            merged = stats if merged is None else [
                a.merge(b) for a, b in zip(merged, stats, strict=True)]
        if merged is None:
            return
        yield pa.RecordBatch.from_pydict({
            "trial": pa.array(range(len(merged)), pa.int32()),
            "rows": [s.rows for s in merged], "late": [s.late_rows for s in merged],
            "dropped": [s.dropped_rows for s in merged], "panes": [s.panes for s in merged],
            "retractions": [s.retractions for s in merged],
            "exact": [s.latencies.exact for s in merged],
            "lat_values": pa.array([s.latencies.values for s in merged],
                                   pa.list_(pa.int64())),
            "lat_counts": pa.array([s.latencies.counts for s in merged],
                                   pa.list_(pa.int64()))})
