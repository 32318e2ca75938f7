"""A continuous query's progress log: one record per micro-batch it ran, kept in its
checkpoint beside Spark's own logs, so that SHOW STREAMING QUERIES (and ALTER's
frontier) reads what the query's batches did, across idle periods and restarts.

Spark's progress reports alone cannot say it: Spark keeps the last 100 in memory only,
and while a stream is idle it posts a report every ``noDataProgressEventInterval``
(10 s) that ran no batch but carries the *next* batch's id with no rows and no dfsql
figures (:func:`batch_record` tells the two apart: only a batch that ran has an
``addBatch`` duration). Each record is written when Spark reports its batch, after the
batch committed (a listener on the query's session, and SHOW itself for the reports
it sees first), under the batch's id: a batch run again after a crash replaces its
record. A changed query (ALTER STREAMING QUERY) starts its new checkpoint with the
figures of the versions before it (:func:`write_base`).

Records are JSON files, written whole (a temporary file, renamed) through Python on a
local disk, through Hadoop's FileSystem elsewhere."""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from dfsql.session import listen_once, spark_context
from dfsql.spark.stream.checkpoint import last_committed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: the folder of the records in a query's checkpoint
LOG = "dfsql-progress"
#: the figures of a changed query's earlier versions, in its latest version's log
BASE = "base.json"
#: the name of dfsql's figures in a batch's progress (dfsql.spark.stream.plan.METRICS,
#: not imported: that module loads Spark's and numpy's)
METRICS = "dfsql"
#: the rows of files an earlier version of a changed query read, which the new version's
#: stream reads again and leaves out (dfsql.spark.stream.backfill.stream_input)
REREAD = "dfsql_reread"
#: dfsql's executor's figures a record keeps (dfsql.spark.stream.plan._observed)
FIGURES = ("elements_in", "state_elements", "state_change", "late_dropped", "late_kept",
           "watermark", "frontier", "rows_latest", "marks_latest", "panes", "retractions")


def batch_record(progress: Any) -> dict | None:
    """What a progress report says its batch did, or None for a report that ran no
    batch (Spark's idle report)."""
    durations = progress.get("durationMs") or {}
    if "addBatch" not in durations:
        return None
    ours = (progress.get("observedMetrics") or {}).get(METRICS)
    ours = ours.asDict() if hasattr(ours, "asDict") else dict(ours or {})
    spark_wm = (progress.get("eventTime") or {}).get("watermark")
    if spark_wm and spark_wm.startswith("1970-01-01T00:00:00"):  # Spark's: none yet
        spark_wm = None
    operators = progress.get("stateOperators") or []
    reread = (progress.get("observedMetrics") or {}).get(REREAD)
    reread = (reread.asDict() if hasattr(reread, "asDict") else dict(reread or {}))
    return {
        "batch_id": int(progress["batchId"]),
        "at": progress.get("timestamp"),
        "input_rows": int(progress.get("numInputRows") or 0) - int(reread.get("rows") or 0),
        "duration_ms": int(durations.get("triggerExecution") or 0),
        "dfsql": {k: None if ours.get(k) is None else
                  (ours[k] if isinstance(ours[k], int) else str(ours[k]))
                  for k in FIGURES if k in ours} if ours else None,
        "spark_watermark": None if not spark_wm else
        spark_wm.replace("T", " ").rstrip("Z").removesuffix(".000"),
        "spark_state": sum(int(op.get("numRowsTotal") or 0) for op in operators)
        if operators else None,
        # Spark's own operator: the rows its watermark dropped
        "spark_dropped": sum(int(op.get("numRowsDroppedByWatermark") or 0)
                             for op in operators) if operators else None,
    }


