"""Continuous queries outlive their server ("Trust under faults", part 3): ``dfsql serve
--state-dir D`` keeps each CREATE STREAMING QUERY in D, and a server started again on D
after ``kill -9`` runs it again from its checkpoint, its INTO TABLE view rebuilt, with
exactly the rows an uninterrupted run holds — files that arrived while it was down
included.

``dfsql serve`` runs as a real command (killed with SIGKILL, its JVM and Python workers
with it: the whole process group), three times on one D; PyHive is the client. The
second start is not given the ``--stream`` the query reads: the query's record carries
it. The query windows on a column's clock (PROCESSING TIME arrival_time), so its rows do
not depend on where the kill or the micro-batches cut the stream; the last file is a
sentinel row an hour later (NULL event time: in no window, moves no watermark), and the
table is compared with the bounded replay's changelog before that instant, applied row by
row, and with the rows derived by hand below.
"""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from tests.server.restarts import (
    COLUMNS,
    FRONTIER,
    QUERY,
    T0,
    Served,
    _events,
    _show,
    _show_rows,
    _table,
    _wait,
    _write,
    replayed_table,
)


def _hand_derived() -> set[tuple]:
    """(key, total, n, window_start, pane_timing) of the table at the frontier: 2 keys × 6
    minutes. A window [m, m+1 min) closes when the watermark (largest event − 10 s)
    reaches its end, i.e. once event (m+1)·60 + 10 s has arrived: minutes 0–4 do (the
    last event is at 5:59), so their row is the ON_TIME pane; minute 5 stays open and its
    row is its last EARLY pane, at its 30th row (EVERY 10 ROWS). Every window: 30 rows of
    value m + 1."""
    return {(k, 30 * (m + 1), 30, T0 + timedelta(minutes=m), "ON_TIME" if m < 5 else "EARLY")
            for k in "ab" for m in range(6)}
















