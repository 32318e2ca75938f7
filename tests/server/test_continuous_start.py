"""Kept continuous queries start again whatever became of their history, and a query that
failed to start again is started by ``START STREAMING QUERY`` without restarting the
server (docs/guides/streams.md "Kept across restarts").

``dfsql serve --state-dir D`` runs as a real command and is killed with SIGKILL (the
helpers of :mod:`tests.server.test_continuous_restart`). Once a version of a query has
completed a micro-batch its checkpoint holds its state, so its restart plans none of its
history: neither its ``BACKFILL FROM`` table (dropped here before the kill) nor the files
an earlier version read.
"""

from __future__ import annotations

import re
import sys
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

#: a Java stack trace's frame, as the JVM prints one to stderr
JAVA_FRAME = re.compile(r"^\s+at [\w.$]+\(.*\)$", re.MULTILINE)


def _refused(served: Served, statement: str) -> str:
    """The first line of the error the statement is refused with."""
    with pytest.raises(OperationalError) as info:
        served.rows(statement)
    return info.value.args[0].status.errorMessage.splitlines()[0]


def _committed(checkpoint: Path) -> bool:
    return (checkpoint / "commits" / "0").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_kept_queries_start_again_whatever_became_of_their_history(tmp_path) -> None:
    """Life 1: ``live_windows`` starts BACKFILL FROM a warehouse table (minute 0) over
    the stream (from minute 1), completes a micro-batch, is ALTERed to 2-minute windows,
    and the new version completes one too (over a file that arrived after the change);
    then the history table is dropped. A second
    query, ``side_windows``, reads a stream whose directory is taken away while the
    server is down. Life 2, after kill -9: live_windows runs (its history is not planned
    again) and its table is the new query's over all the rows; side_windows is FAILED with
    a one-line reason, refused by START while its directory is missing, and started by
    START once it is back, its table then exact.

    By hand (live_windows): 2-minute windows of 60 rows per key, minutes m and m + 1 of
    value m + 1 and m + 2; [0,2) and [2,4) closed ON_TIME, [4,6) at its EARLY pane of its
    60th row. side_windows (1-minute windows over two minutes): minute 0 closed ON_TIME
    with 30 rows of 1; minute 1 at its EARLY pane of its 30th row, 30 rows of 2."""
    tmp_path = tmp_path.resolve()
    state, src, hist = tmp_path / "state", tmp_path / "in", tmp_path / "history"
    side, away = tmp_path / "side", tmp_path / "side-away"
    for d in (src, hist, side):
        d.mkdir()
    _write(hist / "part-0.parquet", _events(0, 60))
    _write(src / "part-0.parquet", _events(60, 200))
    _write(side / "part-0.parquet", _events(0, 120))
    first = Served(tmp_path, 1, "--state-dir", str(state), "--stream", f"live={src}",
                   "--stream", f"side={side}")
    try:
        first.rows(f"CREATE TABLE live_history AS SELECT * FROM parquet.`{hist}`")
        first.rows("CREATE STREAMING QUERY live_windows BACKFILL FROM live_history AS "
                   + QUERY.format(t="live"))
        first.rows("CREATE STREAMING QUERY side_windows AS " + QUERY.format(t="side"))
        assert _wait(lambda: _committed(state / "checkpoints" / "live_windows"), True)
        changed = first.rows("ALTER STREAMING QUERY live_windows AS "
                             + QUERY.format(t="live").replace("1 MINUTE", "2 MINUTES"))
        assert [r[2] for r in changed] == [2]
        _write(src / "part-1.parquet", _events(200, 280))  # the new version's first batch
        assert _wait(lambda: _committed(state / "checkpoints" / "live_windows.v2"), True)
        first.rows("DROP TABLE live_history")
        assert not (tmp_path / "warehouse" / "live_history").exists()
    finally:
        first.kill()
    side.rename(away)

    second = Served(tmp_path, 2, "--state-dir", str(state))
    try:
        shown = {r[0]: r[2] for r in _show_rows(second)}
        gone = f"its stream side reads {side}, which is gone"
        assert shown == {"live_windows": "RUNNING", "side_windows": f"FAILED: {gone}"}
        _write(src / "part-2.parquet", _events(280, 360))
        _write(src / "part-3.parquet", [("a", 0, None, FRONTIER)])
        want = {(k, 30 * (2 * j + 1) + 30 * (2 * j + 2), 60, T0 + timedelta(minutes=2 * j),
                 "ON_TIME" if j < 2 else "EARLY") for k in "ab" for j in range(3)}
        got = _wait(lambda: {(r[0], r[1], r[2], r[3], r[6]) for r in _table(second)}, want)
        assert got == want

        # START STREAMING QUERY: refused, placed at the name, for an unknown name, a
        # running query and one whose cause is not fixed yet (its reason renewed)
        assert _refused(second, "START STREAMING QUERY nothing_here") == \
            "line 1, col 23: no continuous query named nothing_here"
        assert _refused(second, "START STREAMING QUERY live_windows") == \
            "line 1, col 23: the continuous query live_windows is running"
        assert _refused(second, "START STREAMING QUERY side_windows") == \
            f"line 1, col 23: side_windows did not start again: {gone}"
        assert {r[0]: r[2] for r in _show_rows(second)}["side_windows"] == f"FAILED: {gone}"
        away.rename(side)  # the cause fixed
        [(name, _, status, checkpoint)] = second.rows("START STREAMING QUERY side_windows")
        assert (name, status, checkpoint) == (
            "side_windows", "RUNNING", str(state / "checkpoints" / "side_windows"))
        assert {r[0]: r[2] for r in _show_rows(second)} == {
            "live_windows": "RUNNING", "side_windows": "RUNNING"}
        _write(side / "part-1.parquet", [("a", 0, None, FRONTIER)])
        side_want = {(k, 30 * (m + 1), 30, T0 + timedelta(minutes=m),
                      "ON_TIME" if m == 0 else "EARLY") for k in "ab" for m in range(2)}
        got = _wait(lambda: {(r[0], r[1], r[2], r[3], r[6]) for r in set(second.rows(
            "SELECT key, total, n, window_start, window_end, pane_index, pane_timing "
            "FROM global_temp.side_windows"))}, side_want)
        assert got == side_want
        log = second.text()
        # no stack trace, Python's or Java's (PySpark's loggers print one as JSON)
        assert "Traceback" not in log and not JAVA_FRAME.search(log), log
        assert "stacktrace" not in log and "SQLQueryContextLogger" not in log, log
    finally:
        second.kill()