def record_time(value: Any, utc: bool = False) -> datetime | None:
    """A time as a record holds it, the one reader of them all (SHOW, the system tables,
    the console): Spark's ``at`` ends in ``Z`` and is read as UTC; dfsql's figures
    (``watermark``, ``frontier``) are the naive local wall-clock times PySpark's rows
    carry and stay naive, unless ``utc`` says a naive text is UTC (``spark_watermark``,
    written without its ``Z``). None for none, or for text that is no time."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        t = value
    else:
        try:
            t = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    return t.replace(tzinfo=timezone.utc) if utc and t.tzinfo is None else t


#: batches kept one record each (system.streaming_progress reads them); the batches
#: before fold into one record every FOLD_EVERY batches (fewer when fewer are kept), so a
#: query that runs for months keeps a bounded log. ``dfsql serve --progress-batches`` and
#: the session setting ``dfsql.progress.batches`` (read when a query starts) change it.
KEEP = 10_000
FOLD_EVERY = 1_000
KEEP_CONF = "dfsql.progress.batches"
_KEPT: dict[str, int] = {}  # checkpoint -> batches kept, when not KEEP


def keep(n: int) -> None:
    """This process keeps ``n`` batches per query from now on (``dfsql serve``)."""
    global KEEP
    if n < 1:
        raise ValueError("a query keeps the progress of at least 1 batch")
    KEEP = n


def kept(checkpoint: str) -> int:
    """How many batches the query of ``checkpoint`` keeps one record each."""
    return _KEPT.get(checkpoint, KEEP)


def write_record(spark: SparkSession | None, checkpoint: str, record: dict) -> None:
    """The record of one batch, replacing an earlier one of that batch's id."""
    _write(spark, _record_path(checkpoint, record["batch_id"]), json.dumps(record))
    batch, n = record["batch_id"], kept(checkpoint)
    every = max(1, min(FOLD_EVERY, n))
    if batch % every == 0 and batch >= n + every:
        _fold_before(spark, checkpoint, batch - n)


def folded(records: list[dict]) -> dict:
    """One record that stands for several batches' (in batch order), named after the
    last: their rows and state changes summed, their latest watermark and clock."""
    out: dict = {"batch_id": records[-1]["batch_id"], "at": records[-1].get("at"),
                 "input_rows": sum(r["input_rows"] for r in records),
                 "duration_ms": sum(r.get("duration_ms") or 0 for r in records),
                 "folded": sum(r.get("folded", 1) for r in records),
                 "spark_watermark": None, "spark_state": None, "dfsql": None}
    ours: dict = {}
    for r in records:
        mine = r.get("dfsql") or {}
        if "state_change" in mine:
            ours["state_change"] = (ours.get("state_change") or 0) + int(
                mine["state_change"] or 0)
        for k in ("late_dropped", "late_kept", "panes", "retractions"):  # counters: summed
            if mine.get(k) is not None:
                ours[k] = (ours.get(k) or 0) + int(mine[k])
        for k in ("watermark", "state_elements"):
            if mine.get(k) is not None:
                ours[k] = mine[k]
        if mine.get("frontier") is not None or mine.get("rows_latest") is not None:
            ours.update({k: mine.get(k) for k in ("frontier", "rows_latest", "marks_latest")})
        for k in ("spark_watermark", "spark_state"):
            if r.get(k) is not None:
                out[k] = r[k]
        if r.get("spark_dropped") is not None:
            out["spark_dropped"] = (out.get("spark_dropped") or 0) + r["spark_dropped"]
    out["dfsql"] = ours or None
    return out


_FOLDING = threading.Lock()


def _fold_before(spark: SparkSession | None, checkpoint: str, below: int) -> None:
    """The records of the batches before ``below`` folded into one (one fold at a time:
    the listener and a reader may both write the batch that folds, and a fold read
    half done would count its batches twice)."""
    with _FOLDING:
        _, records = read_log(spark, checkpoint)
        old = [r for r in records if r["batch_id"] < below]
        if len(old) < 2:
            return
        last = folded(old)
        _write(spark, _record_path(checkpoint, last["batch_id"]), json.dumps(last))
        for r in old[:-1]:
            _delete(spark, _record_path(checkpoint, r["batch_id"]))


def _record_path(checkpoint: str, batch: int) -> str:
    return f"{checkpoint.rstrip('/')}/{LOG}/{batch:010d}.json"


