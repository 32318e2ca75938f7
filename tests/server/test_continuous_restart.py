"""Continuous queries outlive their server ("Trust under faults", part 3): ``dfsql serve
--state-dir D`` keeps each CREATE STREAMING QUERY in D, and a server started again on D
after ``kill -9`` runs it again from its checkpoint, its INTO TABLE view rebuilt, with
exactly the rows an uninterrupted run holds — files that arrived while it was down
included.

``dfsql serve`` runs as a real command (killed with SIGKILL, its JVM and Python workers
with it: the whole process group), three times on one D, and every scenario of this
module lives in those three lives (a JVM start is the suite's dearest step): each reads a
stream of its own and is killed where its test says. The module's fixture runs the lives
and keeps what each scenario saw; each test holds its scenario's assertions. PyHive is
the client. The second start is not given the ``--stream`` the first query reads: the
query's record carries it. The queries window on a column's clock (PROCESSING TIME
arrival_time), so their rows do not depend on where the kill or the micro-batches cut the
stream; a stream's last file is a sentinel row an hour later (NULL event time: in no
window, moves no watermark), and the tables are compared with the bounded replay's
changelog before that instant, applied row by row, and with the rows derived by hand
below.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from pyhive import hive
from pyhive.exc import OperationalError

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
    at_once,
    replayed_table,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


def _hand_derived() -> set[tuple]:
    """(key, total, n, window_start, pane_timing) of the table at the frontier: 2 keys × 6
    minutes. A window [m, m+1 min) closes when the watermark (largest event − 10 s)
    reaches its end, i.e. once event (m+1)·60 + 10 s has arrived: minutes 0–4 do (the
    last event is at 5:59), so their row is the ON_TIME pane; minute 5 stays open and its
    row is its last EARLY pane, at its 30th row (EVERY 10 ROWS). Every window: 30 rows of
    value m + 1."""
    return {(k, 30 * (m + 1), 30, T0 + timedelta(minutes=m), "ON_TIME" if m < 5 else "EARLY")
            for k in "ab" for m in range(6)}


def _two_minutes() -> set[tuple]:
    """By hand: 2-minute windows of 60 rows per key, minutes m and m + 1 of value m + 1
    and m + 2; [0,2) and [2,4) closed ON_TIME, [4,6) at its EARLY pane of its 60th
    row."""
    return {(k, 30 * (2 * j + 1) + 30 * (2 * j + 2), 60, T0 + timedelta(minutes=2 * j),
             "ON_TIME" if j < 2 else "EARLY") for k in "ab" for j in range(3)}


def _sums(minutes: int) -> set[tuple]:
    """By hand: each window of ``minutes`` minutes over the 6 minutes of each key sums
    30 rows of value m + 1 for each of its minutes m."""
    return {(k, T0 + timedelta(minutes=w), T0 + timedelta(minutes=w + minutes),
             sum(30 * (m + 1) for m in range(w, w + minutes)))
            for k in "ab" for w in range(0, 6, minutes)}


def _backfilled(minutes: int) -> set[tuple]:
    """By hand, the backfill's table: every (key, minute) window of 30 rows of value
    minute + 1; all closed but the last minute's, which is at its last EARLY pane."""
    return {(k, 30 * (m + 1), 30, T0 + timedelta(minutes=m),
             "ON_TIME" if m < minutes - 1 else "EARLY")
            for k in "ab" for m in range(minutes)}


#: the backfill's history: the events (a second apart) before the stream's first, which
#: falls inside a minute (a window of both); the stream's last event ends minute 671
HISTORY, END = 39_990, 40_320

#: a retracting QUERY that keeps every window (a day's lateness, late panes forever)
KEPT = QUERY.replace("EMIT ACCUMULATING", "EMIT ACCUMULATING AND RETRACTING").replace(
    "TRIGGER", "ALLOWED LATENESS 1 DAY TRIGGER").replace("10 ROWS", "10 ROWS LATE EVERY 1 ROW")

#: each scenario's stream: its name and its directory under the module's directory
STREAMS = {"live": "in", "side": "side", "alt": "alt", "files": "files", "back": "back"}

#: the two ALTERs: to 2-minute windows
ALTER_TABLE = ("ALTER STREAMING QUERY altered_windows AS "
               + QUERY.format(t="alt").replace("1 MINUTE", "2 MINUTES"))
