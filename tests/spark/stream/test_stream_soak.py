"""Soak, short enough for every test run (issue #11; shortened in #22): a live stream at
5,000 events per second (``DFSQL_SOAK_RATE``) with SESSIONS, early firings, late rows and
retractions, sampled every 5 s for 40 s (``DFSQL_SOAK_SECONDS``) once its first batch with
rows is done. dfsql keeps up, its state stays bounded by the live windows, and the JVM's
heap and the Python workers' memory stop growing. ``benchmarks/soak_stream.py`` runs the
same at 20,000 events/s for 20 minutes (the run of minutes that used to be in the tests is
``--seconds 180``); the workload and the state bound are described there."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

#: keeping up with the stateful work on both cores (tests/conftest.py)
pytestmark = pytest.mark.shuffle_partitions(2)

ROOT = Path(__file__).resolve().parents[3]
SECONDS = float(os.environ.get("DFSQL_SOAK_SECONDS", "40"))
RATE = int(os.environ.get("DFSQL_SOAK_RATE", "5000"))
SAMPLE = float(os.environ.get("DFSQL_SOAK_SAMPLE", "5"))
#: the longest wait for the first batch with rows before sampling starts
SETTLE = 180.0


def _soak_module():
    spec = importlib.util.spec_from_file_location("soak_stream",
                                                  ROOT / "benchmarks" / "soak_stream.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc for memory")
def test_soak_keeps_up_and_state_and_memory_stay_bounded(spark, tmp_path):
    soak = _soak_module()
    samples = soak.soak(spark, SECONDS, RATE, SAMPLE, str(tmp_path / "ck"), log=print,
                        settle=SETTLE)
    assert len(samples) >= 6
    first, second = samples[1:len(samples) // 2], samples[len(samples) // 2:]
    # the whole offered stream went through (but the batches in flight: rows are counted
    # a whole batch at a time, and on a loaded machine a batch of two trigger periods' rows
    # may be running as the last sample is taken), and was turned into panes and retractions
    in_flight = 2 * soak.TRIGGER_SECONDS * RATE
    assert samples[-1]["rows_in"] >= 0.8 * RATE * samples[-1]["t"] - in_flight
    assert samples[-1]["rows_out"] > samples[-1]["rows_in"] / soak.BURST
    assert samples[-1]["late_dropped"] > 0  # the jitter makes some rows too late
    # keeping up: over the second half the backlog (rows offered, less rows processed)
    # does not grow by more than two trigger periods of rows (rows are counted a whole
    # batch at a time). A rate threshold on each batch's own time would measure the
    # machine's speed of the moment, not whether the stream is kept up with; the
    # events/s figure is benchmarks/soak_stream.py's.
    backlog = [RATE * s["t"] - s["rows_in"] for s in second]
    assert max(backlog) - backlog[0] <= 2 * soak.TRIGGER_SECONDS * RATE, backlog
    # the state holds the live windows' elements, not the stream's
    # (reported on every sample from the first batch with rows on; how long the first
    # batch takes to start, Python workers included, depends on the machine)
    running = [s for s in samples if s["rows_in"]]
    assert len(running) >= len(samples) // 2
    held = [s["state_elements"] for s in running]
    assert None not in held, held
    assert max(held) <= (soak.LIVE_SECONDS + soak.TRIGGER_SECONDS) * RATE
    assert max(held) < samples[-1]["rows_in"] / 5
    # memory stops growing: the second half's peak is within the first half's (plus slack
    # for the garbage collector's and the allocator's own rhythm)
    heap_first, heap_second = max(s["heap_mb"] for s in first), max(s["heap_mb"] for s in second)
    assert heap_second <= heap_first * 1.3 + 64, (heap_first, heap_second)
    floor_first, floor_second = min(s["heap_mb"] for s in first), min(s["heap_mb"] for s in second)
    assert floor_second <= floor_first * 1.5 + 32, (floor_first, floor_second)
    w_first, w_second = (max(s["workers_mb"] for s in first),
                         max(s["workers_mb"] for s in second))
    assert w_second <= w_first * 1.3 + 64, (w_first, w_second)
