"""A continuous query into a PostgreSQL table outlives ``kill -9`` of its server
(docs/guides/databases.md): ``dfsql serve --state-dir D --connection wh=…
--connection-password-file wh=…`` runs ``CREATE STREAMING QUERY … INTO TABLE
wh.public.sessions`` over a file stream, fed file by file; the server is killed with
SIGKILL (its JVM and Python workers with it) after the database holds a batch, more
files arrive while it is down, and a second life on D runs the query again from its
checkpoint. The database table must then equal the bounded replay's changelog before
the frontier (a sentinel row an hour later), applied row by row: no batch lost, none
applied twice. No log, state file or answer of the server holds the password."""

from __future__ import annotations

import sys
from datetime import timedelta, timezone

import pytest

from tests.postgres import Postgres
from tests.server.restarts import FRONTIER, T0, Served, _wait, _write, replayed_table

PASSWORD = "pg-secret-7c1f"
#: retracting sessions on the arrival clock (so the rows do not depend on where the kill
#: or the micro-batches cut the stream): each early pane is retracted by its successor
QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM {t} GROUP BY key "
         "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 10 SECONDS "
         "PROCESSING TIME arrival_time TRIGGER AT WATERMARK EARLY EVERY 4 ROWS "
         "EMIT ACCUMULATING AND RETRACTING")
COLUMNS = ("key", "total", "n", "window_start", "window_end", "pane_index", "pane_timing",
           "is_last", "emit_time")


def _burst(b: int) -> list[tuple]:
    """Burst ``b``: 12 events at seconds 100·b … 100·b + 11, keys alternating (each key's
    events 2 s apart: one session per key and burst), arriving 5 s after their time."""
    return [("ab"[i % 2], b + 1, T0 + timedelta(seconds=100 * b + i),
             T0 + timedelta(seconds=100 * b + i + 5)) for i in range(12)]


@pytest.fixture(scope="module")
def pg():
    server = Postgres()
    server.start()
    with server.connect() as c:
        c.execute(f"CREATE ROLE writer LOGIN PASSWORD '{PASSWORD}'")
        c.execute("GRANT CREATE ON SCHEMA public TO writer")
    yield server
    server.stop()
    server.remove()


def _db_rows(pg: Postgres, table: str = "sessions") -> set[tuple]:
    with pg.connect() as c:
        if c.execute(f"SELECT to_regclass('public.{table}')").fetchone() == (None,):
            return set()
        rows = c.execute(f"SELECT {', '.join(COLUMNS)} FROM public.{table}").fetchall()
    return {tuple(v.astimezone(timezone.utc).replace(tzinfo=None)
                  if hasattr(v, "tzinfo") and v.tzinfo else v for v in r) for r in rows}


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


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_query_into_postgres_outlives_kill_9_exactly_once(tmp_path, pg) -> None:
    tmp_path = tmp_path.resolve()
    src, secret, flags = _served_flags(tmp_path, pg)
    first = Served(tmp_path, 1, *flags, "--stream", f"live={src}")
    try:
        [(name, _, sink, _)] = first.rows(
            f"CREATE STREAMING QUERY sessions_pg INTO TABLE wh.public.sessions AS "
            f"{QUERY.format(t='live')}")
        assert (name, sink) == ("sessions_pg", "table wh.public.sessions")
        assert _wait(lambda: _progress(pg) >= 0, True)
        _write(src / "part-2.parquet", _burst(2))
        assert _wait(lambda: _progress(pg) >= 1, True)
        shown = first.rows("SHOW STREAMING QUERIES")
        assert [(r[0], r[3]) for r in shown] == [("sessions_pg", "table wh.public.sessions")]
    finally:
        first.kill()
    for b in range(3, 5):  # arrive while the server is down
        _write(src / f"part-{b}.parquet", _burst(b))
    _write(src / "part-9.parquet", [("a", 0, None, FRONTIER)])
    second = Served(tmp_path, 2, *flags)
    try:
        want = replayed_table(second, src, QUERY, COLUMNS)
        # hand check of the replay: 5 bursts × 2 keys, one session each (each key's events
        # 2 s apart); bursts 0-3 closed (the watermark, last event − 10 s, is past their
        # end + 30 s): ON_TIME, 6 events of value b + 1; burst 4 still open, its row the
        # EARLY pane at its 4th event (EVERY 4 ROWS), the session then ending 30 s after it
        assert sorted((r[0], r[1], r[2], r[6]) for r in want) == sorted(
            [(k, 6 * (b + 1), 6, "ON_TIME") for k in "ab" for b in range(4)]
            + [(k, 4 * 5, 4, "EARLY") for k in "ab"])
        assert _wait(lambda: _db_rows(pg), want) == want
        second.rows("STOP STREAMING QUERY sessions_pg")
    finally:
        second.kill()
    assert _password_in(tmp_path, secret) == []


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_an_alter_into_postgres_killed_at_once_goes_on_exactly_once(tmp_path, pg) -> None:
    """``ALTER STREAMING QUERY`` over the endpoint (EARLY EVERY 4 ROWS → 5 ROWS), the
    server killed as soon as it answers (the restatement's transaction committed or
    not yet), more files while it is down, a second life on the state directory: the
    table holds, by hand, bursts 0-3 closed ON_TIME as both queries give them (6 events
    of value b + 1 per key), and burst 4's open session at the changed query's EARLY pane
    of its 5th event (5 × 5); the progress ids go on from the first version's."""
    tmp_path = tmp_path.resolve()
    src, secret, flags = _served_flags(tmp_path, pg)
    first = Served(tmp_path, 1, *flags, "--stream", f"live={src}")
    changed = QUERY.replace("EVERY 4 ROWS", "EVERY 5 ROWS")
    try:
        first.rows(f"CREATE STREAMING QUERY altered_pg INTO TABLE wh.public.altered AS "
                   f"{QUERY.format(t='live')}")
        assert _wait(lambda: _progress(pg, "altered") >= 0, True)
        before = _progress(pg, "altered")
        [answer] = first.rows(f"ALTER STREAMING QUERY altered_pg AS {changed.format(t='live')}")
    finally:
        first.kill()
    assert answer[2] == 2  # the second version
    for b in range(2, 5):
        _write(src / f"part-{b}.parquet", _burst(b))
    _write(src / "part-9.parquet", [("a", 0, None, FRONTIER)])
    second = Served(tmp_path, 2, *flags)
    try:
        shape = ("key", "total", "n", "pane_timing")
        want = sorted([(k, 6 * (b + 1), 6, "ON_TIME") for k in "ab" for b in range(4)]
                      + [(k, 5 * 5, 5, "EARLY") for k in "ab"])
        got = _wait(lambda: sorted((r[0], r[1], r[2], r[6])
                                   for r in _db_rows(pg, "altered")), want)
        assert got == want, shape
        # and each open or closed window's row is the replay's of the changed query
        # (its pane index and emit time aside: the closed windows' rows are the first
        # version's), one row per window, nothing doubled
        replayed = replayed_table(second, src, changed, COLUMNS)
        assert {r[:5] for r in _db_rows(pg, "altered")} == {r[:5] for r in replayed}
        assert _progress(pg, "altered") > before
        second.rows("STOP STREAMING QUERY altered_pg")
    finally:
        second.kill()
    assert _password_in(tmp_path, secret) == []
