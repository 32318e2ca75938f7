"""A continuous query into a PostgreSQL table, and one into a changelog, outlive ``kill
-9`` of their server and a restart of the database (docs/guides/databases.md): ``dfsql
serve --state-dir D --connection wh=… --connection-password-file wh=…`` runs ``CREATE
STREAMING QUERY … INTO TABLE wh.public.sessions`` and ``… INTO CHANGELOG
wh.public.sessions_log`` side by side over one file stream, fed file by file; the
database is stopped between two files (the sinks try again) and started; the server is
killed with SIGKILL (its JVM and Python workers with it) after the database holds a
batch, more files arrive while it is down, and a second life on D runs the queries again
from their checkpoints. The table must then equal the bounded replay's changelog before
the frontier (a sentinel row an hour later), applied row by row, and the changelog must
hold the replay's rows, each once: no batch lost, none applied twice. No log, state file
or answer of the server holds the password."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import timedelta, timezone
from pathlib import Path

import pytest

from tests.postgres import Postgres, add_writer
from tests.server.restarts import (
    FRONTIER,
    T0,
    Served,
    _wait,
    _write,
    applied,
    replayed_changelog,
    replayed_table,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

PASSWORD = "pg-secret-7c1f"
#: retracting sessions on the arrival clock (so the rows do not depend on where the kill
#: or the micro-batches cut the stream): each early pane is retracted by its successor
QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM {t} GROUP BY key "
         "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 10 SECONDS "
         "PROCESSING TIME arrival_time TRIGGER AT WATERMARK EARLY EVERY 4 ROWS "
         "EMIT ACCUMULATING AND RETRACTING")
COLUMNS = ("key", "total", "n", "window_start", "window_end", "pane_index", "pane_timing",
           "is_last", "emit_time")
#: a changelog's rows: the table's columns and is_retraction
LOGGED = (*COLUMNS, "is_retraction")


def _burst(b: int) -> list[tuple]:
    """Burst ``b``: 12 events at seconds 100·b … 100·b + 11, keys alternating (each key's
    events 2 s apart: one session per key and burst), arriving 5 s after their time."""
    return [("ab"[i % 2], b + 1, T0 + timedelta(seconds=100 * b + i),
             T0 + timedelta(seconds=100 * b + i + 5)) for i in range(12)]


@pytest.fixture(scope="module")
def pg():
    server = Postgres()
    server.start()
    add_writer(server, PASSWORD)
    yield server
    server.stop()
    server.remove()


def _utc(row: tuple) -> tuple:
    """A database row's timestamps as the endpoint gives the replay's: naive UTC."""
    return tuple(v.astimezone(timezone.utc).replace(tzinfo=None)
                 if hasattr(v, "tzinfo") and v.tzinfo else v for v in row)


def _db_rows(pg: Postgres, table: str = "sessions") -> set[tuple]:
    with pg.connect() as c:
        if c.execute(f"SELECT to_regclass('public.{table}')").fetchone() == (None,):
            return set()
        rows = c.execute(f"SELECT {', '.join(COLUMNS)} FROM public.{table}").fetchall()
    return {_utc(r) for r in rows}


def _log_rows(pg: Postgres, table: str = "sessions_log") -> list[tuple]:
    """The changelog table's rows in its order (batch_id, batch_row), as LOGGED and then
    batch_id, batch_row."""
    with pg.connect() as c:
        if c.execute(f"SELECT to_regclass('public.{table}')").fetchone() == (None,):
            return []
        rows = c.execute(f"SELECT {', '.join(LOGGED)}, batch_id, batch_row FROM "
                         f"public.{table} ORDER BY batch_id, batch_row").fetchall()
    return [_utc(r) for r in rows]


def _shape(rows: list[tuple]) -> list[tuple]:
    """(key, total, n, pane_timing, is_retraction) of changelog rows, sorted."""
    return sorted((r[0], r[1], r[2], r[6], r[9]) for r in rows)


def _by_hand(closed: range, open_burst: int) -> list[tuple]:
    """The changelog's shape by hand (_burst: each key's session of a burst holds 6
    events of value b + 1): a closed burst's session emits its EARLY pane at its 4th event
    (EVERY 4 ROWS), that pane's retraction when the watermark closes the session (its end
    moved 4 s on by events 5 and 6: another window) and the ON_TIME pane; the open burst
    only its EARLY pane."""
    rows = [(k, 4 * (open_burst + 1), 4, "EARLY", False) for k in "ab"]
    for k in "ab":
        for b in closed:
            rows += [(k, 4 * (b + 1), 4, "EARLY", False), (k, 4 * (b + 1), 4, "EARLY", True),
                     (k, 6 * (b + 1), 6, "ON_TIME", False)]
    return sorted(rows)


def _progress(pg: Postgres, table: str = "sessions") -> int:
    with pg.connect() as c:
        if c.execute("SELECT to_regclass('public.dfsql_progress')").fetchone() == (None,):
            return -1
        row = c.execute("SELECT batch_id FROM public.dfsql_progress WHERE target = %s",
                        (table,)).fetchone()
    return row[0] if row else -1


def _served_flags(tmp_path, pg: Postgres) -> tuple:
    """The stream's directory with bursts 0 and 1, the password file, and the server's
    flags: a state directory and the connection wh as the role writer."""
    src = tmp_path / "in"
    src.mkdir()
    secret = tmp_path / "pw"
    secret.write_text(PASSWORD + "\n")
    for b in range(2):
        _write(src / f"part-{b}.parquet", _burst(b))
    return src, secret, ("--state-dir", str(tmp_path / "state"), "--connection",
                         f"wh={pg.url('writer')}", "--connection-password-file",
                         f"wh={secret}")


def _password_in(tmp_path, secret) -> list[str]:
    """Every file of the run (logs, state, checkpoints) that holds the password."""
    return [str(p) for p in tmp_path.rglob("*") if p.is_file() and p != secret
            and PASSWORD.encode() in p.read_bytes()]


def _status(served: Served, name: str) -> str:
    return next((r[2] for r in served.rows("SHOW STREAMING QUERIES") if r[0] == name), "")


#: the changed query of the ALTER scenario: EARLY EVERY 4 ROWS → 5 ROWS
CHANGED = QUERY.replace("EVERY 4 ROWS", "EVERY 5 ROWS")


@dataclass
class Lives:
    """The module's directory, its password file, and what each scenario saw."""

    tmp: Path
    secret: Path
    seen: dict[str, dict]


