"""How long ``ALTER STREAMING QUERY`` takes (issue #34) as a function of what the query
has read, against a bounded replay and Spark's own batch aggregation of the same rows,
in the same run.

For each ``--events`` size, the generator's events (``gen_events.py``, 20 files in
arrival order) are a stream of files; ``CREATE STREAMING QUERY`` (INTO TABLE, sessions
with a 30-second gap) reads all of them; then ``ALTER STREAMING QUERY`` widens the gap to
60 seconds. Measured:

* ``alter_s``: the statement, until it answers (the new query checked and planned, the
  old one stopped, the new one started);
* ``restated_s``: from the statement until the new version's first micro-batch has
  completed: everything the query read, read again and replayed, and its table restated;
* ``replay_s``: the bounded replay of the new query over the same files (``dfsql.sql``);
* ``native_s``: Spark's own batch aggregation over them (``GROUP BY key,
  session_window(event_time, '60 seconds')``), the floor of reading them at all.

With ``--sink directory`` the query writes INTO DIRECTORY instead, and the new version's
first micro-batch restates the directory (the old query's current rows retracted, the
new one's added as RESTATED; ``table_rows`` is then that batch's rows).

One run per size (an ALTER changes the query; the sizes are the curve). Usage::

    python benchmarks/bench_alter.py [--events 250000 1000000 4000000] [--sink directory]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stream import dataset  # noqa: E402

QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM {t} GROUP BY key "
         "WINDOW SESSIONS(GAP {gap} SECONDS) ON event_time WATERMARK DELAY 10 SECONDS "
         "PROCESSING TIME arrival_time "
         "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
         "EMIT ACCUMULATING AND RETRACTING")
NATIVE = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM everything "
          "GROUP BY key, session_window(event_time, '60 seconds')")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, nargs="+", default=[250_000, 1_000_000, 4_000_000])
    ap.add_argument("--sink", choices=("table", "directory"), default="table")
    args = ap.parse_args(argv)

    import dfsql
    from dfsql.continuous_queries import QUERIES

    spark = dfsql.session()
    for events in args.events:
        src = dataset(events)
        schema = spark.read.parquet(str(src)).schema
        spark.readStream.schema(schema).parquet(str(src)).createOrReplaceTempView("live")
        spark.read.parquet(str(src)).createOrReplaceTempView("everything")
        out = tempfile.mkdtemp(prefix="bench-alter-") if args.sink == "directory" else None
        into = f" INTO DIRECTORY '{out}'" if out else ""
        dfsql.sql(f"CREATE STREAMING QUERY bench_alter{into} AS "
                  + QUERY.format(t="live", gap=30), spark)
        QUERIES.running["bench_alter"].query.processAllAvailable()
        t0 = time.perf_counter()
        dfsql.sql("ALTER STREAMING QUERY bench_alter AS " + QUERY.format(t="live", gap=60),
                  spark)
        alter = time.perf_counter() - t0
        QUERIES.running["bench_alter"].query.processAllAvailable()
        restated = time.perf_counter() - t0
        rows = _restatement_rows(spark, out) if out else \
            spark.table("global_temp.bench_alter").count()
        dfsql.sql("STOP STREAMING QUERY bench_alter", spark)
        t0 = time.perf_counter()
        dfsql.sql(QUERY.format(t="everything", gap=60), spark).write.format("noop") \
            .mode("overwrite").save()
        replay = time.perf_counter() - t0
        t0 = time.perf_counter()
        spark.sql(NATIVE).write.format("noop").mode("overwrite").save()
        native = time.perf_counter() - t0
        print(json.dumps({"events": events, "sink": args.sink, "table_rows": rows,
                          "alter_s": round(alter, 2),
                          "restated_s": round(restated, 2), "replay_s": round(replay, 2),
                          "native_s": round(native, 2),
                          "restated_vs_replay": round(restated / replay, 2),
                          "restated_vs_native": round(restated / native, 2)}), flush=True)
    return 0


def _restatement_rows(spark, out: str) -> int:
    """The rows of the directory's restatement batch: its RESTATED rows and the
    retractions emitted with them."""
    from pyspark.sql import functions as F  # noqa: N812

    written = spark.read.parquet(out)
    at = written.where(F.col("pane_timing") == "RESTATED").agg(F.max("emit_time")).first()[0]
    return written.where((F.col("pane_timing") == "RESTATED")
                         | (F.col("is_retraction") & (F.col("emit_time") == at))).count()


if __name__ == "__main__":
    sys.exit(main())
