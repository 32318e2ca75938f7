"""Nexmark live (``run --mode stream``, benchmarks/nexmark/live.py): the bids as a file
stream in arrival order, and q0 and q7 run on it as continuous queries, dfsql and native
Spark, give the replay mode's rows of the same events.

20,000 events at 500 events/s of event time (40 s: windows close in mid-stream, not only
at the closing file), cut into 1-second files read 14 per micro-batch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # an xdist worker does not start in the checkout's root
    sys.path.insert(0, str(ROOT))

from benchmarks.nexmark import live, runner  # noqa: E402
from benchmarks.nexmark.config import BASE_TIME_US  # noqa: E402
from benchmarks.nexmark.generator import write  # noqa: E402

EVENTS = 20_000
RATE = 500
HOUR_US = 3_600_000_000


@pytest.fixture(scope="module")
def events(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("nexlive") / "events"
    write(out, EVENTS, seed=3, rate=RATE)
    return out


def _us(column: pa.ChunkedArray) -> np.ndarray:
    return column.cast(pa.int64()).to_numpy()


def test_the_stream_is_the_bids_in_arrival_order_then_the_closing_rows(events, tmp_path):
    files = live.chunks(events, tmp_path / "files")
    bids = pq.read_table(events / "bid")
    parts = [pq.read_table(f) for f in files]
    streamed = pa.concat_tables(parts[:-1])
    assert streamed.num_rows == bids.num_rows == 18_400  # 46 of every 50 events
    arrival = _us(streamed["arrival_time"])
    assert (np.diff(arrival) >= 0).all()  # file after file, row after row
    second = (arrival - BASE_TIME_US) // 1_000_000  # files hold whole seconds from the base
    spans = [np.unique((_us(p["arrival_time"]) - BASE_TIME_US) // 1_000_000)
             for p in parts[:-1]]
    assert all(len(s) == 1 for s in spans) and len(spans) == len(np.unique(second))
    mtimes = [f.stat().st_mtime_ns for f in files]
    assert mtimes == sorted(mtimes) and len(set(mtimes)) == len(mtimes)
    # the same bids as the bounded table, as a multiset
    key = ["auction", "bidder", "price", "date_time", "arrival_time"]
    assert (streamed.select(key).sort_by([(k, "ascending") for k in key]).equals(
        bids.select(key).sort_by([(k, "ascending") for k in key])))
    closing = parts[-1]
    last = max(arrival.max(), _us(streamed["date_time"]).max())
    event, arrive = closing["date_time"].to_pylist(), _us(closing["arrival_time"])
    assert closing.num_rows == 2 and event[1] is None  # the heartbeat
    assert _us(closing["date_time"])[0] > last + HOUR_US - 60_000_000
    assert arrive[0] == _us(closing["date_time"])[0] and arrive[1] == arrive[0] + 1_000_000
    assert pc.all(pc.is_null(closing["auction"])).as_py()


@pytest.mark.parametrize("name", ["q0", "q7"])
def test_live_rows_equal_the_replay(spark, events, tmp_path, name) -> None:
    total = runner.register(spark, events, cache=True)
    try:
        files = live.chunks(events, tmp_path / "files")
        t = live.measure(spark, name, files, tmp_path, runs=1, files_per_trigger=14,
                         check=True, events=total)
    finally:
        for kind in ("person", "auction", "bid"):
            spark.catalog.dropTempView(kind)
    assert (t.dfsql.error, t.native.error) == (None, None)
    assert t.same_rows is True and t.native_same_rows is True
    assert t.dfsql.batches >= 3  # 41 files, 14 a batch: it did stream
    bids = pq.read_table(events / "bid")
    if name == "q0":
        assert t.dfsql.rows == t.native.rows == bids.num_rows
    else:  # one row per 10-second window at least (ties: more), 40 s of bids
        assert t.dfsql.rows == t.native.rows >= 4
    assert t.dfsql.bids_per_s is not None and t.dfsql.bids_per_s > 0