ALTER_FILES = ("ALTER STREAMING QUERY live_files AS "
               + KEPT.format(t="files").replace("1 MINUTE", "2 MINUTES"))


@dataclass
class Lives:
    """The module's state directory and what each scenario saw in its lives."""

    tmp: Path
    state: Path
    seen: dict[str, dict]


def _streams(tmp: Path, *names: str) -> list[str]:
    return [a for n in names for a in ("--stream", f"{n}={tmp / STREAMS[n]}")]


def _shape(table: set[tuple]) -> set[tuple]:
    """(key, total, n, window_start, pane_timing) of a table's rows."""
    return {(r[0], r[1], r[2], r[3], r[6]) for r in table}


def _commits(checkpoint: Path) -> list[str]:
    """The micro-batches a checkpoint records as committed."""
    commits = checkpoint / "commits"
    return sorted(p.name for p in commits.iterdir()) if commits.exists() else []


@pytest.fixture(scope="module")
def lives(tmp_path_factory) -> Lives:
    """Three lives of ``dfsql serve`` on one state directory, each ended by SIGKILL:

    1. every scenario's query but the backfill created; ``live_windows`` has read 120
       rows; killed while ``live_files``'s ALTER runs (its restatement written);
    2. ``live_windows`` and ``side_windows`` checked and stopped; ``live_files``'s
       ALTER again (if the first kill left its old version); then at once
       ``altered_windows``'s ALTER and the backfill's CREATE; killed as soon as both
       answer;
    3. the altered queries and the backfill run to their tables and directory."""
    tmp = tmp_path_factory.mktemp("lives").resolve()  # the server records resolved paths
    run = Lives(tmp, tmp / "state",
                {k: {} for k in ("outlives", "backfill", "alter", "directory")})
    for d in STREAMS.values():
        (tmp / d).mkdir()
    (tmp / "history").mkdir()
    _write(tmp / "in" / "part-0.parquet", _events(0, 60))
    _write(tmp / "in" / "part-1.parquet", _events(60, 120))
    _write(tmp / "side" / "part-0.parquet", _events(0, 10))
    _write(tmp / "alt" / "part-0.parquet", _events(0, 200))
    _write(tmp / "files" / "part-0.parquet", _events(0, 200))
    _write(tmp / "history" / "part-0.parquet", _events(0, HISTORY))
    _write(tmp / "back" / "part-0.parquet", _events(HISTORY, END))
    ups = [_life_1(run)]
    # ---- while it is down: three more minutes of events; the side stream's files gone
    _write(tmp / "in" / "part-2.parquet", _events(120, 200))
    _write(tmp / "in" / "part-3.parquet", _events(200, 280))
    _write(tmp / "in" / "part-4.parquet", _events(280, 360))
    for f in (tmp / "side").iterdir():
        f.unlink()
    (tmp / "side").rmdir()
    ups.append(_life_2(run))
    ups.append(_life_3(run))
    print("\nstart-ups: " + ", ".join(f"{u:.1f} s" for u in ups))
    return run


def _life_1(run: Lives) -> float:
    tmp, state = run.tmp, run.state
    a, c, d = run.seen["outlives"], run.seen["alter"], run.seen["directory"]
    first = Served(tmp, 1, "--state-dir", str(state),
                   *_streams(tmp, "live", "side", "alt", "files"))
    try:
        a["query"] = QUERY.format(t="live")
        [(name, a["qid"], sink, checkpoint)] = first.rows(
            f"CREATE STREAMING QUERY live_windows AS {a['query']}")
        a["created"] = (name, sink, checkpoint)
        record = json.loads((state / "queries" / "live_windows.json").read_text())
        a["statement"] = record["statement"]
        a["streams"] = [(s["name"], s["path"]) for s in record["streams"]]
        first.rows("CREATE STREAMING QUERY side_windows AS SELECT key, COUNT(*) AS n "
                   "FROM side GROUP BY key WINDOW FIXED(1 MINUTE) ON event_time "
                   "PROCESSING TIME arrival_time")
        first.rows(f"CREATE STREAMING QUERY altered_windows AS {QUERY.format(t='alt')}")
        first.rows(f"CREATE STREAMING QUERY live_files INTO DIRECTORY '{tmp / 'out'}' AS "
                   + KEPT.format(t="files"))
        a["read"] = _wait(lambda: {r[0]: r for r in _show_rows(first)}["live_windows"][5],
                          120)
        a["first table"] = len(_table(first))
        c["first table"] = _wait(lambda: len(_table(first, "altered_windows")) > 0, True)
        d["first batch"] = _wait((tmp / "out" / "_spark_metadata" / "0").exists, True)
        _alter_in_background(first, ALTER_FILES)
        written = state / "tables" / "live_files.v2" / "restatement.parquet"
        d["restatement written"] = _wait(written.exists, True, seconds=120, pause=0.005)
    finally:
        first.kill()
    return first.up