def write_base(spark: SparkSession | None, checkpoint: str, base: dict) -> None:
    """The figures of a changed query's earlier versions, before its new version runs."""
    _write(spark, f"{checkpoint.rstrip('/')}/{LOG}/{BASE}", json.dumps(base))


def read_log(spark: SparkSession | None, checkpoint: str) -> tuple[dict | None, list[dict]]:
    """(the earlier versions' figures or None, every batch's record in batch order)."""
    parsed = _read_all(spark, f"{checkpoint.rstrip('/')}/{LOG}")
    base = parsed.pop(BASE, None)
    return base, [r for _, r in sorted(parsed.items())]


# ---------------------------------------------------------------- the listener


_WATCHED: dict[str, str] = {}  # query name -> checkpoint
_LOCK = threading.Lock()


def watch(spark: SparkSession, name: str, checkpoint: str) -> None:
    """Record every batch the query ``name`` runs in ``spark`` into ``checkpoint``'s log
    from now on (before it starts: its first batch may finish before start returns). A
    report of another run of that name (an older version still reporting) is told by its
    id, which Spark keeps in the checkpoint's ``metadata``."""
    with _LOCK:
        _WATCHED[name] = checkpoint
    n = spark.conf.get(KEEP_CONF, None)
    if n is not None and str(n).strip().isdigit() and int(n) >= 1:
        _KEPT[checkpoint] = int(n)
    mark_lost(spark, checkpoint)
    # Spark Connect: none, SHOW records the reports it reads
    listen_once(spark, "progress", lambda: _recorder(spark))


def mark_lost(spark: SparkSession, checkpoint: str) -> None:
    """Before a restart: a batch Spark committed whose record was never written (the
    process killed between the commit and the listener's write, a few milliseconds)
    gets a record that says so (``lost``: its figures unknown, shown as NULL), so the
    log's batches stay 0, 1, 2, … with no gap (a batch run again replaces its record:
    none is ever there twice)."""
    local = _local(f"{checkpoint.rstrip('/')}/commits")
    if local is not None:
        try:
            ids = [int(n) for n in os.listdir(local) if n.isdigit()]
        except OSError:
            return
        last = max(ids, default=-1)
    else:
        last = last_committed(spark, checkpoint)
    if last < 0:
        return
    _, records = read_log(spark, checkpoint)
    have = {r["batch_id"] for r in records}
    start = max((r["batch_id"] for r in records if r.get("folded")), default=-1) + 1
    for b in range(start, last + 1):
        if b not in have:
            write_record(spark, checkpoint, {"batch_id": b, "at": None, "input_rows": 0,
                                             "duration_ms": 0, "lost": True, "dfsql": None,
                                             "spark_watermark": None, "spark_state": None})


def unwatch(name: str) -> None:
    """No longer record the query ``name`` (STOP)."""
    with _LOCK:
        _WATCHED.pop(name, None)


def record_report(spark: SparkSession | None, name: str | None, query_id: str,
                  progress: Any) -> None:
    """Record one progress report of the query ``name`` (run ``query_id``), if it ran a
    batch and the query is watched."""
    with _LOCK:
        checkpoint = _WATCHED.get(name or "")
    if checkpoint is None:
        return
    record = batch_record(progress)
    if record is None or _run_id(spark, checkpoint, query_id) != query_id:
        return
    write_record(spark, checkpoint, record)


_RUN_IDS: dict[str, str] = {}


def _run_id(spark: SparkSession | None, checkpoint: str, query_id: str) -> str | None:
    """The id of the query whose checkpoint this is (Spark's ``metadata`` file)."""
    if checkpoint not in _RUN_IDS or _RUN_IDS[checkpoint] != query_id:  # a new run there
        text = _read_one(spark, f"{checkpoint.rstrip('/')}/metadata")
        if text is None:
            return None
        _RUN_IDS[checkpoint] = json.loads(text.splitlines()[0])["id"]
    return _RUN_IDS[checkpoint]


