"""SHOW STREAMING QUERIES (:mod:`dfsql.continuous`): each query's figures folded from
Spark's progress reports (:class:`Totals`), its inputs, its versions and its owner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the name of dfsql's figures in a batch's progress (dfsql.spark.stream.plan.METRICS, not
#: imported: that module loads Spark's and numpy's, which ``import dfsql`` does not)
METRICS = "dfsql"


@dataclass
class Totals:
    """A query's figures over all its micro-batches so far, folded from Spark's progress
    reports (one per batch): a report says what its batch did, and the last one is
    often a batch without data (input 0, no dfsql figures), which SHOW must not take for
    the query's state.

    * input_rows: every batch's ``numInputRows``, summed;
    * watermark: the latest batch's that has one — dfsql's own (the executor's
      ``observedMetrics``), else Spark's ``eventTime.watermark`` (Spark's own operator);
    * state: the elements dfsql's executor retains (its batches' ``state_change``,
      summed: every bucket, also those the last batch did not run), or the rows Spark's
      own operator keeps (``stateOperators[].numRowsTotal`` of the latest batch);
    * frontier, rows_latest, marks_latest: dfsql's executor's, of the latest batch that
      has them: the query's clock, and each input's latest processing time (the rows,
      and a ``WATERMARK FROM`` stream of marks).

    Spark keeps the last ``spark.sql.streaming.numRecentProgressUpdates`` reports (100):
    SHOW folds those it has not seen, so totals stay exact while SHOW runs at least that
    often."""

    last_batch: int = -1
    input_rows: int = 0
    watermark: str | None = None
    state: int | None = None
    frontier: str | None = None
    rows_latest: str | None = None
    marks_latest: str | None = None

    def fold(self, progress: list) -> None:
        for p in progress:
            batch = int(p["batchId"])
            if batch <= self.last_batch:
                continue
            self.last_batch = batch
            self.input_rows += int(p.get("numInputRows") or 0)
            ours = (p.get("observedMetrics") or {}).get(METRICS)
            ours = ours.asDict() if hasattr(ours, "asDict") else (ours or {})
            spark_wm = (p.get("eventTime") or {}).get("watermark")
            if ours.get("watermark") is not None:
                self.watermark = str(ours["watermark"])
            elif spark_wm and not spark_wm.startswith("1970-01-01T00:00:00"):  # none yet
                self.watermark = spark_wm.replace("T", " ").rstrip("Z").removesuffix(".000")
            if ours.get("frontier") is not None or ours.get("rows_latest") is not None:
                self.frontier, self.rows_latest, self.marks_latest = (
                    None if ours.get(k) is None else str(ours[k])
                    for k in ("frontier", "rows_latest", "marks_latest"))
            if "state_change" in ours:  # dfsql's executor (None: no bucket ran)
                self.state = (self.state or 0) + int(ours["state_change"] or 0)
            elif p.get("stateOperators"):
                self.state = sum(int(op.get("numRowsTotal") or 0)
                                 for op in p["stateOperators"])


SHOW_SCHEMA = ("name STRING, id STRING, status STRING, sink STRING, batches BIGINT, "
               "input_rows BIGINT, input_rows_per_second DOUBLE, "
               "processed_rows_per_second DOUBLE, watermark STRING, state_elements BIGINT, "
               "frontier STRING, inputs STRING, held_by STRING, versions STRING, "
               "started TIMESTAMP, owner STRING")


def show_queries(spark: SparkSession, running: list, failed_now: list) -> DataFrame:
    """SHOW STREAMING QUERIES of the ``running`` queries (:class:`dfsql.continuous.Running`)
    and those that failed to start again (:class:`dfsql.continuous.Failed`)."""
    from datetime import datetime, timezone

    rows = []
    failed_now = sorted(failed_now, key=lambda f: f.name)
    for r in sorted(running, key=lambda r: r.started):
        q = r.query
        status = "RUNNING" if q.isActive else "STOPPED"  # type: ignore[attr-defined]
        error = q.exception() if not q.isActive else None  # type: ignore[attr-defined]
        if error is not None:
            status = "FAILED: " + (str(error).strip().splitlines() or ["?"])[0]
        t = r.totals
        t.fold(q.recentProgress)  # type: ignore[attr-defined]
        p = q.lastProgress or {}  # type: ignore[attr-defined]
        rows.append((r.name, str(q.id), status, r.sink,  # type: ignore[attr-defined]
                     t.last_batch + 1, t.input_rows,
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


def versions_shown(versions: tuple[tuple[int, str | None], ...]) -> str:
    """SHOW's ``versions``: each version of the query (ALTER STREAMING QUERY makes one)
    and the frontier it took effect at."""
    return "; ".join(f"v{v} from " + (f"{at}" if at else "the start") for v, at in versions)


def inputs_shown(t: Totals) -> tuple[str | None, str | None]:
    """SHOW's ``inputs`` (each input's latest processing time) and ``held_by`` (the
    input the frontier stands at: the one the query waits for; several inputs on one
    clock stand at the earliest, LANGUAGE.md §4)."""
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
