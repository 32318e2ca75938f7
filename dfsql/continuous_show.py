"""SHOW STREAMING QUERIES (:mod:`dfsql.continuous`): each query's figures over the
micro-batches it ran (:class:`Totals`, from its progress log), its inputs, its versions
and its owner."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from dfsql.spark.stream import progress_log as log

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

@dataclass(frozen=True)
class Totals:
    """A query's figures over all the micro-batches it ran, from its progress log
    (:mod:`dfsql.spark.stream.progress_log`: one record per batch, idle reports left
    out) and the figures of its earlier versions (``base``, an ALTERed query's).

    * batches, input_rows: every batch's, summed (the earlier versions' included);
    * watermark: the latest batch's that has one — dfsql's own (the executor's
      ``observedMetrics``), else Spark's (Spark's own operator);
    * state: the elements dfsql's executor retains (its batches' ``state_change``,
      summed: every bucket, also those the last batch did not run), or the rows Spark's
      own operator keeps (the latest batch's);
    * frontier, rows_latest, marks_latest: dfsql's executor's, of the latest batch that
      has them: the query's clock, and each input's latest processing time (the rows,
      and a ``WATERMARK FROM`` stream of marks).

    A version that has run no batch yet (after ALTER, or a restart before new data)
    shows the figures the versions before it left."""

    batches: int = 0
    input_rows: int = 0
    watermark: str | None = None
    state: int | None = None
    frontier: str | None = None
    rows_latest: str | None = None
    marks_latest: str | None = None

    @classmethod
    def of(cls, base: dict | None, records: list[dict]) -> Totals:
        t = cls(**base) if base else cls()
        batches, rows = t.batches, t.input_rows
        watermark, state = t.watermark, t.state
        clock = (t.frontier, t.rows_latest, t.marks_latest)
        own_state: int | None = None
        for r in records:
            rows += r["input_rows"]
            ours = r.get("dfsql") or {}
            if ours.get("watermark") is not None:
                watermark = ours["watermark"]
            elif r.get("spark_watermark"):
                watermark = r["spark_watermark"]
            if ours.get("frontier") is not None or ours.get("rows_latest") is not None:
                clock = tuple(ours.get(k) for k in ("frontier", "rows_latest",
                                                     "marks_latest"))
            if "state_change" in ours:  # dfsql's executor (None: no bucket ran)
                own_state = (own_state or 0) + int(ours["state_change"] or 0)
            elif r.get("spark_state") is not None:
                own_state = r["spark_state"]
        if records:
            batches += records[-1]["batch_id"] + 1
            state = own_state if own_state is not None else state
        return cls(batches, rows, watermark, state, *clock)

    def as_base(self) -> dict:
        """These figures as the base of a changed query's next version."""
        return asdict(self)


SHOW_SCHEMA = ("name STRING, id STRING, status STRING, sink STRING, batches BIGINT, "
               "input_rows BIGINT, input_rows_per_second DOUBLE, "
               "processed_rows_per_second DOUBLE, watermark STRING, state_elements BIGINT, "
               "frontier STRING, inputs STRING, held_by STRING, versions STRING, "
               "started TIMESTAMP, owner STRING")


def show_queries(spark: SparkSession, running: list, failed_now: list) -> DataFrame:
    """SHOW STREAMING QUERIES of the ``running`` queries (:class:`dfsql.continuous_queries.Running`)
    and those that failed to start again (:class:`dfsql.continuous_queries.Failed`)."""
    from datetime import datetime, timezone

    rows = []
    failed_now = sorted(failed_now, key=lambda f: f.name)
    for r in sorted(running, key=lambda r: r.started):
        q = r.query
        status = "RUNNING" if q.isActive else "STOPPED"  # type: ignore[attr-defined]
        error = q.exception() if not q.isActive else None  # type: ignore[attr-defined]
        if error is not None:
            status = "FAILED: " + (str(error).strip().splitlines() or ["?"])[0]
        elif getattr(r.sink_object, "retrying", None):  # a database sink's lost database
            status = f"RETRYING {r.sink}: {r.sink_object.retrying}"
        t = current_totals(spark, q, r.checkpoint)
        p = q.lastProgress or {}  # type: ignore[attr-defined]
        rows.append((r.name, str(q.id), status, r.sink,  # type: ignore[attr-defined]
                     t.batches, t.input_rows,
                     float(p.get("inputRowsPerSecond", 0.0) or 0.0),
                     float(p.get("processedRowsPerSecond", 0.0) or 0.0),
                     t.watermark, t.state, t.frontier, *inputs_shown(t),
                     versions_shown(r.versions),
                     datetime.fromtimestamp(r.started, timezone.utc).replace(tzinfo=None),
                     r.owner))
    for f in failed_now:
        rows.append((f.name, None, f"FAILED: {f.reason}", f.sink, None, None, 0.0, 0.0, None,
                     None, None, None, None, None,
                     datetime.fromtimestamp(f.since, timezone.utc).replace(tzinfo=None),
                     f.owner))
    return spark.createDataFrame(rows, SHOW_SCHEMA)


def current_totals(spark: SparkSession | None, query: object, checkpoint: str) -> Totals:
    """The figures of a running (or just stopped) query: its progress log, with the
    batches Spark has reported and the log does not have yet written into it (the
    listener writes them as Spark reports them; SHOW may read first)."""
    return Totals.of(*current_records(spark, query, checkpoint))


def current_records(spark: SparkSession | None, query: object, checkpoint: str,
                    recent: bool = True) -> tuple[dict | None, list[dict]]:
    """(the earlier versions' figures, every batch's record in batch order) of a running
    query: :func:`current_totals`' reading, which system.streaming_progress and the
    metrics read too (:mod:`dfsql.system_tables`). Not ``recent``: only Spark's latest
    report is added to the log (a scrape's: one call, not Spark's last 100 reports, each
    parsed; a batch the listener has not written yet shows at a later scrape)."""
    base, records = log.read_log(spark, checkpoint)
    reports = query.recentProgress if recent else [  # type: ignore[attr-defined]
        p for p in [query.lastProgress] if p]  # type: ignore[attr-defined]
    by_batch = {r["batch_id"]: r for r in records}
    # a batch folded into an older record stays there (Spark still reports it)
    folded = max((r["batch_id"] for r in records if r.get("folded")), default=-1)
    for p in reports:
        record = log.batch_record(p)
        if record is not None and record["batch_id"] > folded and \
                by_batch.get(record["batch_id"]) != record:
            by_batch[record["batch_id"]] = record
            log.write_record(spark, checkpoint, record)
    return base, [by_batch[b] for b in sorted(by_batch)]


def versions_shown(versions: tuple[tuple[int, str | None], ...]) -> str:
    """SHOW's ``versions``: each version of the query (ALTER STREAMING QUERY makes one)
    and the frontier it took effect at."""
    return "; ".join(f"v{v} from " + (f"{at}" if at else "the start") for v, at in versions)


def inputs_shown(t: Totals) -> tuple[str | None, str | None]:
    """SHOW's ``inputs`` (each input's latest processing time) and ``held_by`` (the
    input the frontier stands at: the one the query waits for; several inputs on one
    clock stand at the earliest, docs/reference.md#allowed-lateness)."""
    if t.rows_latest is None:
        return None, None
    if t.marks_latest is None and t.frontier == t.rows_latest:  # one input
        return f"rows: {t.rows_latest}", "rows"
    latest = {"rows": t.rows_latest, "marks": t.marks_latest or "nothing yet"}
    shown = "; ".join(f"{k}: {v}" for k, v in latest.items())
    if t.frontier is None:  # an input that sent nothing holds the clock
        return shown, "marks"
    held = [k for k, v in latest.items() if v == t.frontier]
    return shown, " and ".join(held) or None