def _life_2(run: Lives) -> float:
    tmp, state = run.tmp, run.state
    b, c, d = run.seen["backfill"], run.seen["alter"], run.seen["directory"]
    # no --stream live (the record has it); those of the statements this life sends
    second = Served(tmp, 2, "--state-dir", str(state), *_streams(tmp, "alt", "files", "back"))
    try:
        _outlives_life_2(run, second)
        d["answer"] = None
        if _directory_life_2(run, second):
            # first, alone: it restates the directory (measured: 16 s on a loaded
            # machine), in which the backfill's first batch would run and commit
            [d["answer"]] = at_once(second, [ALTER_FILES])
        c["second table"] = _wait(lambda: len(_table(second, "altered_windows")) > 0, True)
        c["answer"], b["answer"] = at_once(second, [
            ALTER_TABLE, f"CREATE STREAMING QUERY backfill_windows BACKFILL FROM "
                         f"parquet.`{tmp / 'history'}` AS {QUERY.format(t='back')}"])
    finally:
        second.kill()
    run.seen["outlives"]["log"] = d["log"] = second.text()
    b["commits"] = _commits(state / "checkpoints" / "backfill_windows")
    c["record"] = json.loads((state / "queries" / "altered_windows.json").read_text())
    c["commits"] = _commits(state / "checkpoints" / "altered_windows.v2")
    d["record"] = json.loads((state / "queries" / "live_files.json").read_text())
    return second.up


def _outlives_life_2(run: Lives, second: Served) -> None:
    """live_windows run again, its table complete after the sentinel; both its queries
    stopped."""
    state, src, a = run.state, run.tmp / "in", run.seen["outlives"]
    text = second.text()
    a["took"] = re.search(r"live_windows started again from its checkpoint \S+ "
                          r"\(([\d.]+) s\)", text)
    a["said"] = [ln for ln in text.splitlines() if "side_windows" in ln]
    shown = {r[0]: r for r in _show_rows(second)}
    a["shown live"] = (shown["live_windows"][1], shown["live_windows"][2])
    a["shown side"] = shown["side_windows"][2]
    _write(src / "part-5.parquet", [("a", 0, None, FRONTIER)])
    a["got"] = _wait(lambda: _shape(_table(second)), _hand_derived())
    a["table"] = _table(second)
    a["replayed"] = replayed_table(second, src, QUERY, tuple(COLUMNS.split(", ")))
    kept = lambda: sorted(p.name for p in (state / "queries").iterdir())  # noqa: E731
    a["stop live"] = second.rows("STOP STREAMING QUERY live_windows")
    a["kept after live"] = kept()
    a["live dirs"] = [(state / "checkpoints" / "live_windows").exists(),
                      (state / "tables" / "live_windows").exists()]
    a["stop side"] = second.rows("STOP STREAMING QUERY side_windows")
    a["kept after side"] = kept()
    a["shown after"] = sorted(name for name, _ in _show(second))


def _directory_life_2(run: Lives, second: Served) -> bool:
    """Which version of live_files runs; if the old one, its directory's sums (up to
    minute 4): whether it is to be ALTERed again."""
    d, out = run.seen["directory"], run.tmp / "out"
    _write(run.tmp / "files" / "part-1.parquet", _events(200, 280))
    d["versions"] = [r[13] for r in _show_rows(second) if r[0] == "live_files"]
    again = len(d["versions"]) == 1 and "v2" not in d["versions"][0]
    if again:
        four = T0 + timedelta(minutes=4)
        d["old sums"] = _wait(lambda: {w for w in _signed(second, out) if w[2] <= four},
                              {w for w in _sums(1) if w[2] <= four})
    return again


