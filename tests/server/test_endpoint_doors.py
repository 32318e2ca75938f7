"""One door (issue #52): every relation dfsql reads for a client passes the judgement
its statement's text does, not only what ``spark.sql`` runs. ``WATERMARK FROM t`` and
``EXPLAIN WATERMARK … TRY FROM t`` name a relation that dfsql reads itself (the
watermark's timeline), never in the Spark SQL of the statement's blocks: a name Spark
reads as ``format.`path``` there is judged as if ``SELECT * FROM <name>`` were written
in its place, and refused with SQLSTATE 42501 at the name, before anything is read.

Each attack is sent by an authenticated PLAIN user over PyHive (the server and users of
test_endpoint_judge.py); the canary files' content and their JSON column name never
reach the reply, and the server goes on serving another user. Positions are the
statement's own: where the refused path's (or data source's) token starts in it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.server.clients import answers_select_1
from tests.server.judged import SECRET, _connect_as, _fill, _refused

#: a JSON file outside the root whose one column is named by the canary: a schema that
#: Spark infers from it would quote it back ("it has (…)")
COLUMN = "TOP_SECRET_COLUMN_52"
#: the paper's watermarks (examples/paper/watermarks.csv) as JSON lines
MARKS = [("2015-09-01 12:04:00", "2015-09-01 12:00:00"),
         ("2015-09-01 12:05:00", "2015-09-01 12:01:40"),
         ("2015-09-01 12:06:00", "2015-09-01 12:02:00"),
         ("2015-09-01 12:07:00", "2015-09-01 12:05:10"),
         ("2015-09-01 12:08:00", "2015-09-01 12:06:00"),
         ("2015-09-01 12:09:00", "2015-09-01 12:09:00")]
QUERY = ("SELECT key, SUM(value) AS total FROM scores GROUP BY key "
         "WINDOW FIXED(2 MINUTES) ON event_time WATERMARK FROM {name} "
         "PROCESSING TIME arrival_time ALLOWED LATENESS 10 MINUTES")


@pytest.fixture(scope="module")
def doors(places) -> dict[str, Path]:
    (places["outside"] / "secret.json").write_text(json.dumps({COLUMN: SECRET}) + "\n")
    (places["root"] / "marks").mkdir(exist_ok=True)
    (places["root"] / "marks" / "marks.json").write_text("".join(
        json.dumps({"processing_time": p, "watermark": w}) + "\n" for p, w in MARKS))
    return places


#: (a name Spark reads as files, the token the refusal stands at); {root}, {outside}
NAMES = [
    ("text.`{outside}/secret.txt`", "`{outside}/secret.txt`"),
    ("`text`.`{outside}/secret.txt`", "`{outside}/secret.txt`"),
    ("TEXT.`{outside}/secret.txt`", "`{outside}/secret.txt`"),
    ("json.`{outside}/secret.json`", "`{outside}/secret.json`"),
    ("Json.`{root}/link/secret.json`", "`{root}/link/secret.json`"),
    ("json.`{root}/../outside/secret.json`", "`{root}/../outside/secret.json`"),
    ("json.`/etc`", "`/etc`"),
    # a class name: not one of the data sources' names a client may use
    ("`org.apache.spark.sql.execution.datasources.json.JsonFileFormat`."
     "`{outside}/secret.json`", "`org.apache.spark.sql.execution.datasources.json."),
    ("binaryFile.`{root}/t1`", "binaryFile"),  # not a data source a client may read
    ("`binaryfile`.`{root}/t1`", "`binaryfile`"),
]


def _column_of(statement: str, token: str) -> str:
    """``line 1, col C`` of ``token``'s last place in the (one-line) statement."""
    return f"line 1, col {statement.rindex(token) + 1}:"


def _assert_refused_at(cursor, statement: str, token: str) -> None:
    status = _refused(cursor, statement)
    assert status.sqlState == "42501", (statement, status.errorMessage)
    assert status.errorMessage.startswith(_column_of(statement, token)), \
        (statement, status.errorMessage)
    assert SECRET not in status.errorMessage and COLUMN not in status.errorMessage


def _still_served(server) -> None:
    answers_select_1(_connect_as(server, "walter", "pw2"))


def test_watermark_from_a_file_name_is_refused_at_the_name(server, cursor, doors):
    for name, token in NAMES:
        statement = _fill(QUERY.format(name=name), doors)
        _assert_refused_at(cursor, statement, _fill(token, doors))
        # the same as a windowed view's body: refused when it is made
        _assert_refused_at(cursor, "CREATE OR REPLACE VIEW wm_door AS " + statement,
                           _fill(token, doors))
    _still_served(server)