@pytest.fixture(scope="module")
def lives(tmp_path_factory, pg) -> Lives:
    """Two lives of ``dfsql serve`` on one state directory, both scenarios in each (a JVM
    start is the suite's dearest step), each over a stream of its own: the first life
    as :func:`_first_life`, then ``altered_pg``'s ALTER and the kill as soon as it
    answers; its last batches unrecorded (:func:`_unrecord`), more files while it is
    down; the second life runs every query to the sentinel."""
    tmp = tmp_path_factory.mktemp("pg-lives").resolve()  # the server records resolved paths
    src, secret, flags = _served_flags(tmp, pg)
    alt = tmp / "alt"
    alt.mkdir()
    for b in range(2):
        _write(alt / f"part-{b}.parquet", _burst(b))
    run = Lives(tmp, secret, {"exactly once": {}, "alter": {}})
    checkpoints = tmp / "state" / "checkpoints"
    one, alter = run.seen["exactly once"], run.seen["alter"]
    first = Served(tmp, 1, *flags, "--stream", f"live={src}", "--stream", f"alt={alt}")
    try:
        first.rows(f"CREATE STREAMING QUERY altered_pg INTO TABLE wh.public.altered AS "
                   f"{QUERY.format(t='alt')}")
        alter["first batch"] = _wait(lambda: _progress(pg, "altered") >= 0, True)
        _first_life(first, pg, src, checkpoints, one)
        alter["before"] = _progress(pg, "altered")
        [alter["answer"]] = first.rows(
            f"ALTER STREAMING QUERY altered_pg AS {CHANGED.format(t='alt')}")
    finally:
        first.kill()
    for query, table in (("sessions_pg", "sessions"), ("sessions_log", "sessions_log")):
        _unrecord(checkpoints / query, _progress(pg, table))
    for b in range(4, 6):  # arrive while the server is down
        _write(src / f"part-{b}.parquet", _burst(b))
    _write(src / "part-9.parquet", [("a", 0, None, FRONTIER)])
    for b in range(2, 5):
        _write(alt / f"part-{b}.parquet", _burst(b))
    _write(alt / "part-9.parquet", [("a", 0, None, FRONTIER)])
    second = Served(tmp, 2, *flags)
    try:
        _exactly_once_life_2(second, pg, src, one)
        _alter_life_2(second, pg, alt, alter)
    finally:
        second.kill()
    print(f"\nstart-ups: {first.up:.1f} s, {second.up:.1f} s")
    return run


