"""Kept continuous queries start again whatever became of their history, and a query that
failed to start again is started by ``START STREAMING QUERY`` without restarting the
server (docs/guides/streams.md "Kept across restarts"); and a kept query whose Python
worker did not start in time runs again (dfsql/continuous_revival.py;
docs/guides/endpoint.md "Continuous queries").

``dfsql serve --state-dir D`` runs as a real command and is killed with SIGKILL (the
helpers of :mod:`tests.server.restarts`). Once a version of a query has
completed a micro-batch its checkpoint holds its state, so its restart plans none of its
history: neither its ``BACKFILL FROM`` table (dropped here before the kill) nor the files
an earlier version read.

Both scenarios share the two lives of one server (a JVM start is the suite's dearest
step): the module's fixture runs them and keeps what each saw, each test holds its
scenario's assertions.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from pyhive.exc import OperationalError

from tests.server.restarts import (
    FRONTIER,
    QUERY,
    T0,
    Served,
    _events,
    _show_rows,
    _table,
    _wait,
    _write,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

#: a Java stack trace's frame, as the JVM prints one to stderr
JAVA_FRAME = re.compile(r"^\s+at [\w.$]+\(.*\)$", re.MULTILINE)


def _refused(served: Served, statement: str) -> str:
    """The first line of the error the statement is refused with (or a note that it was
    not refused)."""
    try:
        served.rows(statement)
    except OperationalError as e:
        return e.args[0].status.errorMessage.splitlines()[0]
    return f"not refused: {statement}"


def _committed(checkpoint: Path) -> bool:
    return (checkpoint / "commits" / "0").exists()


#: Spark waits a fixed 10 seconds for a Python worker it starts to connect back. A
#: query's stateful stream starts one on the driver when the stream starts; this
#: ``sitecustomize`` on the server's PYTHONPATH (as a loaded machine would hold its
#: imports) holds that worker 15 seconds the first time it starts, so Spark ends the
#: stream with "Python worker failed to connect back"
HOLD = """
import time
from pathlib import Path

_held = Path({held!r})
if b"transform_with_state_driver_worker" in Path("/proc/self/cmdline").read_bytes() \\
        and not _held.exists():
    _held.write_text("held")
    time.sleep(15)