def test_try_from_a_file_name_is_refused_at_the_name(server, cursor, doors):
    query = QUERY.format(name="paper_watermarks")
    for name, token in NAMES:
        for tries in ("FROM {name}", "DELAY 1 MINUTE, FROM {name}, PERFECT"):
            statement = _fill(f"EXPLAIN WATERMARK {query} TRY " + tries.format(name=name),
                              doors)
            _assert_refused_at(cursor, statement, _fill(token, doors))
    _still_served(server)


def test_disguised_in_a_cte_or_a_view_the_path_is_refused_where_written(server, cursor,
                                                                         doors):
    """The name dfsql reads is a CTE's or a view's: the CTE's body is the statement's
    own Spark SQL, and a view naming the path is refused when it is made (so the
    WATERMARK FROM that names it finds no such table, and reads nothing)."""
    path = _fill("`{outside}/secret.json`", doors)
    cte = (f"WITH m AS (SELECT * FROM json.{path}) " + QUERY.format(name="m"))
    _assert_refused_at(cursor, cte, path)
    for view in (f"CREATE OR REPLACE TEMP VIEW m2 AS SELECT * FROM json.{path}",
                 f"CREATE OR REPLACE TEMP VIEW m2 AS SELECT * FROM `json`.{path}",
                 f"CREATE OR REPLACE GLOBAL TEMP VIEW m2 AS SELECT * FROM JSON.{path}"):
        _assert_refused_at(cursor, view, path)
    status = _refused(cursor, QUERY.format(name="m2"))
    assert SECRET not in status.errorMessage and COLUMN not in status.errorMessage
    _still_served(server)


def test_backfill_from_a_file_name_is_refused_at_the_name(server, cursor, doors):
    for name, token in NAMES:
        statement = _fill(f"CREATE STREAMING QUERY q_door BACKFILL FROM {name} AS SELECT "
                          "key, COUNT(*) AS n FROM scores GROUP BY key WINDOW GLOBAL", doors)
        _assert_refused_at(cursor, statement, _fill(token, doors))
    _still_served(server)


#: Figure 12 (docs/reference.md, WATERMARK, ``FROM``): the paper's watermarks with ten
#: minutes of lateness: (total, window_start, pane_timing) of each pane
FIGURE_12 = [(5, "2015-09-01 12:00:00", "ON_TIME"), (22, "2015-09-01 12:02:00", "ON_TIME"),
             (14, "2015-09-01 12:00:00", "LATE"), (3, "2015-09-01 12:04:00", "ON_TIME"),
             (12, "2015-09-01 12:06:00", "ON_TIME")]


def _marks_view(cursor, doors) -> None:
    cursor.execute(_fill("CREATE OR REPLACE TEMP VIEW marks AS SELECT CAST(processing_time "
                         "AS TIMESTAMP) AS processing_time, CAST(watermark AS TIMESTAMP) "
                         "AS watermark FROM json.`{root}/marks`", doors))


def test_watermark_from_a_view_under_the_root_runs(cursor, doors):
    _marks_view(cursor, doors)
    cursor.execute(QUERY.format(name="marks") + " EMIT ACCUMULATING")
    rows = [(r[1], str(r[2]), r[5]) for r in cursor.fetchall()]
    assert sorted(rows) == sorted(FIGURE_12)


def test_try_from_a_view_under_the_root_runs(cursor, doors):
    """docs/reference.md, EXPLAIN WATERMARK: the paper's watermark lets the 9 in late
    (1 of 10 rows), fires 5 panes, its on-time panes 240, 180, 120 and 60 s after their
    windows end (p50 120, p90 and p99 240)."""
    _marks_view(cursor, doors)
    query = QUERY.format(name="marks")
    cursor.execute(f"EXPLAIN WATERMARK {query} TRY FROM marks, DELAY 2 MINUTES")
    rows = {r[0]: tuple(r[1:]) for r in cursor.fetchall()}
    assert rows["FROM marks"] == (1, 0.1, 0, 0.0, 5, 0, 120.0, 240.0, 240.0), rows
    assert rows["DELAY 2 MINUTES"] == (1, 0.1, 0, 0.0, 5, 0, 160.0, 220.0, 220.0), rows