def _first_life(first: Served, pg: Postgres, src, checkpoints, seen: dict) -> None:
    """A table and a changelog of one stream: bursts 0-1 (batch 0), burst 2 (batch 1);
    then the database stopped between two files, burst 3 arriving, the changelog's sink
    seen trying again, the database started: its batch commits once (and Spark records
    it, so that the kill after this finds the batch in both commit logs)."""
    seen["created"] = []
    for query, into, table in (("sessions_pg", "TABLE", "sessions"),
                               ("sessions_log", "CHANGELOG", "sessions_log")):
        [(name, _, sink, _)] = first.rows(f"CREATE STREAMING QUERY {query} INTO {into} "
                                          f"wh.public.{table} AS {QUERY.format(t='live')}")
        seen["created"].append((name, sink))
    both = lambda at: min(_progress(pg), _progress(pg, "sessions_log")) >= at  # noqa: E731
    seen["batch 0"] = _wait(lambda: both(0), True)
    _write(src / "part-2.parquet", _burst(2))
    seen["batch 1"] = _wait(lambda: both(1), True)
    seen["shown"] = [(r[0], r[3]) for r in first.rows("SHOW STREAMING QUERIES")
                     if r[0] != "altered_pg"]
    pg.stop()
    try:
        _write(src / "part-3.parquet", _burst(3))
        retrying = "RETRYING changelog wh.public.sessions_log: batch "
        seen["retrying"] = _wait(
            lambda: _status(first, "sessions_log").startswith(retrying), True, pause=0.1)
    finally:
        pg.start()
    seen["batch 2"] = _wait(lambda: both(2), True)
    logged = _log_rows(pg)
    seen["first logged"] = _shape(logged)
    seen["first applied"] = (applied([r[:-2] for r in logged], LOGGED), _db_rows(pg))
    seen["recorded"] = [
        _wait((checkpoints / query / "commits" / str(_progress(pg, table))).exists, True)
        for query, table in (("sessions_pg", "sessions"), ("sessions_log", "sessions_log"))]


def _unrecord(checkpoint, batch: int) -> None:
    """Spark's record of ``batch`` removed from its commit log, as a kill between the
    database's commit and Spark's leaves it: the next life runs the batch again, and the
    sink must find it in the progress row and write nothing."""
    commits = checkpoint / "commits"
    for name in (str(batch), f".{batch}.crc"):
        (commits / name).unlink(missing_ok=True)


def _exactly_once_life_2(second: Served, pg: Postgres, src, seen: dict) -> None:
    seen["replayed"] = replayed = replayed_changelog(second, src, QUERY, LOGGED)
    want = applied(replayed, LOGGED)
    seen["table"] = _wait(lambda: _db_rows(pg), want)
    seen["log shape"] = _wait(lambda: _shape(_log_rows(pg)), _shape(replayed))
    seen["logged"] = _log_rows(pg)
    seen["progress"] = _progress(pg, "sessions_log")
    seen["db rows"] = _db_rows(pg)
    second.rows("STOP STREAMING QUERY sessions_pg")
    second.rows("STOP STREAMING QUERY sessions_log")


