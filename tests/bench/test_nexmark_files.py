"""``python -m benchmarks.nexmark generate`` writes the three streams as directories of
Parquet files that Spark reads with Nexmark's columns as BIGINT, STRING and TIMESTAMP
(the generator's statistics: tests/bench/test_nexmark_generator.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # an xdist worker does not start in the checkout's root
    sys.path.insert(0, str(ROOT))

from benchmarks.nexmark.__main__ import main  # noqa: E402

BASE_US = 1_436_918_400_000_000  # 2015-07-15T00:00:00Z
STEP_US = 100  # 1e6 / 10,000 events per second


def test_the_command_writes_what_spark_reads(spark, tmp_path: Path, capsys) -> None:
    out = tmp_path / "nexmark"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.nexmark", "generate",
                           "--events", "5000", "--out", str(out), "--seed", "2",
                           "--file-seconds", "0.1"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "person 100, auction 300, bid 4,600" in proc.stdout
    types = {"person": "id:bigint,name:string,email_address:string,credit_card:string,"
                       "city:string,state:string,date_time:timestamp,extra:string,"
                       "arrival_time:timestamp",
             "auction": "id:bigint,item_name:string,description:string,initial_bid:bigint,"
                        "reserve:bigint,date_time:timestamp,expires:timestamp,seller:bigint,"
                        "category:bigint,extra:string,arrival_time:timestamp",
             "bid": "auction:bigint,bidder:bigint,price:bigint,channel:string,url:string,"
                    "date_time:timestamp,extra:string,arrival_time:timestamp"}
    counts = {"person": 100, "auction": 300, "bid": 4_600}
    for kind, schema in types.items():
        assert len(list((out / kind).glob("part-*.parquet"))) >= 5, kind
        frame = spark.read.parquet(str(out / kind))
        assert ",".join(f"{f.name}:{f.dataType.simpleString()}"
                        for f in frame.schema.fields) == schema, kind
        first, n = frame.agg(F.unix_micros(F.min("date_time")), F.count("*")).first()
        assert n == counts[kind] and first == BASE_US + (0 if kind == "person" else STEP_US
                                                         if kind == "auction" else 4 * STEP_US)
    capsys.readouterr()
    assert main(["generate", "--events", "10", "--out", str(out)]) == 1  # not over a run
    assert "already holds Parquet files" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the runner's own options: one it does not know
        main(["run", "--no-such-option"])
