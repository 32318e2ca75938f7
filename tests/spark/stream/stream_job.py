"""A streaming dfsql job for the recovery test: ``python stream_job.py SRC SINK CHECKPOINT``.

Runs the query of :data:`QUERY` over the parquet files in SRC (one file per micro-batch)
into a parquet sink until the files are consumed; killed with SIGKILL part way and run
again, it continues from CHECKPOINT."""

from __future__ import annotations

import sys

QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM live GROUP BY key "
         "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 20 SECONDS "
         "PROCESSING TIME arrival_time ALLOWED LATENESS 60 SECONDS "
         "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
         "EMIT ACCUMULATING AND RETRACTING")


def main(src: str, sink: str, checkpoint: str) -> None:
    import dfsql

    spark = dfsql.session("local[2]")
    schema = spark.read.parquet(src).schema
    (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src)
     .createOrReplaceTempView("live"))
    q = dfsql.start(QUERY, sink=sink, checkpoint=checkpoint, trigger={"availableNow": True},
                    spark=spark)
    q.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:4])