"""


@dataclass
class Lives:
    tmp: Path
    state: Path
    seen: dict[str, dict]


@pytest.fixture(scope="module")
def lives(tmp_path_factory) -> Lives:
    """Life 1: ``held_windows`` started first (its driver worker held: the revival's
    scenario), checked and stopped; then ``live_windows`` and ``side_windows`` as
    :func:`test_kept_queries_start_again_whatever_became_of_their_history` says; killed;
    life 2 after kill -9."""
    tmp = tmp_path_factory.mktemp("start").resolve()  # the server records resolved paths
    run = Lives(tmp, tmp / "state", {"history": {}, "revival": {}})
    src, hist, side, held = tmp / "in", tmp / "history", tmp / "side", tmp / "held"
    for d in (src, hist, side, tmp / "inject", tmp / "held-in"):
        d.mkdir()
    (tmp / "inject" / "sitecustomize.py").write_text(HOLD.format(held=str(held)))
    _write(tmp / "held-in" / "part-0.parquet", _events(0, 60))
    _write(tmp / "held-in" / "part-1.parquet", _events(60, 120))
    _write(hist / "part-0.parquet", _events(0, 60))
    _write(src / "part-0.parquet", _events(60, 200))
    _write(side / "part-0.parquet", _events(0, 120))
    first = Served(tmp, 1, "--state-dir", str(run.state), "--stream", f"live={src}",
                   "--stream", f"side={side}", "--stream", f"held={tmp / 'held-in'}",
                   env={"PYTHONPATH": str(tmp / "inject")})
    try:
        _revival(run, first)
        _history_life_1(run, first)
    finally:
        first.kill()
    side.rename(tmp / "side-away")
    second = Served(tmp, 2, "--state-dir", str(run.state))
    try:
        _history_life_2(run, second)
    finally:
        second.kill()
    print(f"\nstart-ups: {first.up:.1f} s, {second.up:.1f} s")
    return run


def _revival(run: Lives, served: Served) -> None:
    seen = run.seen["revival"]
    [(seen["name"], _, _, _)] = served.rows(
        f"CREATE STREAMING QUERY held_windows AS {QUERY.format(t='held')}")
    show = lambda: {r[0]: r for r in _show_rows(served)}["held_windows"]  # noqa: E731
    seen["shown"] = _wait(lambda: (show()[2], show()[5]), ("RUNNING", 120))
    seen["held"] = (run.tmp / "held").read_text()
    seen["spark log"] = (run.tmp / "spark-1.log").read_text()
    seen["table"] = _table(served, "held_windows")
    served.rows("STOP STREAMING QUERY held_windows")  # the other scenario's lives alone


def _history_life_1(run: Lives, first: Served) -> None:
    tmp, state, seen = run.tmp, run.state, run.seen["history"]
    first.rows(f"CREATE TABLE live_history AS SELECT * FROM parquet.`{tmp / 'history'}`")
    first.rows("CREATE STREAMING QUERY live_windows BACKFILL FROM live_history AS "
               + QUERY.format(t="live"))
    first.rows("CREATE STREAMING QUERY side_windows AS " + QUERY.format(t="side"))
    seen["v1 committed"] = _wait(lambda: _committed(state / "checkpoints" / "live_windows"),
                                 True)
    seen["changed"] = first.rows("ALTER STREAMING QUERY live_windows AS "
                                 + QUERY.format(t="live").replace("1 MINUTE", "2 MINUTES"))
    _write(tmp / "in" / "part-1.parquet", _events(200, 280))  # the new version's first batch
    seen["v2 committed"] = _wait(
        lambda: _committed(state / "checkpoints" / "live_windows.v2"), True)
    first.rows("DROP TABLE live_history")
    seen["history kept"] = (tmp / "warehouse" / "live_history").exists()


def _history_life_2(run: Lives, second: Served) -> None:
    tmp, seen = run.tmp, run.seen["history"]
    seen["shown"] = {r[0]: r[2] for r in _show_rows(second)}
    _write(tmp / "in" / "part-2.parquet", _events(280, 360))
    _write(tmp / "in" / "part-3.parquet", [("a", 0, None, FRONTIER)])
    seen["got"] = _wait(lambda: {(r[0], r[1], r[2], r[3], r[6]) for r in _table(second)},
                        _two_minutes())
    # START STREAMING QUERY: refused for an unknown name, a running query and one whose
    # cause is not fixed yet (its reason renewed)
    seen["refused"] = [_refused(second, f"START STREAMING QUERY {name}")
                       for name in ("nothing_here", "live_windows", "side_windows")]
    seen["renewed"] = {r[0]: r[2] for r in _show_rows(second)}["side_windows"]
    (tmp / "side-away").rename(tmp / "side")  # the cause fixed
    seen["started"] = second.rows("START STREAMING QUERY side_windows")
    seen["shown after"] = {r[0]: r[2] for r in _show_rows(second)}
    _write(tmp / "side" / "part-1.parquet", [("a", 0, None, FRONTIER)])
    seen["side"] = _wait(lambda: {(r[0], r[1], r[2], r[3], r[6]) for r in set(second.rows(
        "SELECT key, total, n, window_start, window_end, pane_index, pane_timing "
        "FROM global_temp.side_windows"))}, _side())
    seen["log"] = second.text()


def _two_minutes() -> set[tuple]:
    """By hand (live_windows): 2-minute windows of 60 rows per key, minutes m and m + 1 of
    value m + 1 and m + 2; [0,2) and [2,4) closed ON_TIME, [4,6) at its EARLY pane of its
    60th row."""
    return {(k, 30 * (2 * j + 1) + 30 * (2 * j + 2), 60, T0 + timedelta(minutes=2 * j),
             "ON_TIME" if j < 2 else "EARLY") for k in "ab" for j in range(3)}


def _side() -> set[tuple]:
    """By hand (side_windows, 1-minute windows over two minutes): minute 0 closed ON_TIME
    with 30 rows of 1; minute 1 at its EARLY pane of its 30th row, 30 rows of 2."""
    return {(k, 30 * (m + 1), 30, T0 + timedelta(minutes=m), "ON_TIME" if m == 0 else "EARLY")
            for k in "ab" for m in range(2)}


def test_kept_queries_start_again_whatever_became_of_their_history(lives) -> None:
    """Life 1: ``live_windows`` starts BACKFILL FROM a warehouse table (minute 0) over
    the stream (from minute 1), completes a micro-batch, is ALTERed to 2-minute windows,
    and the new version completes one too (over a file that arrived after the change);
    then the history table is dropped. A second
    query, ``side_windows``, reads a stream whose directory is taken away while the
    server is down. Life 2, after kill -9: live_windows runs (its history is not planned
    again) and its table is the new query's over all the rows (:func:`_two_minutes`);
    side_windows is FAILED with a one-line reason, refused by START while its directory
    is missing, and started by START once it is back, its table then exact
    (:func:`_side`)."""
    state, side, seen = lives.state, lives.tmp / "side", lives.seen["history"]
    assert seen["v1 committed"] is True
    assert [r[2] for r in seen["changed"]] == [2]
    assert seen["v2 committed"] is True
    assert seen["history kept"] is False
    gone = f"its stream side reads {side}, which is gone"
    assert seen["shown"] == {"live_windows": "RUNNING", "side_windows": f"FAILED: {gone}"}
    assert seen["got"] == _two_minutes()
    # START's refusals are placed at the name
    assert seen["refused"] == [
        "line 1, col 23: no continuous query named nothing_here",
        "line 1, col 23: the continuous query live_windows is running",
        f"line 1, col 23: side_windows did not start again: {gone}"]
    assert seen["renewed"] == f"FAILED: {gone}"
    [(name, _, status, checkpoint)] = seen["started"]
    assert (name, status, checkpoint) == (
        "side_windows", "RUNNING", str(state / "checkpoints" / "side_windows"))
    assert seen["shown after"] == {"live_windows": "RUNNING", "side_windows": "RUNNING"}
    assert seen["side"] == _side()
    log = seen["log"]
    # no stack trace, Python's or Java's (PySpark's loggers print one as JSON)
    assert "Traceback" not in log and not JAVA_FRAME.search(log), log
    assert "stacktrace" not in log and "SQLQueryContextLogger" not in log, log


def test_a_query_whose_python_worker_did_not_start_in_time_runs_again(lives) -> None:
    """The query's driver worker held past Spark's wait at its first start (:data:`HOLD`):
    the query, kept in ``--state-dir``, is started again from its checkpoint, and its
    table is the one a run without the failure holds."""
    seen = lives.seen["revival"]
    assert seen["name"] == "held_windows"
    assert seen["shown"] == ("RUNNING", 120)
    assert seen["held"] == "held"  # the first start was held past Spark's wait
    # Spark ended the first run for it (and the query runs again, from its checkpoint)
    assert "Python worker failed to connect back" in seen["spark log"]
    # minute 0's windows closed at arrival 1:15 (event 1:10, watermark 1:00): each
    # key's 30 rows of value 1, one ON_TIME pane, as a run that never failed has it
    minute0 = {(r[0], r[1], r[2], r[6]) for r in seen["table"] if r[3] == T0}
    assert minute0 == {("a", 30, 30, "ON_TIME"), ("b", 30, 30, "ON_TIME")}
    assert all(r[3] in (T0, T0 + timedelta(minutes=1)) for r in seen["table"])