def _life_3(run: Lives) -> float:
    tmp, b, c, d = run.tmp, run.seen["backfill"], run.seen["alter"], run.seen["directory"]
    third = Served(tmp, 3, "--state-dir", str(run.state))
    try:
        _write(tmp / "back" / "part-1.parquet",
               [("a", 0, None, T0 + timedelta(seconds=END + 5, hours=1))])
        _write(tmp / "alt" / "part-1.parquet", _events(200, 360))
        _write(tmp / "alt" / "part-2.parquet", [("a", 0, None, FRONTIER)])
        _write(tmp / "files" / "part-2.parquet", _events(280, 360))
        _write(tmp / "files" / "part-3.parquet", [("a", 0, None, FRONTIER)])
        b["got"] = _wait(lambda: _shape(_table(third, "backfill_windows")),
                         _backfilled(END // 60))
        b["rows"] = len(_table(third, "backfill_windows"))
        c["got"] = _wait(lambda: _shape(_table(third, "altered_windows")), _two_minutes())
        c["rows"] = len(_table(third, "altered_windows"))
        c["shown"] = [r[13] for r in _show_rows(third) if r[0] == "altered_windows"]
        d["sums"] = _wait(lambda: _signed(third, tmp / "out"), _sums(2))
    finally:
        third.kill()
    b["log"] = c["log"] = third.text()
    d["log"] += third.text()
    return third.up


def _signed(served: Served, out: Path) -> set[tuple]:
    """(key, window_start, window_end, the signed sum of total) of each window of the
    directory that sums to something, as Spark reads it (its file sink log; nothing
    before its first entry)."""
    if not (out / "_spark_metadata" / "0").exists():
        return set()
    try:
        rows = served.rows(
            "SELECT key, window_start, window_end, SUM(CASE WHEN is_retraction THEN -total "
            f"ELSE total END) FROM parquet.`{out}` GROUP BY key, window_start, window_end")
    except OperationalError:  # a log being written
        return set()
    return {r for r in rows if r[3]}


def _alter_in_background(served: Served, change: str) -> None:
    """``change`` sent on a connection of its own, in a thread (the server may be killed
    under it)."""
    other = hive.connect(host="127.0.0.1", port=served.port, auth="NOSASL").cursor()
    threading.Thread(target=lambda: _quietly(other.execute, change), daemon=True).start()


def _quietly(call, *args) -> None:
    """``call(*args)``, its failure (the server killed under it) ignored."""
    try:
        call(*args)
    except Exception:  # noqa: BLE001
        pass


def test_a_continuous_query_outlives_kill_9(lives) -> None:
    """Two lives of ``dfsql serve`` on one state directory, each ended by SIGKILL: the
    query runs again from its checkpoint and its table is exact (files that arrived
    while the server was down included); a kept query whose input is gone is listed as
    failed, not a crash; STOP removes each from the directory (so no later life starts
    it: the server starts what the directory holds)."""
    state, src, side = lives.state, lives.tmp / "in", lives.tmp / "side"
    seen = lives.seen["outlives"]
    # ---- life 1: the query starts, reads 120 rows, the server is killed; a second
    # query over a stream whose directory will be gone at the next start
    assert seen["created"] == ("live_windows", "table global_temp.live_windows",
                               str(state / "checkpoints" / "live_windows"))
    assert seen["statement"].endswith(seen["query"])
    assert seen["streams"] == [("live", str(src))]
    assert seen["read"] == 120
    # minute 0's windows closed at arrival 1:15 (event 1:10): in the table already
    assert seen["first table"] >= 2
    # ---- life 2: no --stream (the records have them); the query runs again
    assert "dfsql serve: continuous query live_windows started again from its " \
           f"checkpoint {state / 'checkpoints' / 'live_windows'}" in seen["log"]
    assert seen["took"] is not None
    reason = f"its stream side reads {side}, which is gone"
    assert seen["said"] == [f"dfsql serve: continuous query side_windows not started "
                            f"again: {reason}"]
    assert seen["shown live"] == (seen["qid"], "RUNNING")
    assert seen["shown side"] == f"FAILED: {reason}"
    # the sentinel, after the restart: the query reads new files too
    assert seen["got"] == _hand_derived()
    assert len(seen["table"]) == 12
    assert seen["table"] == seen["replayed"]
    # STOP removes each from the directory: the next life would start neither (the
    # other scenarios' queries stay)
    others = ["altered_windows.json", "live_files.json"]
    assert seen["stop live"] == [("live_windows", "STOPPED", f"removed from {state}")]
    assert seen["kept after live"] == sorted([*others, "side_windows.json"])
    assert seen["live dirs"] == [False, False]  # its checkpoint and its table
    assert seen["stop side"] == [("side_windows", "STOPPED", f"removed from {state}")]
    assert seen["kept after side"] == others
    assert seen["shown after"] == ["altered_windows", "live_files"]
    assert "Traceback" not in seen["log"]


def test_a_backfill_killed_before_its_first_batch_runs_again_exactly_once(lives) -> None:
    """``BACKFILL FROM`` over the endpoint, the server killed as soon as it answers (the
    stream's first micro-batch, which carries the history, running or not yet run):
    started again on its state directory, the query backfills again, and its table holds
    exactly what one uninterrupted run of history and stream holds (derived by hand:
    every (key, minute) window of 30 rows of value minute + 1; all closed but the last
    minute's, which is at its last EARLY pane)."""
    seen = lives.seen["backfill"]
    assert not isinstance(seen["answer"], Exception), seen["answer"]
    assert seen["commits"] == [], "killed after the first batch"
    minutes = END // 60
    assert seen["got"] == _backfilled(minutes)
    assert seen["rows"] == 2 * minutes
    assert "Traceback" not in seen["log"]


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


def test_an_alter_killed_at_once_goes_on_as_the_new_query(lives) -> None:
    """``ALTER STREAMING QUERY`` over the endpoint, the server killed as soon as it
    answers (the new version's first micro-batch, which restates the table, running or
    not yet run): started again on its state directory, the new version runs, from its
    own checkpoint, and its table holds exactly what the new query holds had it run from
    the start (:func:`_two_minutes`)."""
    state, seen = lives.state, lives.seen["alter"]
    assert seen["first table"] is True
    assert seen["second table"] is True  # run again from its checkpoint before the ALTER
    changed = seen["answer"]
    assert not isinstance(changed, Exception), changed
    assert [r[2] for r in changed] == [2]
    record = seen["record"]
    assert record["checkpoint"] == "checkpoints/altered_windows.v2"
    assert [v for v, _ in record["altered"]["versions"]] == [1, 2]
    assert not (state / "checkpoints" / "altered_windows").exists()  # the old version's
    assert seen["commits"] == [], "killed after its first batch"
    assert seen["got"] == _two_minutes()
    assert seen["rows"] == 6
    assert seen["shown"] == [f"v1 from the start; v2 from {changed[0][3]}"]
    assert "Traceback" not in seen["log"]


def test_a_directory_query_killed_during_and_after_an_alter(lives) -> None:
    """A retracting query INTO DIRECTORY (every window kept), changed from 1-minute to
    2-minute windows, its server killed twice:

    1. while ALTER runs, once the old query has stopped and the directory's retractions
       are written, about when the record is switched: started again, exactly one
       version runs and the directory's signed sums are that version's values, never a
       mixture;
    2. ALTER again (if the first kill left the old version), the server killed soon
       after it answers (once the two statements of the other scenarios that follow it
       have answered, a second or two): started again, the new version restates the
       directory once (its retractions kept beside its checkpoint) and goes on with
       Spark's file sink log.

    By hand (:func:`_sums`): every window of m minutes sums 30 rows of value k + 1 for
    each of its minutes k (the 1-minute windows' totals, or 90, 210 and 330 per key)."""
    seen = lives.seen["directory"]
    assert seen["first batch"] is True
    assert seen["restatement written"] is True
    versions = seen["versions"]
    assert len(versions) == 1 and versions[0].startswith("v1 from the start"), versions
    if "v2" not in versions[0]:  # the old version ran on: the directory is its own
        assert seen["old sums"] == {w for w in _sums(1) if w[2] <= T0 + timedelta(minutes=4)}
        assert not isinstance(seen["answer"], Exception), seen["answer"]
    assert seen["record"]["altered"]["log_base"] >= 1
    assert seen["sums"] == _sums(2)
    assert "Traceback" not in seen["log"]