def _recorder(spark: SparkSession):
    from pyspark.sql.streaming import StreamingQueryListener

    class Recorder(StreamingQueryListener):
        """Writes each batch's record as Spark reports it (on Spark's listener bus)."""

        def onQueryStarted(self, event) -> None:  # noqa: N802 (Spark's names)
            pass

        def onQueryProgress(self, event) -> None:  # noqa: N802
            p = event.progress
            try:
                record_report(spark, p.get("name"), str(p.get("id")), p)
            except Exception:  # noqa: BLE001 (a record SHOW will write when it reads)
                pass

        def onQueryIdle(self, event) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event) -> None:  # noqa: N802
            pass

    return Recorder()


# ---------------------------------------------------------------- files


def _local(path: str) -> str | None:
    """The local path of ``path``, or None when it is on another file system."""
    if path.startswith("file:"):
        return path[len("file:"):].replace("///", "/", 1) if path.startswith("file:///") \
            else path[len("file:"):]
    return None if ":" in path.split("/", 1)[0] else path


def _hadoop(spark: SparkSession, path: str):
    sc = spark_context(spark)
    if sc is None:
        return None, None, None
    jvm = sc._jvm
    jpath = jvm.org.apache.hadoop.fs.Path(path)  # type: ignore[union-attr]
    return jvm, jpath, jpath.getFileSystem(sc._jsc.hadoopConfiguration())  # type: ignore


def _write(spark: SparkSession | None, path: str, text: str) -> None:
    local = _local(path)
    if local is not None:
        os.makedirs(os.path.dirname(local), exist_ok=True)
        tmp = f"{local}.{threading.get_ident()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, local)
        return
    if spark is None:
        return
    _, jpath, fs = _hadoop(spark, path)
    if fs is None:
        return
    tmp = jpath.suffix(".tmp")
    out = fs.create(tmp, True)
    out.write(bytearray(text.encode()))
    out.close()
    fs.delete(jpath, False)
    fs.rename(tmp, jpath)


def _delete(spark: SparkSession | None, path: str) -> None:
    local = _local(path)
    if local is not None:
        try:
            os.remove(local)
        except OSError:
            pass
        _PARSED.pop(local, None)
        return
    if spark is not None:
        _, jpath, fs = _hadoop(spark, path)
        if fs is not None:
            fs.delete(jpath, False)


def _read_one(spark: SparkSession | None, path: str) -> str | None:
    local = _local(path)
    if local is not None:
        try:
            with open(local) as f:
                return f.read()
        except OSError:
            return None
    if spark is None:
        return None
    jvm, jpath, fs = _hadoop(spark, path)
    if fs is None or not fs.exists(jpath):
        return None
    return _hadoop_text(jvm, fs, jpath)


def _hadoop_text(jvm, fs, jpath) -> str:
    stream = fs.open(jpath)
    try:
        reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(stream, "UTF-8"))
        return "\n".join(iter(reader.readLine, None))
    finally:
        stream.close()


#: the local records read so far: path -> (modification time in ns, record); a record
#: is read again only when rewritten (a batch run again after a crash)
_PARSED: dict[str, tuple[int, dict]] = {}


def _read_all(spark: SparkSession | None, folder: str) -> dict[str, dict]:
    """{file name: record} of the records in ``folder`` ({}: none yet)."""
    local = _local(folder)
    if local is not None:
        out = {}
        try:
            entries = list(os.scandir(local))
        except OSError:
            return {}
        for e in entries:
            if not e.name.endswith(".json"):
                continue
            try:
                mtime = e.stat().st_mtime_ns
                known = _PARSED.get(e.path)
                if known is None or known[0] != mtime:
                    with open(e.path) as f:
                        known = (mtime, json.loads(f.read()))
                    _PARSED[e.path] = known
            except (OSError, ValueError):
                continue
            out[e.name] = known[1]
        return out
    if spark is None:
        return {}
    jvm, jfolder, fs = _hadoop(spark, folder)
    if fs is None or not fs.exists(jfolder):
        return {}
    out = {}
    for status in fs.listStatus(jfolder):
        name = status.getPath().getName()
        if name.endswith(".json"):
            out[name] = json.loads(_hadoop_text(jvm, fs, status.getPath()))
    return out
