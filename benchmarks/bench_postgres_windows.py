"""One micro-batch of many changed windows into PostgreSQL (issue #54: "a micro-batch of
100k changed windows commits in seconds").

A batch is handed to the sink's ``commit`` directly (the seam a stream's
``foreachBatch`` calls; no stream, so the figure is the sink's alone), built in Spark and
cached, so its ``toArrow`` reads memory:

* batch 0: ``--windows`` keys, each a new session window's EARLY pane (a fresh table:
  the ``DELETE`` finds nothing, the ``INSERT`` writes every row);
* batch 1: every one of those windows changed as a session that grows changes it: the
  EARLY pane's retraction, then the ON_TIME pane of the same key's longer window
  (``window_end`` 4 s on): 2 × ``--windows`` rows; the ``DELETE`` removes every row of
  the table and the ``INSERT`` writes the new windows';
* the same batch 1 into a fresh :class:`~dfsql.spark.stream.postgres_sink.PostgresChangelog`
  (``COPY`` only).

Each commit is split as ``bench_postgres.py`` splits it (toArrow, CSV, COPY, DELETE,
INSERT, the staging table's CREATE and ANALYZE, the rest: the progress row and the
transaction's commit); the table's rows are checked (count and totals) against the
batch's by arithmetic. ``--runs`` rounds after one warm-up, medians printed. Run from the
repository's root with the test extra installed::

    .venv/bin/python benchmarks/bench_postgres_windows.py [--windows 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # tests.postgres, from the repository's root
from bench_postgres import (  # noqa: E402
    TimedPostgresChangelog,
    TimedPostgresTable,
    _patch_csv,
    split,
)

COLUMNS = ("key STRING, total BIGINT, n BIGINT, window_start TIMESTAMP, window_end "
           "TIMESTAMP, pane_index BIGINT, pane_timing STRING, is_last BOOLEAN, emit_time "
           "TIMESTAMP, is_retraction BOOLEAN")
T0 = "TIMESTAMP '2024-01-01 00:00:00'"
#: key k's EARLY pane: 4 events, total 4, its session [T0, T0 + 36 s)
EARLY = (f"concat('k', id), 4L, 4L, {T0}, {T0} + INTERVAL 36 SECONDS, 0L, 'EARLY', false, "
         f"{T0} + INTERVAL 10 SECONDS")
#: its ON_TIME pane, 6 events, total 6, the session grown to [T0, T0 + 40 s)
ON_TIME = (f"concat('k', id), 6L, 6L, {T0}, {T0} + INTERVAL 40 SECONDS, 1L, 'ON_TIME', "
           f"true, {T0} + INTERVAL 50 SECONDS")


def batches(spark: Any, windows: int) -> tuple[Any, Any]:
    """Batch 0 (new windows) and batch 1 (each retracted, then its successor), cached.
    ``inline`` keeps a key's retraction before its pane in the batch's order."""
    names = [c.split()[0] for c in COLUMNS.split(", ")]
    new = spark.range(windows).selectExpr(f"inline(array(struct({EARLY}, false)))")
    changed = spark.range(windows).selectExpr(
        f"inline(array(struct({EARLY}, true), struct({ON_TIME}, false)))")
    out = []
    for frame in (new, changed):
        frame = frame.toDF(*names).cache()
        frame.count()
        out.append(frame)
    return out[0], out[1]


def _fresh(pg: Any, *tables: str) -> None:
    with pg.connect() as c:
        for t in (*tables, "dfsql_progress"):
            c.execute(f"DROP TABLE IF EXISTS public.{t}")


def one_round(spark: Any, pg: Any, conn: Any, new: Any, changed: Any, windows: int
              ) -> dict[str, dict[str, float]]:
    """Batch 0 and 1 into a fresh table, batch 1 into a fresh changelog: each commit's
    parts (seconds); the table checked after batch 1."""
    _fresh(pg, "bench_windows", "bench_windows_log")
    table = TimedPostgresTable(conn, "public", "bench_windows", query="bench_windows")
    table.open(spark, new.schema, ("key", "window_start", "window_end"), "bench_windows")
    table.commit(new, 0)
    table.commit(changed, 1)
    table.close()
    with pg.connect() as c:
        count, total, n, late = c.execute(
            "SELECT count(*), sum(total), sum(n), count(*) FILTER (WHERE window_end = "
            "window_start + INTERVAL '40 seconds') FROM public.bench_windows").fetchone()
    # every window replaced by its ON_TIME successor: 6 per key
    assert (count, int(total), int(n), late) == (windows, 6 * windows, 6 * windows, windows)
    log = TimedPostgresChangelog(conn, "public", "bench_windows_log", query="bench_windows")
    log.open(spark, changed.schema, ("key", "window_start", "window_end"), "bench_windows")
    log.commit(changed, 0)
    log.close()
    with pg.connect() as c:
        rows = c.execute("SELECT count(*) FROM public.bench_windows_log").fetchone()[0]
    assert rows == 2 * windows
    return {"new windows": split(table.batches[0]), "changed windows": split(table.batches[1]),
            "changelog": split(log.batches[0])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--windows", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)

    import dfsql
    from dfsql.connections import Connections
    from tests.postgres import Postgres

    _patch_csv()
    spark = dfsql.session()
    pg = Postgres()
    pg.start()
    try:
        conn = Connections().add("bench_pg", pg.url())
        new, changed = batches(spark, args.windows)
        one_round(spark, pg, conn, new, changed, args.windows)  # warm-up
        rounds = []
        for i in range(args.runs):
            rounds.append(one_round(spark, pg, conn, new, changed, args.windows))
            print(f"# run {i + 1}: " + "; ".join(
                f"{name}: " + ", ".join(f"{k} {v:.3f}" for k, v in parts.items())
                for name, parts in rounds[-1].items()), flush=True)
        medians = {name: {k: round(statistics.median(r[name][k] for r in rounds), 3)
                          for k in rounds[0][name]} for name in rounds[0]}
        print(json.dumps({"windows": args.windows, "runs": args.runs, "median_s": medians}),
              flush=True)
    finally:
        pg.stop()
        pg.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