def _replayed(served: Served, src: Path) -> set[tuple]:
    """The bounded replay of the same files, applied: what an uninterrupted run's table
    holds (:func:`~tests.server.restarts.replayed_table`)."""
    return replayed_table(served, src, QUERY, tuple(COLUMNS.split(", ")))


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_continuous_query_outlives_kill_9(tmp_path) -> None:
    """Two lives of ``dfsql serve`` on one state directory, each ended by SIGKILL: the
    query runs again from its checkpoint and its table is exact (files that arrived
    while the server was down included); a kept query whose input is gone is listed as
    failed, not a crash; STOP removes each from the directory (so no later life starts
    it: the server starts what the directory holds)."""
    tmp_path = tmp_path.resolve()  # the server records resolved paths
    state, src, side = tmp_path / "state", tmp_path / "in", tmp_path / "side"
    src.mkdir()
    side.mkdir()
    _write(src / "part-0.parquet", _events(0, 60))
    _write(src / "part-1.parquet", _events(60, 120))
    _write(side / "part-0.parquet", _events(0, 10))
    timings: dict[str, float] = {}

    # ---- life 1: the query starts, reads 120 rows, the server is killed; a second
    # query over a stream whose directory will be gone at the next start
    first = Served(tmp_path, 1, "--state-dir", str(state), "--stream", f"live={src}",
                   "--stream", f"side={side}")
    timings["start, nothing kept"] = first.up
    try:
        [(name, qid, sink, checkpoint)] = first.rows(
            f"CREATE STREAMING QUERY live_windows AS {QUERY.format(t='live')}")
        assert (name, sink) == ("live_windows", "table global_temp.live_windows")
        assert checkpoint == str(state / "checkpoints" / "live_windows")
        record = json.loads((state / "queries" / "live_windows.json").read_text())
        assert record["statement"].endswith(QUERY.format(t="live"))
        assert [(s["name"], s["path"]) for s in record["streams"]] == [("live", str(src))]
        first.rows("CREATE STREAMING QUERY side_windows AS SELECT key, COUNT(*) AS n "
                   "FROM side GROUP BY key WINDOW FIXED(1 MINUTE) ON event_time "
                   "PROCESSING TIME arrival_time")
        assert _wait(lambda: {r[0]: r for r in _show_rows(first)}["live_windows"][5], 120) == 120
        # minute 0's windows closed at arrival 1:15 (event 1:10): in the table already
        assert len(_table(first)) >= 2
    finally:
        first.kill()

    # ---- while it is down: three more minutes of events; the side stream's files gone
    _write(src / "part-2.parquet", _events(120, 200))
    _write(src / "part-3.parquet", _events(200, 280))
    _write(src / "part-4.parquet", _events(280, 360))
    for f in side.iterdir():
        f.unlink()
    side.rmdir()

    # ---- life 2: no --stream (the records have them); the query runs again
    second = Served(tmp_path, 2, "--state-dir", str(state))
    timings["start, two queries kept (one failing)"] = second.up
    try:
        assert "dfsql serve: continuous query live_windows started again from its " \
               f"checkpoint {state / 'checkpoints' / 'live_windows'}" in second.text()
        took = re.search(r"live_windows started again from its checkpoint \S+ \(([\d.]+) s\)",
                         second.text())
        assert took is not None
        timings["of which the query's restart"] = float(took.group(1))
        reason = f"its stream side reads {side}, which is gone"
        said = [ln for ln in second.text().splitlines() if "side_windows" in ln]
        assert said == [f"dfsql serve: continuous query side_windows not started again: "
                        f"{reason}"]
        shown = {r[0]: r for r in _show_rows(second)}
        assert (shown["live_windows"][1], shown["live_windows"][2]) == (qid, "RUNNING")
        assert shown["side_windows"][2] == f"FAILED: {reason}"
        timings["command to query running"] = time.monotonic() - second.began
        # the sentinel, after the restart: the query reads new files too
        _write(src / "part-5.parquet", [("a", 0, None, FRONTIER)])
        want = _hand_derived()
        got = _wait(lambda: {(r[0], r[1], r[2], r[3], r[6]) for r in _table(second)}, want)
        timings["command to table complete"] = time.monotonic() - second.began
        assert got == want
        table = _table(second)
        assert len(table) == 12
        assert table == _replayed(second, src)

        # STOP removes each from the directory: the next life would start nothing
        assert second.rows("STOP STREAMING QUERY live_windows") == [
            ("live_windows", "STOPPED", f"removed from {state}")]
        assert sorted(p.name for p in (state / "queries").iterdir()) == ["side_windows.json"]
        assert not (state / "checkpoints" / "live_windows").exists()
        assert not (state / "tables" / "live_windows").exists()
        assert second.rows("STOP STREAMING QUERY side_windows") == [
            ("side_windows", "STOPPED", f"removed from {state}")]
        assert list((state / "queries").iterdir()) == []
        assert _show(second) == []
        assert "Traceback" not in second.text()
    finally:
        second.kill()
    print("\n" + ", ".join(f"{k}: {v:.1f} s" for k, v in timings.items()))


#: the backfill's history: the events (a second apart) before the stream's first, which
#: falls inside a minute (a window of both); the stream's last event ends minute 671
HISTORY, END = 39_990, 40_320


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_backfill_killed_before_its_first_batch_runs_again_exactly_once(tmp_path) -> None:
    """``BACKFILL FROM`` over the endpoint, the server killed while the stream's first
    micro-batch (which carries the history) runs: started again on its state directory,
    the query backfills again, and its table holds exactly what one uninterrupted run of
    history and stream holds (derived by hand: every (key, minute) window of 30 rows of
    value minute + 1; all closed but the last minute's, which is at its last EARLY pane)."""
    tmp_path = tmp_path.resolve()
    state, src, history = tmp_path / "state", tmp_path / "in", tmp_path / "history"
    src.mkdir()
    history.mkdir()
    _write(history / "part-0.parquet", _events(0, HISTORY))
    _write(src / "part-0.parquet", _events(HISTORY, END))
    frontier = T0 + timedelta(seconds=END + 5, hours=1)
    minutes = END // 60
    statement = (f"CREATE STREAMING QUERY live_windows BACKFILL FROM parquet.`{history}` "
                 f"AS {QUERY.format(t='live')}")
    first = Served(tmp_path, 1, "--state-dir", str(state), "--stream", f"live={src}")
    try:
        first.rows(statement)
    finally:
        first.kill()
    commits = state / "checkpoints" / "live_windows" / "commits"
    assert not commits.exists() or not any(commits.iterdir()), "killed after the first batch"

    second = Served(tmp_path, 2, "--state-dir", str(state))
    try:
        _write(src / "part-1.parquet", [("a", 0, None, frontier)])
        want = {(k, 30 * (m + 1), 30, T0 + timedelta(minutes=m),
                 "ON_TIME" if m < minutes - 1 else "EARLY")
                for k in "ab" for m in range(minutes)}
        got = _wait(lambda: {(r[0], r[1], r[2], r[3], r[6]) for r in _table(second)}, want)
        assert got == want
        assert len(_table(second)) == 2 * minutes
        assert "Traceback" not in second.text()
    finally:
        second.kill()