# --------------------------------------------------------------------------- the catalog

def test_a_clients_stored_view_is_not_substituted_when_made_again(server, cursor):
    """A client's persistent view keeps ``${env:…}`` as text (its session substitutes
    nothing), and so does its definition in the warehouse; made again from it — by
    another process, or this one after a restart (here: the file changed, so the next
    statement's sync reads it again) — it is still text, never the server's variable."""
    from dfsql.warehouse import VIEWS, warehouse_dir
    from tests.server.judged import CANARY, ENV

    cursor.execute(f"CREATE OR REPLACE VIEW subst_kept AS SELECT '{ENV}' AS c")
    try:
        kept = warehouse_dir() / VIEWS / "default.subst_kept.sql"
        assert ENV in kept.read_text()
        kept.write_text(kept.read_text() + "\n")  # changed elsewhere: made again
        cursor.execute("SELECT c FROM subst_kept")
        assert cursor.fetchall() == [(ENV,)]
        conn = _connect_as(server, "walter", "pw2")
        try:
            cur = conn.cursor()
            cur.execute("SELECT c FROM subst_kept")
            assert cur.fetchall() == [(ENV,)] != [(CANARY,)]
        finally:
            conn.close()
    finally:
        cursor.execute("DROP VIEW IF EXISTS subst_kept")


# --------------------------------------------------------------------------- --state-dir

def test_a_kept_query_reading_a_file_name_is_refused_when_started_again(spark, doors,
                                                                       tmp_path):
    """A record in --state-dir is a client's statement: started again after a restart,
    it is judged as a whole first (WATERMARK FROM's name included), and fails as
    refused, its files unread."""
    from dfsql.server.judge import Judge, Policy
    from dfsql.server.state import VERSION, StateDir
    from tests.conftest import register_paper_tables

    statement = _fill("CREATE STREAMING QUERY q_kept AS " + QUERY.format(
        name="json.`{outside}/secret.json`"), doors)
    state = StateDir(tmp_path / "state")
    try:
        (state.root / "queries" / "q_kept.json").write_text(json.dumps({
            "version": VERSION, "name": "q_kept", "statement": statement, "owner": "mallory",
            "sink": "table", "directory": None, "checkpoint": "checkpoints/q_kept",
            "table": "tables/q_kept", "streams": [], "created": "2026-12-02T00:00:00Z",
            "altered": None}))
        judge = Judge(Policy((str(doors["root"]),)))
        judge.prepare(spark)
        [done] = state.restart_all(spark, register_paper_tables, judge)
    finally:
        state.close()
    assert not done.ok
    assert "only under its data roots" in done.detail, done.detail
    assert SECRET not in done.detail and COLUMN not in done.detail


# --------------------------------------------------------------------------- metadata

def test_get_columns_of_a_view_whose_name_spells_a_file_reads_no_file(server, doors):
    """A temp view named ``json`.`<path>`` (a back-quote in a name is Spark's to allow):
    GetColumns opens each listed view by its name, which must stay that one name, not
    become ``json.`<path>``` (a file read for its schema)."""
    from dfsql.server.tcli import ttypes as tt
    from tests.server.clients import operation_rows

    outside = doors["outside"]
    conn = _connect_as(server, "mallory", "pw")
    try:
        conn.cursor().execute(f"CREATE OR REPLACE TEMP VIEW `json``.``{outside}/secret.json`"
                              " AS SELECT 1 AS x")
        resp = conn.client.GetColumns(tt.TGetColumnsReq(
            sessionHandle=conn.sessionHandle, tableName="json%"))
        seen = repr(resp.status)
        if resp.status.statusCode == tt.TStatusCode.SUCCESS_STATUS:
            rows = operation_rows(conn, resp)
            seen += repr(rows)
            assert [r[3] for r in rows] == ["x"], rows
        assert SECRET not in seen and COLUMN not in seen, seen
    finally:
        conn.close()
    _still_served(server)


# --------------------------------------------------------------------------- one door

#: a call that reads a relation on a session, other than through dfsql.spark.door
_READS = re.compile(r"\b(?:[a-z_.]*(?:spark|session)[a-z_]*|s)\.(?:sql|table)\(|\.read(?:Stream)?\.\w|"
                    r"\bspark\.read(?:Stream)?\b")
