"""The PostgreSQL sink against INTO TABLE, in one run (issue #54, item 5: target ≤ 1.5×).

The live retracting sessions query of ``bench_stream.py`` (SESSIONS(GAP 30 SECONDS),
WATERMARK DELAY 10 SECONDS, PROCESSING TIME arrival_time, early panes every 10 seconds,
EMIT ACCUMULATING AND RETRACTING) over the generator's events read as a parquet file
stream (``--files-per-batch`` files per micro-batch, ``availableNow``), each run from a
fresh checkpoint, in one Spark session, into:

* (a) :class:`~dfsql.spark.stream.table_sink.TableSink`, built as ``sinks.statement_into``
  builds INTO TABLE's (``global_temp.<name>``; no ``path``, as without ``--state-dir``);
* (b) :class:`~dfsql.spark.stream.postgres_sink.PostgresTable` (INTO TABLE
  NAME.schema.table, docs/guides/databases.md) on a real PostgreSQL server, started here
  with ``tests/postgres.py``'s launcher, the table dropped and its progress row deleted
  before each run.

Sides alternate after one warm-up each. Printed: each side's wall time (median of
``--runs``), the ratio b/a, the rows of the final table (asserted equal: PostgreSQL's
``count(*)`` and the TableSink's current rows, and their totals), and per micro-batch the
PostgreSQL sink's commit time (median / max), split into the batch's Spark work
(``toArrow``, which runs the micro-batch's stages), the CSV, the ``COPY``, the
``DELETE``, the ``INSERT``, the staging table's ``CREATE`` and ``ANALYZE``, and the rest
(the progress row, the transaction's commit). TableSink's per-batch time (its
``toPandas`` runs the same stages) is printed beside it.

Run from the repository's root with the test extra installed (``./dev test`` sets it
up: the PostgreSQL server's programs come from its ``pgserver`` wheel)::

    .venv/bin/python benchmarks/bench_postgres.py [--events 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # tests.postgres, from the repository's root
from bench_stream import DFSQL, TAILS, dataset  # noqa: E402

from dfsql.spark.stream.postgres_sink import PostgresChangelog, PostgresTable  # noqa: E402
from dfsql.spark.stream.table_sink import TableSink  # noqa: E402

QUERY = DFSQL.format(tail=TAILS["retracting"])
TABLE = "bench_sessions"


class _TimedBatch:
    """The micro-batch as ``_csv`` reads it, its ``toArrow`` (the Spark work) timed."""

    def __init__(self, batch: Any, times: dict[str, float]) -> None:
        self._batch, self._times = batch, times

    def toArrow(self) -> Any:  # noqa: N802 (DataFrame's name)
        t0 = time.perf_counter()
        out = self._batch.toArrow()
        self._times["toArrow"] += time.perf_counter() - t0
        return out


class _TimedCursor:
    """A psycopg cursor whose statements are timed by their first word (COPY, DELETE,
    INSERT, ...), so the sink's ``_write`` is measured without being changed."""

    def __init__(self, cur: Any, times: dict[str, float]) -> None:
        self._cur, self._times = cur, times

    def execute(self, sql: str, params: Any = None) -> Any:
        t0 = time.perf_counter()
        out = self._cur.execute(sql, params)
        self._times[sql.split()[0].upper()] += time.perf_counter() - t0
        return out

    @contextlib.contextmanager
    def copy(self, sql: str) -> Iterator[Any]:
        t0 = time.perf_counter()
        with self._cur.copy(sql) as c:
            yield c
        self._times["COPY"] += time.perf_counter() - t0


