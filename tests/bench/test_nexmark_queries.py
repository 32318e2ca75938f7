"""Nexmark's queries through dfsql equal an independent computation of the same 100k
events (benchmarks/nexmark/: the generator, queries/, native/, the runner):

* every query, as written (batch), equals Spark's own SQL of it — ``native/qN.sql`` for a
  windowed query (``window()``, ``session_window()``), the same text through
  ``spark.sql`` for one without dfsql's clauses — as multisets of rows, the pane columns
  set aside;
* every windowed query replayed on the arrival clock (``WATERMARK DELAY 3 SECONDS
  PROCESSING TIME arrival_time``: no generated event is later than 3 s, so none is late)
  equals the same;
* the retracting variants (early, on-time and late panes, each retracting the one
  before) leave, summed with their retractions negated, each window's final value as
  pandas computes it from the bids: counts per auction in 10-second windows every 2
  seconds, the highest price per 10 seconds, each bidder's sessions of 10 seconds' gap
  (a session is the bids less than 10 s apart; it ends 10 s after its last)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # an xdist worker does not start in the checkout's root
    sys.path.insert(0, str(ROOT))

import dfsql  # noqa: E402
from benchmarks.nexmark import runner  # noqa: E402
from benchmarks.nexmark.generator import write  # noqa: E402

EVENTS = 100_000
WINDOWED = [q for q in runner.ORDER if runner.is_windowed(q)]


@pytest.fixture(scope="module")
def nexmark(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("nexmark") / "events"
    write(out, EVENTS, seed=3)
    runner.register(spark, out, cache=True)
    yield spark.read.parquet(str(out / "bid")).toPandas()
    for kind in ("person", "auction", "bid"):
        spark.catalog.dropTempView(kind)


def _same(spark, name: str, mode: str) -> tuple[int, int, int]:
    """(rows, rows only dfsql has, rows only Spark has), each side run once."""
    ours = dfsql.sql(runner.query_text(name, mode), spark)
    ours = Counter(map(tuple, ours.drop(*runner._pane_columns(ours.columns)).collect()))
    theirs = Counter(map(tuple, spark.sql(runner.native_text(name)).collect()))
    return (sum(ours.values()), sum((ours - theirs).values()),
            sum((theirs - ours).values()))


@pytest.mark.parametrize("name", runner.ORDER)
def test_each_query_equals_spark_on_the_same_events(spark, nexmark, name) -> None:
    rows, only_ours, only_theirs = _same(spark, name, "batch")
    assert (only_ours, only_theirs) == (0, 0)
    if name not in ("q2", "q14"):  # a selection the 100k events may leave empty
        assert rows > 0


@pytest.mark.parametrize("name", WINDOWED)
def test_each_windowed_query_replayed_on_the_arrival_clock_is_the_same(spark, nexmark,
                                                                       name) -> None:
    rows, only_ours, only_theirs = _same(spark, name, "replay")
    assert rows > 0 and (only_ours, only_theirs) == (0, 0)


def _folded(spark, name: str, keys: list[str], value: str) -> dict[tuple, int]:
    """The retracting variant's rows summed per window, retractions negated; windows
    that sum to nothing (a session merged away) left out."""
    df = dfsql.sql(runner.query_text(name, "replay"), spark).toPandas()
    assert df.is_retraction.any()  # it did revise panes
    assert set(df.pane_timing) >= {"EARLY", "ON_TIME"}
    signed = df[value].where(~df.is_retraction, -df[value])
    sums = signed.groupby([df[k] for k in [*keys, "window_start", "window_end"]]).sum()
    return {k: int(v) for k, v in sums.items() if v != 0}


def _micros(ts: pd.Series) -> np.ndarray:
    return ts.dt.tz_localize(None).astype("datetime64[us]").astype(np.int64).to_numpy() \
        if ts.dt.tz is not None else ts.astype("datetime64[us]").astype(np.int64).to_numpy()


def _ts(us: np.ndarray) -> pd.Series:
    return pd.Series(us.astype("datetime64[us]"))


def test_q5_retracting_leaves_the_counts_of_each_sliding_window(spark, nexmark) -> None:
    t = _micros(nexmark.date_time)
    step, size = 2_000_000, 10_000_000
    last = t // step * step  # the latest window start at or before each bid
    starts = np.concatenate([last - k * step for k in range(size // step)])
    auctions = np.tile(nexmark.auction.to_numpy(), size // step)
    want = pd.DataFrame({"a": auctions, "s": starts}).value_counts()
    expected = {(a, s, s + size): int(n) for (a, s), n in want.items()}
    got = _folded(spark, "q5_retracting", ["auction"], "num")
    assert {(a, _us(s), _us(e)): n for (a, s, e), n in got.items()} == expected


def test_q7_retracting_leaves_the_highest_price_of_each_window(spark, nexmark) -> None:
    start = _micros(nexmark.date_time) // 10_000_000 * 10_000_000
    want = nexmark.price.groupby(start).max()
    expected = {(s, s + 10_000_000): int(p) for s, p in want.items()}
    got = _folded(spark, "q7_retracting", [], "maxprice")
    assert {(_us(s), _us(e)): p for (s, e), p in got.items()} == expected


def test_q11_retracting_leaves_each_bidders_sessions(spark, nexmark) -> None:
    gap = 10_000_000
    bids = pd.DataFrame({"b": nexmark.bidder, "t": _micros(nexmark.date_time)})
    bids = bids.sort_values(["b", "t"], kind="stable")
    new = (bids.b.diff() != 0) | (bids.t.diff() >= gap)
    bids["session"] = new.cumsum()
    s = bids.groupby("session").agg(b=("b", "first"), lo=("t", "min"), hi=("t", "max"),
                                     n=("t", "size"))
    expected = {(int(r.b), int(r.lo), int(r.hi) + gap): int(r.n) for r in s.itertuples()}
    got = _folded(spark, "q11_retracting", ["bidder"], "bid_count")
    assert {(b, _us(lo), _us(hi)): n for (b, lo, hi), n in got.items()} == expected


def _us(t) -> int:
    """A window bound as microseconds since the epoch (Spark hands back naive UTC)."""
    return int(pd.Timestamp(t).tz_localize(None).value // 1000) if pd.Timestamp(t).tzinfo \
        else int(pd.Timestamp(t).value // 1000)