def test_query_names_as_file_names() -> None:
    from dfsql.server.state import file_name

    assert file_name("live_windows") == "live_windows"
    # nothing leaves DIR's sub-directories, and distinct names stay distinct
    assert file_name("..") == "%2E%2E"
    assert file_name("a/b") == "a%2Fb" != file_name("a%2Fb") == "a%252Fb"
    assert file_name("q 1") == "q%201"


def test_one_server_per_state_dir(tmp_path) -> None:
    from dfsql.errors import DfsqlError
    from dfsql.server.state import StateDir

    first = StateDir(tmp_path / "state")
    try:
        with pytest.raises(DfsqlError, match="in use by another dfsql serve"):
            StateDir(tmp_path / "state")
    finally:
        first.close()
    StateDir(tmp_path / "state").close()  # free again once the first has closed
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == [
        "checkpoints", "lock", "queries", "tables"]


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_an_alter_killed_at_once_goes_on_as_the_new_query(tmp_path) -> None:
    """``ALTER STREAMING QUERY`` over the endpoint, the server killed as soon as it
    answers (the new version's first micro-batch, which restates the table, running or
    not yet run): started again on its state directory, the new version runs, from its
    own checkpoint, and its table holds exactly what the new query holds had it run from
    the start. By hand: 2-minute windows of 60 rows per key, minutes m and m + 1 of
    value m + 1 and m + 2; [0,2) and [2,4) closed ON_TIME, [4,6) at its EARLY pane of
    its 60th row."""
    tmp_path = tmp_path.resolve()
    state, src = tmp_path / "state", tmp_path / "in"
    src.mkdir()
    _write(src / "part-0.parquet", _events(0, 200))
    first = Served(tmp_path, 1, "--state-dir", str(state), "--stream", f"live={src}")
    try:
        first.rows(f"CREATE STREAMING QUERY live_windows AS {QUERY.format(t='live')}")
        assert _wait(lambda: len(_table(first)) > 0, True)
        changed = first.rows("ALTER STREAMING QUERY live_windows AS "
                             + QUERY.format(t="live").replace("1 MINUTE", "2 MINUTES"))
    finally:
        first.kill()
    assert [r[2] for r in changed] == [2]
    record = json.loads((state / "queries" / "live_windows.json").read_text())
    assert record["checkpoint"] == "checkpoints/live_windows.v2"
    assert [v for v, _ in record["altered"]["versions"]] == [1, 2]
    assert not (state / "checkpoints" / "live_windows").exists()  # the old version's
    commits = state / "checkpoints" / "live_windows.v2" / "commits"
    assert not commits.exists() or not any(commits.iterdir()), "killed after its first batch"

    second = Served(tmp_path, 2, "--state-dir", str(state))
    try:
        _write(src / "part-1.parquet", _events(200, 360))
        _write(src / "part-2.parquet", [("a", 0, None, FRONTIER)])
        want = {(k, 30 * (2 * j + 1) + 30 * (2 * j + 2), 60, T0 + timedelta(minutes=2 * j),
                 "ON_TIME" if j < 2 else "EARLY") for k in "ab" for j in range(3)}
        got = _wait(lambda: {(r[0], r[1], r[2], r[3], r[6]) for r in _table(second)}, want)
        assert got == want
        assert len(_table(second)) == 6
        shown = _show_rows(second)
        assert [r[13] for r in shown] == [f"v1 from the start; v2 from {changed[0][3]}"]
        assert "Traceback" not in second.text()
    finally:
        second.kill()


#: a retracting QUERY that keeps every window (a day's lateness, late panes forever)
KEPT = QUERY.replace("EMIT ACCUMULATING", "EMIT ACCUMULATING AND RETRACTING").replace(
    "TRIGGER", "ALLOWED LATENESS 1 DAY TRIGGER").replace("10 ROWS", "10 ROWS LATE EVERY 1 ROW")