#: the modules that may (and how many calls each): each reads on a session no client
#: statement drives, or a place whose path was judged with the statement that named it
OWN_READS = {
    "dfsql/spark/door.py": 2,  # the door itself (Open: a program's session)
    "dfsql/warehouse.py": 16,  # the process's own session's catalog
    "dfsql/spark/catalog/parquet.py": 4,  # dfsql.read_parquet and the shell's \load
    "dfsql/session.py": 2,  # the demo's tables, in dfsql's own session
    "dfsql/server/streams.py": 2,  # the operator's --stream views
    "dfsql/server/state.py": 1,  # a kept query's --stream view's schema
    "dfsql/spark/explain/live.py": 1,  # a continuous query's CHECKPOINT (its state)
    "dfsql/spark/stream/restate.py": 1,  # its CHECKPOINT's state
    "dfsql/spark/stream/sinks.py": 1,  # its INTO DIRECTORY, read by ALTER to restate it
    "dfsql/spark/stream/checkpoint.py": 2,  # its CHECKPOINT's logs
    "dfsql/spark/stream/alter.py": 2,  # its CHECKPOINT's log, the files it says it read
}


def _code(path: Path) -> str:
    """The module's code without its strings and comments (a docstring or a message
    names a call, it makes none)."""
    import tokenize

    kept, last = [], None
    with path.open("rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type in (tokenize.STRING, tokenize.COMMENT) or \
                    tokenize.tok_name[tok.type].startswith("FSTRING"):
                continue
            if tok.type == tokenize.NAME and last == tokenize.NAME:
                kept.append(" ")
            kept.append(tok.string)
            last = tok.type
    return "".join(kept)


def test_dfsql_reads_a_clients_relations_only_through_the_door():
    """Every other module of dfsql that a client's statement drives reads through
    dfsql.spark.door (door.sql, door.table): a new ``spark.sql(…)`` or ``spark.table(…)``
    in the planner would be a door the judge never sees. (The shell, the CLI and the
    notebook run in a program's own process.)"""
    package = Path(__file__).resolve().parents[2] / "dfsql"
    found = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        if rel.startswith(("dfsql/shell/", "dfsql/docs/")) or rel in (
                "dfsql/cli.py", "dfsql/notebook.py"):
            continue
        calls = len(_READS.findall(_code(path)))
        if calls:
            found[rel] = calls
    assert found == OWN_READS


def test_a_client_sessions_methods_are_sparks_own(server, cursor):
    """The door is a seam in dfsql's code, not a replaced method of the session."""
    cursor.execute("SELECT 1")
    cursor.fetchall()
    for s in list(server.service.sessions.values()):
        assert "sql" not in vars(s.spark) and "table" not in vars(s.spark)


# --------------------------------------------------------------------------- analysed plan

def test_a_scan_the_analysed_plan_moves_outside_the_root_does_not_run(spark, server,
                                                                     cursor, doors):
    """Issue #52's item 1 as the second line sees it: Hadoop options on a view move its
    path (under the root as written) to a mount of the directory outside; Spark's
    analysed plan of a read of it scans ``viewfs://…``, another file system, and the
    query does not run — whether through the statement or WATERMARK FROM (unless the
    view's options are refused when it is made: either way, 42501 and no secret)."""
    root, out = doors["root"], doors["outside"]
    view = (f"CREATE OR REPLACE TEMPORARY VIEW vfs USING text OPTIONS (path "
            f"'{root}/mnt/secret.txt', 'fs.default.name' 'viewfs://a/', "
            f"'fs.viewfs.mounttable.a.link.{root}/mnt' 'file://{out}')")
    own = spark.newSession()  # the attack is live: an unjudged session reads the secret
    own.sql(view)
    assert [r[0] for r in own.sql("SELECT * FROM vfs").collect()] == [SECRET]
    from pyhive.exc import OperationalError

    try:
        cursor.execute(view)
    except OperationalError as e:  # refused at its options: nothing more to try
        assert e.args[0].status.sqlState == "42501"
        return
    for statement in ("SELECT * FROM vfs", "SELECT upper(value) AS v FROM vfs",
                      "WITH c AS (SELECT * FROM vfs) SELECT * FROM c",
                      "SELECT 1 AS one WHERE EXISTS (SELECT * FROM vfs)",
                      QUERY.format(name="vfs")):
        status = _refused(cursor, statement)
        assert status.sqlState == "42501", (statement, status.errorMessage)
        assert "viewfs://" in status.errorMessage, status.errorMessage
        assert SECRET not in status.errorMessage
    _still_served(server)
