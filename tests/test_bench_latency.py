"""The early-pane latency benchmark's arithmetic (benchmarks/bench_latency.py), on outputs
whose rows' latencies are derived by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_latency.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_latency", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _out(rows: list[tuple]) -> pd.DataFrame:
    """(sink seconds, key, window, cumulative n, oldest s, newest s) per output."""
    frame = pd.DataFrame(rows, columns=["sink_s", "key", "window_start", "n", "oldest",
                                        "newest"])
    for col in ("oldest", "newest"):
        frame[col] = (frame[col] * 1e6).astype(np.int64)  # the queries' µs
    return frame


def test_new_rows_spread_between_outputs(bench) -> None:
    # window (a, 0): its first output at 10 s holds 3 rows that arrived 8.0 .. 9.0 s
    # (8.0, 8.5, 9.0: latencies 2.0, 1.5, 1.0); its next, at 11 s, 2 more in (9, 10]
    # (9.5, 10.0: 1.5, 1.0). Window (b, 0): one row at 4 s, out at 4.25 s (0.25); an
    # output with no new row (an on-time pane) adds nothing.
    out = _out([(11.0, "a", 0, 5, 8.0, 10.0), (10.0, "a", 0, 3, 8.0, 9.0),
                (4.25, "b", 0, 1, 4.0, 4.0), (6.0, "b", 0, 1, 4.0, 4.0)])
    arrival, stamp = bench.row_arrivals(out)
    lat = stamp - arrival
    got = sorted(zip(np.round(stamp, 6).tolist(), np.round(lat, 6).tolist(), strict=True))
    assert got == [(4.25, 0.25), (10.0, 1.0), (10.0, 1.5), (10.0, 2.0), (11.0, 1.0),
                   (11.0, 1.5)]


def test_no_outputs_no_rows(bench) -> None:
    arrival, stamp = bench.row_arrivals(_out([]))
    assert len(arrival) == len(stamp) == 0


def test_a_row_is_released_when_its_second_is_over(bench) -> None:
    # the source was created at 100.0 s: rows stamped in [100, 101) are offered at 101,
    # those of [101, 102) at 102 (a stamp a hair under a boundary, from the spreading
    # arithmetic, is still that boundary's)
    arrival = np.array([100.0, 100.5, 100.999, 101.0, 101.99999999, 103.25])
    assert bench.released(arrival, 100.0).tolist() == [101.0, 101.0, 101.0, 102.0, 103.0,
                                                        104.0]