def _signed(served: Served, out: Path) -> set[tuple]:
    """(key, window_start, window_end, the signed sum of total) of each window of the
    directory that sums to something, as Spark reads it (its file sink log; nothing
    before its first entry)."""
    from pyhive.exc import OperationalError

    if not (out / "_spark_metadata" / "0").exists():
        return set()
    try:
        rows = served.rows(
            "SELECT key, window_start, window_end, SUM(CASE WHEN is_retraction THEN -total "
            f"ELSE total END) FROM parquet.`{out}` GROUP BY key, window_start, window_end")
    except OperationalError:  # a log being written
        return set()
    return {r for r in rows if r[3]}


def _sums(minutes: int) -> set[tuple]:
    """By hand: each window of ``minutes`` minutes over the 6 minutes of each key sums
    30 rows of value m + 1 for each of its minutes m."""
    return {(k, T0 + timedelta(minutes=w), T0 + timedelta(minutes=w + minutes),
             sum(30 * (m + 1) for m in range(w, w + minutes)))
            for k in "ab" for w in range(0, 6, minutes)}


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_directory_query_killed_during_and_after_an_alter(tmp_path) -> None:
    """A retracting query INTO DIRECTORY (every window kept), changed from 1-minute to
    2-minute windows, its server killed twice:

    1. while ALTER runs, once the old query has stopped and the directory's retractions
       are written, about when the record is switched: started again, exactly one
       version runs and the directory's signed sums are that version's values, never a
       mixture;
    2. ALTER again (if the first kill left the old version), the server killed as soon
       as it answers: started again, the new version restates the directory once (its
       retractions kept beside its checkpoint) and goes on with Spark's file sink log.

    By hand: every window of m minutes sums 30 rows of value k + 1 for each of its
    minutes k (the 1-minute windows' totals, or 90, 210 and 330 per key)."""
    tmp_path = tmp_path.resolve()
    state, src, out = tmp_path / "state", tmp_path / "in", tmp_path / "out"
    src.mkdir()
    _write(src / "part-0.parquet", _events(0, 200))
    query = KEPT.format(t="live")
    change = "ALTER STREAMING QUERY live_files AS " + query.replace("1 MINUTE", "2 MINUTES")
    first = Served(tmp_path, 1, "--state-dir", str(state), "--stream", f"live={src}")
    try:
        first.rows(f"CREATE STREAMING QUERY live_files INTO DIRECTORY '{out}' AS {query}")
        assert _wait(lambda: (out / "_spark_metadata" / "0").exists(), True)
        _alter_in_background(first, change)
        written = state / "tables" / "live_files.v2" / "restatement.parquet"
        assert _wait(written.exists, True, seconds=120, pause=0.005)
    finally:
        first.kill()
    second = Served(tmp_path, 2, "--state-dir", str(state), "--stream", f"live={src}")
    try:
        _write(src / "part-1.parquet", _events(200, 280))
        versions = [r[13] for r in _show_rows(second)]
        assert len(versions) == 1 and versions[0].startswith("v1 from the start"), versions
        if "v2" not in versions[0]:  # the old version ran on: the directory is its own
            want = {w for w in _sums(1) if w[2] <= T0 + timedelta(minutes=4)}
            assert _wait(lambda: {w for w in _signed(second, out)
                                  if w[2] <= T0 + timedelta(minutes=4)}, want) == want
            second.rows(change)
    finally:
        second.kill()
    record = json.loads((state / "queries" / "live_files.json").read_text())
    assert record["altered"]["log_base"] >= 1
    third = Served(tmp_path, 3, "--state-dir", str(state))
    try:
        _write(src / "part-2.parquet", _events(280, 360))
        _write(src / "part-3.parquet", [("a", 0, None, FRONTIER)])
        assert _wait(lambda: _signed(third, out), _sums(2)) == _sums(2)
        assert "Traceback" not in second.text() + third.text()
    finally:
        third.kill()


def _alter_in_background(served: Served, change: str) -> None:
    """``change`` sent on a connection of its own, in a thread (the server may be killed
    under it)."""
    import threading

    from pyhive import hive

    other = hive.connect(host="127.0.0.1", port=served.port, auth="NOSASL").cursor()
    threading.Thread(target=lambda: _quietly(other.execute, change), daemon=True).start()


def _quietly(call, *args) -> None:
    """``call(*args)``, its failure (the server killed under it) ignored."""
    try:
        call(*args)
    except Exception:  # noqa: BLE001
        pass