class _Timed:
    """A database sink with each batch's commit timed, and its parts (see the module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[dict[str, float]] = []

    def commit(self, batch: Any, batch_id: int) -> None:
        times: dict[str, float] = defaultdict(float)
        self._times = times
        t0 = time.perf_counter()
        super().commit(_TimedBatch(batch, times), batch_id)
        times["commit"] = time.perf_counter() - t0
        self.batches.append(times)

    def _write(self, cur: Any, data: bytes) -> None:
        t0 = time.perf_counter()
        super()._write(_TimedCursor(cur, self._times), data)
        self._times["_write"] = time.perf_counter() - t0


class TimedPostgresTable(_Timed, PostgresTable):
    pass


class TimedPostgresChangelog(_Timed, PostgresChangelog):
    pass


class TimedTableSink(TableSink):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[float] = []

    def commit(self, batch: Any, batch_id: int) -> None:
        t0 = time.perf_counter()
        super().commit(batch, batch_id)
        self.batches.append(time.perf_counter() - t0)


def _patch_csv() -> None:
    """Time ``postgres_sink._csv`` (toArrow included) where ``commit`` looks it up."""
    from dfsql.spark.stream import postgres_sink

    original = postgres_sink._csv

    def timed(batch: Any, *args: Any) -> bytes:
        t0 = time.perf_counter()
        out = original(batch, *args)
        batch._times["_csv"] += time.perf_counter() - t0
        return out

    postgres_sink._csv = timed


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} / {max(values):.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--files-per-batch", type=int, default=2)
    ap.add_argument("--warmups", type=int, default=1)
    ap.add_argument("--conf", nargs="*", default=[], metavar="KEY=VALUE",
                    help="session settings for both sides")
    args = ap.parse_args(argv)

    import dfsql
    from dfsql.connections import Connections
    from tests.postgres import Postgres

    _patch_csv()
    spark = dfsql.session()
    for kv in args.conf:
        spark.conf.set(*kv.split("=", 1))
    src = dataset(args.events)
    schema = spark.read.parquet(str(src)).schema
    tmp = Path(tempfile.mkdtemp(prefix="dfsql-bench-pg-"))
    pg = Postgres()
    pg.start()
    try:
        conn = Connections().add("bench_pg", pg.url())
        return _rounds(args, spark, src, schema, tmp, pg, conn)
    finally:
        pg.stop()
        pg.remove()
        shutil.rmtree(tmp, ignore_errors=True)


def _rounds(args: argparse.Namespace, spark: Any, src: Path, schema: Any, tmp: Path,
            pg: Any, conn: Any) -> int:
    """Warm-ups, then ``--runs`` rounds of (a) then (b); the figures printed."""
    import dfsql

    (spark.readStream.schema(schema).option("maxFilesPerTrigger", args.files_per_batch)
     .parquet(str(src)).createOrReplaceTempView("live"))

    def run(sink: Any, name: str) -> float:
        ck = tmp / "ck"
        shutil.rmtree(ck, ignore_errors=True)
        t0 = time.perf_counter()
        q = dfsql.start(QUERY, sink=sink, checkpoint=str(ck),
                        trigger={"availableNow": True}, name=name, spark=spark)
        q.awaitTermination()
        return time.perf_counter() - t0

    def table_side() -> tuple[float, TimedTableSink]:
        sink = TimedTableSink("bench_current", global_view=True)
        return run(sink, "bench_current"), sink

    def pg_side() -> tuple[float, TimedPostgresTable]:
        with pg.connect() as c:  # a fresh table and no progress row: every batch applies
            c.execute(f"DROP TABLE IF EXISTS public.{TABLE}")
            c.execute("DROP TABLE IF EXISTS public.dfsql_progress")
        sink = TimedPostgresTable(conn, "public", TABLE, query="bench_pg")
        return run(sink, "bench_pg"), sink

    for _ in range(args.warmups):
        table_side()
        pg_side()
    walls: dict[str, list[float]] = {"a": [], "b": []}
    for i in range(args.runs):
        ta, a = table_side()
        tb, b = pg_side()
        walls["a"].append(ta)
        walls["b"].append(tb)
        rows = _check_equal(a, pg)
        parts = _parts(b.batches)
        print(f"# run {i + 1}: TableSink {ta:.2f} s, PostgresTable {tb:.2f} s "
              f"({tb / ta:.2f}x), {rows} rows, {len(b.batches)} batches; per batch "
              f"median / max s: TableSink {_summary(a.batches)}, " + ", ".join(
                  f"{k} {v}" for k, v in parts.items()), flush=True)
    ma, mb = statistics.median(walls["a"]), statistics.median(walls["b"])
    print(json.dumps({"events": args.events, "runs": args.runs, "table_sink_s": round(ma, 3),
                      "postgres_s": round(mb, 3), "ratio": round(mb / ma, 2),
                      "rows": rows, "per_run_ratio": [round(b / a, 2) for a, b in
                                                      zip(walls["a"], walls["b"],
                                                          strict=True)]}), flush=True)
    return 0


def split(t: dict[str, float]) -> dict[str, float]:
    """One batch's commit and its parts, in seconds (see the module doc)."""
    named = {"commit": t["commit"], "toArrow": t["toArrow"], "csv": t["_csv"] - t["toArrow"],
             "COPY": t["COPY"], "DELETE": t["DELETE"], "INSERT": t["INSERT"],
             "CREATE+ANALYZE": t["CREATE"] + t["ANALYZE"]}
    named["rest"] = (t["commit"] - t["_csv"] - t["COPY"] - t["DELETE"] - t["INSERT"]
                     - t["CREATE"] - t["ANALYZE"])
    return named


def _parts(batches: list[dict[str, float]]) -> dict[str, str]:
    """Median / max per batch of the commit and its parts."""
    rows = [split(t) for t in batches]
    return {k: _summary([r[k] for r in rows]) for k in rows[0]}


def _check_equal(table: TimedTableSink, pg: Any) -> int:
    """The two final tables: equal row counts (asserted) and equal totals."""
    current = table.current
    with pg.connect() as c:
        count, total, n = c.execute(
            f"SELECT count(*), sum(total), sum(n) FROM public.{TABLE}").fetchone()
    assert count == len(current), f"PostgreSQL holds {count} rows, TableSink {len(current)}"
    assert (int(total), int(n)) == (int(current["total"].sum()), int(current["n"].sum())), \
        "the two tables' totals differ"
    return count


if __name__ == "__main__":
    sys.exit(main())