def _alter_life_2(second: Served, pg: Postgres, alt, seen: dict) -> None:
    want = sorted([(k, 6 * (b + 1), 6, "ON_TIME") for k in "ab" for b in range(4)]
                  + [(k, 5 * 5, 5, "EARLY") for k in "ab"])
    seen["got"] = _wait(lambda: sorted((r[0], r[1], r[2], r[6])
                                       for r in _db_rows(pg, "altered")), want)
    seen["replayed"] = replayed_table(second, alt, CHANGED, COLUMNS)
    seen["table"] = _db_rows(pg, "altered")
    seen["progress"] = _progress(pg, "altered")
    second.rows("STOP STREAMING QUERY altered_pg")


def test_a_table_and_a_changelog_in_postgres_outlive_kill_9_exactly_once(lives) -> None:
    """The first life as :func:`_first_life`, killed; its last batch unrecorded in Spark's
    commit logs (:func:`_unrecord`), bursts 4-5 and the sentinel arriving while it is
    down; the second life's table is the replay's applied, its changelog the replay's
    rows, each once, in batches 0, 1, … without a gap."""
    seen = lives.seen["exactly once"]
    assert seen["created"] == [("sessions_pg", "table wh.public.sessions"),
                               ("sessions_log", "changelog wh.public.sessions_log")]
    assert seen["batch 0"] is seen["batch 1"] is True
    assert seen["shown"] == [("sessions_pg", "table wh.public.sessions"),
                             ("sessions_log", "changelog wh.public.sessions_log")]
    assert seen["retrying"] is True
    assert seen["batch 2"] is True
    # by hand: bursts 0-2 closed (the watermark, 311 − 10 s, is past 211 + 30 s), 3 open
    assert seen["first logged"] == _by_hand(range(3), 3)
    logged_applied, table = seen["first applied"]
    assert logged_applied == table
    assert seen["recorded"] == [True, True]
    replayed = seen["replayed"]
    # the replay by hand: bursts 0-4 closed (the watermark, last event − 10 s, is past
    # their end + 30 s), burst 5 open
    assert _shape(replayed) == _by_hand(range(5), 5)
    want = applied(replayed, LOGGED)
    assert seen["table"] == want
    # every row of the replay once, none doubled or lost
    assert seen["log shape"] == _shape(replayed)
    logged = seen["logged"]
    assert sorted(r[:-2] for r in logged) == sorted(replayed)
    # batch ids from 0 without a gap to the progress row's, each batch's rows 0 … n−1
    ids = [r[-2] for r in logged]
    assert sorted(set(ids)) == list(range(seen["progress"] + 1))
    assert all([r[-1] for r in logged if r[-2] == i] == list(range(ids.count(i)))
               for i in set(ids))
    assert applied([r[:-2] for r in logged], LOGGED) == seen["db rows"] == want
    assert _password_in(lives.tmp, lives.secret) == []


def test_an_alter_into_postgres_killed_at_once_goes_on_exactly_once(lives) -> None:
    """``ALTER STREAMING QUERY`` over the endpoint (EARLY EVERY 4 ROWS → 5 ROWS), the
    server killed as soon as it answers (the restatement's transaction committed or
    not yet), more files while it is down, a second life on the state directory: the
    table holds, by hand, bursts 0-3 closed ON_TIME as both queries give them (6 events
    of value b + 1 per key), and burst 4's open session at the changed query's EARLY pane
    of its 5th event (5 × 5); the progress ids go on from the first version's."""
    seen = lives.seen["alter"]
    assert seen["first batch"] is True
    assert seen["answer"][2] == 2  # the second version
    want = sorted([(k, 6 * (b + 1), 6, "ON_TIME") for k in "ab" for b in range(4)]
                  + [(k, 5 * 5, 5, "EARLY") for k in "ab"])
    assert seen["got"] == want, ("key", "total", "n", "pane_timing")
    # and each open or closed window's row is the replay's of the changed query
    # (its pane index and emit time aside: the closed windows' rows are the first
    # version's), one row per window, nothing doubled
    assert {r[:5] for r in seen["table"]} == {r[:5] for r in seen["replayed"]}
    assert seen["progress"] > seen["before"]
    assert _password_in(lives.tmp, lives.secret) == []
