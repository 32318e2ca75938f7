"""An endpoint no authenticated user can escape: every statement is judged on the plan
Spark parses from it (dfsql.server.judge), not on its text.

The table below is what an attacker tried (issue #31): each statement is sent by an
authenticated PLAIN user over PyHive, and each must come back refused with SQLSTATE
42501 — no program run (the marker file is never made), nothing read outside the data
root (the secret never reaches the client), nothing written outside it — while the
server goes on answering. Positions are counted by hand from the statements' text.

The generated test builds random statements around the forbidden forms (comments,
nested comments, raw strings, escapes, back-quotes, IDENTIFIER, EXECUTE IMMEDIATE,
subqueries, globs, links, ``..``) and decoys that only spell them (in strings, comments
and names), and holds the judge to an independent oracle: Spark's *analysed* plan of the
same statement on an unguarded session (does it call a JVM method, run a script, read a
file outside the root?).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from dfsql.server import Server
from dfsql.server.auth import set_password
from dfsql.server.judge import Judge, Policy
from dfsql.server.paths import outside
from dfsql.spark.parsed_plan import walk
from tests.server.judged import CANARY, ENV, SECRET, _connect_as

#: (statement, where it is refused or None for "anywhere"); {root}, {outside} and
#: {marker} are filled in. Each one is a way in that Spark accepts.
ATTACKS = [
    # a program on the server
    ("FROM (SELECT 1 AS a) t MAP a USING 'touch {marker}' AS (o STRING)", "line 1, col 24"),
    ("FROM (SELECT 1 AS a) t REDUCE a USING 'touch {marker}' AS (o STRING)", "line 1, col 24"),
    ("SELECT TRANSFORM(r'\\') USING 'touch {marker}' AS (o) --')", "line 1, col 1"),
    ("SELECT TRANSFORM(1) -- \\\n'\nUSING 'touch {marker}' AS (o) --'", "line 1, col 1"),
    ("EXECUTE IMMEDIATE 'SELECT TRANSFORM(1) USING ''touch {marker}'' AS (o)'",
     "line 1, col 20"),
    ("EXECUTE IMMEDIATE v", "line 1, col 1"),  # v: a variable declared below
    ("SELECT key, COUNT(*) AS n FROM (SELECT TRANSFORM(key) USING 'touch {marker}' AS (key)"
     " FROM scores) GROUP BY key", "line 1, col 33"),
    # Java code
    ("SELECT reflect('java.lang.System', 'exit', 3)", "line 1, col 8"),
    ("SELECT `java_method`('java.lang.System', 'exit', 3)", "line 1, col 8"),
    ("SELECT system.builtin.try_reflect('java.lang.System', 'exit', 3)", "line 1, col 8"),
    ("SELECT IDENTIFIER('reflect')('java.lang.System', 'exit', 3)", "line 1, col 8"),
    ("SELECT IDENTIFIER(v)('java.lang.System', 'exit', 3)", "line 1, col 8"),
    ("SELECT key, MAX(reflect('java.lang.String', 'valueOf', value)) AS m FROM scores "
     "GROUP BY key WINDOW GLOBAL", "line 1, col 17"),
    ("CREATE TEMPORARY VIEW d USING jdbc OPTIONS (url 'jdbc:derby:memory:x;create=true', "
     "query 'SELECT 1', sessionInitStatement 'CREATE PROCEDURE x() LANGUAGE JAVA "
     "PARAMETER STYLE JAVA EXTERNAL NAME ''java.lang.System.exit''')", "line 1, col 31"),
    ("CREATE TEMPORARY FUNCTION IDENTIFIER('f') AS "
     "'org.apache.hadoop.hive.ql.udf.generic.GenericUDFReflect'", "line 1, col 1"),
    ("CREATE TEMPORARY FUNCTION f AS r'org.apache.hadoop.hive.ql.udf.generic."
     "GenericUDFReflect'", "line 1, col 1"),
    ("BEGIN\n  CREATE TEMPORARY FUNCTION f AS 'x.Y';\nEND", "line 2, col 3"),
    ("CREATE FUNCTION plus(x INT) RETURNS INT RETURN x + 1", "line 1, col 1"),
    ("ADD JAR {root}/t1/a.txt", "line 1, col 1"),
    ("ADD FILE /etc/hostname", "line 1, col 1"),
    ("ADD ARCHIVE /tmp/x.zip", "line 1, col 1"),
    ("SET spark.sql.legacy.setCommandRejectsSparkCoreConfs=false", "line 1, col 5"),
    ("SET spark.jars=/tmp/x.jar", "line 1, col 5"),
    ("SET spark.sql.catalog.evil=org.apache.spark.sql.execution.datasources.v2.jdbc."
     "JDBCTableCatalog", "line 1, col 5"),
    ("SET spark.sql.variable.substitute=true", "line 1, col 5"),
    ("RESET spark.sql.legacy.allowNonEmptyLocationInCTAS", "line 1, col 7"),
    ("SET `spark.jars` = /tmp/x.jar", "line 1, col 5"),
    ("SET dfsql.stream.native=reflect", "line 1, col 5"),  # substituted as ${…} later
    ("SET spark.hadoop.fs.s3a.secret.key", "line 1, col 5"),  # reading a secret
    # files outside the root
    ("SELECT * FROM `text`.`/etc/passwd`", "line 1, col 22"),
    ("SELECT * FROM `org.apache.spark.sql.execution.datasources.text.TextFileFormat`"
     ".`{outside}/secret.txt`", None),
    ("SELECT * FROM IDENTIFIER('text.`{outside}/secret.txt`')", None),
    ("EXECUTE IMMEDIATE 'SELECT * FROM text.`{outside}/secret.txt`'", None),
    ("CREATE TEMPORARY VIEW v1 USING text OPTIONS ('path' '{outside}/secret.txt')", None),
    ("CREATE TEMPORARY VIEW v1 USING text OPTIONS (`path` '{outside}/secret.txt')", None),
    ("CREATE TEMPORARY VIEW v1 USING text OPTIONS (path r'{outside}/secret.txt')", None),
    ("CREATE TEMPORARY VIEW v1 USING text OPTIONS (paths '[\"{outside}/secret.txt\"]')", None),
    ("SELECT * FROM text.`{root}/t1` WITH ('path' = '{outside}/secret.txt')", None),
    ("SELECT * FROM text.`{root}/{{t1,../outside}}/*.txt`", "line 1, col 20"),
    ("SELECT * FROM text.`{root}/link/secret.txt`", "line 1, col 20"),
    ("SELECT * FROM text.`{root}/l*/secret.txt`", "line 1, col 20"),
    ("SELECT * FROM text.`file:{root}/../outside/secret.txt`", "line 1, col 20"),
    ("SELECT * FROM text.`{root}/\\.\\./outside`", "line 1, col 20"),
    ("SELECT * FROM json.`hdfs://127.0.0.1:9/x`", "line 1, col 20"),
    ("CREATE TABLE t_out (value STRING) USING text LOCATION '{root}/\\.\\./outside'", None),
    ("CREATE DATABASE db_out LOCATION '{root}/\\.\\./db_out'", None),
    ("INSERT OVERWRITE DIRECTORY USING text OPTIONS ('path' '{outside}/dir') SELECT 'x'",
     None),
    ("INSERT OVERWRITE DIRECTORY '{outside}/dir2' USING text SELECT 'x'", None),
    ("LOAD DATA LOCAL INPATH '{outside}/secret.txt' INTO TABLE t", "line 1, col 24"),
    ("INSERT INTO parquet.`{outside}/w` SELECT 1 AS a", "line 1, col 21"),
    ("ALTER TABLE scores_t SET SERDEPROPERTIES ('path' = '{outside}')", None),
    ("ALTER TABLE scores_t SET LOCATION '{outside}'", None),
    ("REFRESH '{outside}/secret.txt'", None),
    ("SELECT key, COUNT(*) AS n FROM (SELECT value AS key, current_timestamp() AS ts FROM "
     "text.`{outside}/secret.txt`) GROUP BY key WINDOW GLOBAL", None),
    ("CREATE STREAMING QUERY q_out INTO DIRECTORY '{outside}/panes' AS SELECT key, "
     "COUNT(*) AS n FROM scores GROUP BY key WINDOW GLOBAL", "line 1, col 45"),
    # a path with an escaped quote: at its own quote (dfsql's token), not at line 1 col 1
    ("CREATE STREAMING QUERY q_esc CHECKPOINT '{outside}/it\\'s' AS SELECT key, "
     "COUNT(*) AS n FROM scores GROUP BY key WINDOW GLOBAL", "line 1, col 41"),
    # a continuous query's query, judged as it was parsed with the statement
    ("CREATE STREAMING QUERY q_code AS SELECT key, MAX(reflect('java.lang.String', "
     "'valueOf', value)) AS m FROM scores GROUP BY key WINDOW GLOBAL", "line 1, col 50"),
    ("CREATE STREAMING QUERY q_sub AS SELECT key, COUNT(*) AS n FROM (SELECT value AS "
     "key, current_timestamp() AS ts FROM text.`{outside}/secret.txt`) GROUP BY key "
     "WINDOW GLOBAL", None),
    # a continuous query's history, judged as Spark will read it, where it was written
    ("CREATE STREAMING QUERY q_bf BACKFILL FROM text.`{outside}/secret.txt` AS SELECT key, "
     "COUNT(*) AS n FROM scores GROUP BY key WINDOW GLOBAL", "line 1, col 48"),
    ("CREATE STREAMING QUERY q_bf2 BACKFILL FROM (SELECT reflect('java.lang.String', "
     "'valueOf', 1) AS key FROM scores) AS SELECT key, COUNT(*) AS n FROM scores GROUP BY "
     "key WINDOW GLOBAL", "line 1, col 52"),
    # a changed query is judged as a created one, where it was written
    ("ALTER STREAMING QUERY q_alt AS SELECT key, MAX(reflect('java.lang.String', "
     "'valueOf', value)) AS m FROM scores GROUP BY key WINDOW GLOBAL", "line 1, col 48"),
    ("ALTER STREAMING QUERY q_alt AS SELECT key, COUNT(*) AS n FROM (SELECT value AS "
     "key, current_timestamp() AS ts FROM text.`{outside}/secret.txt`) GROUP BY key "
     "WINDOW GLOBAL", None),
    # EXPLAIN FIRINGS FOR STREAMING QUERY's WHERE, as Spark reads a predicate
    ("EXPLAIN FIRINGS FOR STREAMING QUERY q_x WHERE java_method('java.lang.System', "
     "'getenv', 'HOME') IS NOT NULL", "line 1, col 47"),
]
#: statements that spell a forbidden form but do nothing forbidden: (statement, rows)
ALLOWED = [
    ("SELECT 'reflect(' AS s", [("reflect(",)]),
    ("SELECT 'x' AS reflect_x -- reflect('java.lang.System','exit',3)", [("x",)]),
    ("SELECT transform(array(1, 2), x -> x + 1) AS t", [("[2,3]",)]),
    ("SELECT 'TRANSFORM(a) USING ''cat''' AS s", [("TRANSFORM(a) USING 'cat'",)]),
    ("SELECT * FROM text.`{root}/t1/a.txt`", [("inside",)]),
    ("SELECT * FROM text.`{root}/{{t1,t9}}/*.txt`", [("inside",)]),
    ("SELECT * FROM IDENTIFIER('text.`{root}/t1`')", [("inside",)]),
    ("EXECUTE IMMEDIATE 'SELECT ''reflect('' AS s'", [("reflect(",)]),
    ("SET spark.sql.shuffle.partitions=3", [("spark.sql.shuffle.partitions", "3")]),
    ("SET TIME ZONE 'UTC'", [("spark.sql.session.timeZone", "UTC")]),
    ("SET dfsql.replay.aggregateKernels=false", [("dfsql.replay.aggregateKernels", "false")]),
    ("SET spark.sql.legacy.timeParserPolicy", [("spark.sql.legacy.timeParserPolicy",)]),
    ("SELECT key, SUM(value) AS total FROM scores GROUP BY key WINDOW GLOBAL",
     [("k", 51)]),  # the paper's one key and total (then the pane's columns)
]


def _fill(text: str, places: dict[str, Path]) -> str:
    return text.format(root=places["root"], outside=places["outside"],
                       marker=places["marker"])


def test_every_attack_is_refused_and_nothing_happens(server, cursor, places):
    from pyhive.exc import OperationalError

    cursor.execute("DECLARE OR REPLACE VARIABLE v STRING DEFAULT "
                   f"'SELECT TRANSFORM(1) USING ''touch {places['marker']}'' AS (o)'")
    before = sorted(p.name for p in places["outside"].iterdir())
    for template, where in ATTACKS:
        statement = _fill(template, places)
        with pytest.raises(OperationalError) as info:
            cursor.execute(statement)
            cursor.fetchall()
        status = info.value.args[0].status
        assert status.sqlState == "42501", (statement, status.errorMessage)
        if where is not None:
            assert status.errorMessage.startswith(where + ":"), (statement,
                                                                 status.errorMessage)
        assert SECRET not in status.errorMessage
    assert not places["marker"].exists(), "a program ran"
    assert sorted(p.name for p in places["outside"].iterdir()) == before, "written outside"
    assert not (places["root"].parent / "db_out").exists()
    cursor.execute("SHOW DATABASES")
    assert "db_out" not in {r[0] for r in cursor.fetchall()}
    cursor.execute("SELECT 1 AS one")  # the server, and the session, go on
    assert cursor.fetchall() == [(1,)]


def test_a_continuous_querys_path_is_placed_at_its_own_quote(cursor, places):
    """CHECKPOINT's path also written inside INTO DIRECTORY's: the refusal stands at
    CHECKPOINT's quoted path (its token), not where the text first spells it."""
    from pyhive.exc import OperationalError

    statement = _fill("CREATE STREAMING QUERY q_ck INTO DIRECTORY '{root}/panes' "
                      "CHECKPOINT '/panes' AS SELECT key, COUNT(*) AS n FROM scores "
                      "GROUP BY key WINDOW GLOBAL", places)
    with pytest.raises(OperationalError) as info:
        cursor.execute(statement)
    status = info.value.args[0].status
    assert status.sqlState == "42501", status.errorMessage
    column = statement.index("CHECKPOINT '/panes'") + len("CHECKPOINT ") + 1
    assert status.errorMessage.startswith(f"line 1, col {column}:"), status.errorMessage


def test_a_refusal_is_placed_at_a_token_never_in_a_string_or_comment():
    """A refusal in a text dfsql built is placed in the client's statement where the
    refused fragment starts a token: a string or a comment that spells it is skipped."""
    from dfsql.language import parse_any
    from dfsql.server.judge_text import placed as _placed

    text = "SELECT 'reflect(1)' AS s /* reflect(1) */, reflect(1) AS r -- reflect(1)"
    assert _placed(parse_any(text), "reflect(1)") == text.index(", reflect(1)") + 2
    assert _placed(parse_any("SELECT 'reflect(1)' AS s"), "reflect(1)") == 0


def test_what_only_spells_a_forbidden_form_runs(cursor, places):
    for template, rows in ALLOWED:
        cursor.execute(_fill(template, places))
        got = sorted(tuple(r[:len(rows[0])]) for r in cursor.fetchall())
        assert got == rows, template


def test_open_session_settings_follow_the_same_rule(server, places):
    from pyhive import hive

    with pytest.raises(Exception, match="spark.sql.legacy"):
        hive.connect(host="127.0.0.1", port=server.port, auth="CUSTOM", username="mallory",
                     password="pw", configuration={
                         "set:hiveconf:spark.sql.legacy.setCommandRejectsSparkCoreConfs":
                         "false"})
    conn = hive.connect(host="127.0.0.1", port=server.port, auth="CUSTOM",
                        username="mallory", password="pw",
                        configuration={"set:hiveconf:spark.sql.shuffle.partitions": "5"})
    cur = conn.cursor()
    cur.execute("SET spark.sql.shuffle.partitions")
    assert cur.fetchall() == [("spark.sql.shuffle.partitions", "5")]
    conn.close()


@pytest.mark.parametrize("path, why", [
    ("{root}/t1/a.txt", None),
    ("file:{root}/t1", None),
    ("file://{root}/t1", None),
    ("t1/a.txt", None),  # relative: the working directory's (here the root)
    ("{root}/{{t1,t9}}/*.txt", None),
    ("{root}/{{t1,{{t2,t3}}}}", None),
    ("{root}/t1/../t1", None),
    ("{root}/../outside", "outside"),
    ("{root}/t1/../../outside/secret.txt", "outside"),
    ("{root}/*/../../outside", "outside"),  # Hadoop collapses .. before it globs
    ("{root}/{{t1,../outside}}", "outside"),
    ("{root}/{{t1,{{t2,../../x}}}}", "outside"),
    ("{root}/link/secret.txt", "outside (through a symbolic link)"),
    ("{root}/l*/secret.txt", "outside (a name the glob matches is a link out)"),
    ("{root}/\\.\\./outside", "outside"),  # Hadoop's glob unescapes: ..
    ("{root}/\\t1/a.txt", None),
    ("s3a://bucket/x", "another file system than this server's"),
    ("hdfs:///{root}", "another file system than this server's"),
    ("../outside", "outside"),
    ("{root}/" + "{{a,b}}" * 9, "a brace glob with too many alternatives"),
])
def test_where_a_path_can_reach(places, path, why):
    root = str(places["root"])
    assert outside(path.format(root=root), [root], cwd=root) == why


# --------------------------------------------------------------------------- generated

#: JVM calls as Spark accepts them: the oracle decides whether each one is live
CALLS = ["reflect", "REFLECT", "`reflect`", "java_method", "try_reflect",
         "system.builtin.reflect", "builtin.java_method", "IDENTIFIER('reflect')",
         "IDENTIFIER('system.builtin.try_reflect')", "IDENTIFIER('`java_method`')"]
FORMATS = ["text", "`text`", "TEXT", "csv", "json"]
NOISE = ["/* c */", "/* a /* nested */ b */", "-- reflect('a', 'b')\n",
         "/* TRANSFORM(a) USING 'cat' */", "--\n", "\t", "\n  "]


def _path(rng: random.Random, places: dict[str, Path]) -> str:
    root, out = places["root"], places["outside"]
    return rng.choice([
        f"{root}/t1/a.txt", f"{root}/t1", f"{root}//t1/./a.txt", f"file:{root}/t1/a.txt",
        f"{out}/secret.txt", f"{root}/../outside/secret.txt", f"{root}/link/secret.txt",
        f"{root}/t1/../../outside", f"{root}/{{t1,../outside}}/*.txt",
        f"{root}/{{t1,link}}/*", f"file://{out}/secret.txt", f"{root}/*/secret.txt",
        f"{root}/t1/*.txt", f"{root}/t1/\\.\\./\\.\\./outside/s*.txt",
        f"{root}/\\t1/a.txt"])


def _core(rng: random.Random, places: dict[str, Path]) -> str:
    """One query: a JVM call, a script, a file read, or a decoy spelling one."""
    kind = rng.randrange(6)
    if kind == 0:
        return f"SELECT {rng.choice(CALLS)}('java.lang.String', 'valueOf', 1) AS v"
    if kind == 1:
        word = rng.choice(["TRANSFORM", "transform", "Transform"])
        return f"SELECT {word}(a) USING 'cat' AS (b) FROM (SELECT 'x' AS a) s"
    if kind == 2:
        return f"SELECT * FROM {rng.choice(FORMATS)}.`{_path(rng, places)}`"
    if kind == 3:
        return f"SELECT * FROM IDENTIFIER('{rng.choice(FORMATS).strip('`')}.`" \
               f"{_path(rng, places)}`')"
    if kind == 4:  # decoys: the forbidden forms as strings, names and comments
        return rng.choice([
            "SELECT 'reflect(''java.lang.System'', ''exit'', 1)' AS s",
            "SELECT r'TRANSFORM(a) USING ''cat''' AS s",
            "SELECT 1 AS reflect /* reflect('a', 'b') */",
            f"SELECT 'text.`{places['outside']}/secret.txt`' AS p",
            "SELECT transform(array(1), x -> x) AS t"])
    return f"SELECT * FROM csv.`{places['root']}/t1/a.txt` -- text.`/etc/passwd`"


def _noisy(rng: random.Random, query: str) -> str:
    """The query with comments and white space between some of its words."""
    words = query.split(" ")
    for _ in range(rng.randrange(3)):
        i = rng.randrange(1, len(words))
        if not any(w.count("'") % 2 or w.count("`") % 2 for w in words[:i]):
            words.insert(i, rng.choice(NOISE))  # only where no quote is open
    return " ".join(words)


def _shaped(rng: random.Random, query: str) -> str:
    """The query somewhere inside a larger one."""
    shape = rng.randrange(4)
    if shape == 0:
        return query
    if shape == 1:
        return f"WITH c AS ({query}\n) SELECT * FROM c"
    if shape == 2:
        return f"SELECT * FROM ({query}\n) AS sub"
    return f"SELECT * FROM (SELECT 1 AS one) x WHERE EXISTS ({query}\n)"


def _oracle(spark, text: str, root: Path) -> bool:
    """Does Spark, analysing ``text`` on an unguarded session, call a JVM method, run a
    script, or read a file outside ``root``? (Nothing runs: these are all queries. It is
    asked of the query before it is placed in a larger one, whose subqueries'
    files ``inputFiles`` would not list.)"""
    df = spark.sql(text)
    names = {n.name for n in walk(spark, df._jdf.queryExecution().analyzed()).nodes}
    if names & {"CallMethodViaReflection", "ScriptTransformation"}:
        return True
    real = os.path.realpath(root) + os.sep
    return any(not os.path.realpath(f.removeprefix("file:")).startswith(real)
               for f in df.inputFiles())


def test_generated_attacks_and_decoys_agree_with_sparks_analysis(spark, places):
    judge = Judge(Policy((str(places["root"]),), allow_code=False))
    session = spark.newSession()
    rng = random.Random(31)
    live = decoys = 0
    for _ in range(160):
        query = _noisy(rng, _core(rng, places))
        try:
            expected = _oracle(session, query, places["root"])
        except Exception:  # noqa: BLE001 (Spark refuses it: nothing to judge)
            continue
        text = _shaped(rng, query)
        if rng.random() < 0.3:  # the same statement through EXECUTE IMMEDIATE
            text = "EXECUTE IMMEDIATE '" + text.replace("'", "''") + "'"
        found = judge.refusal(session, text)
        assert (found is not None) == expected, (text, found)
        live += expected
        decoys += not expected
    assert live > 40 and decoys > 25, (live, decoys)  # both kinds were tried


# --------------------------------------------------------------------------- ${…}

#: Spark's variable substitution would put the server's environment, JVM properties and
#: settings in these; a client's session reads each as the text it is (issue #52)
SUBSTITUTED = ["${env:DFSQL_TEST_CANARY}", "${system:user.dir}", "${system:user.name}",
               "${spark.app.name}", "${hiveconf:spark.app.name}", "${sparkconf:spark.master}",
               "${env:HOME}", "${x}", "$${env:DFSQL_TEST_CANARY}"]


def _rows(cursor, statement: str) -> list[tuple]:
    cursor.execute(statement)
    return [tuple(r) for r in cursor.fetchall()]


def _error(cursor, statement: str) -> str:
    from pyhive.exc import OperationalError

    with pytest.raises(OperationalError) as info:
        cursor.execute(statement)
    return info.value.args[0].status.errorMessage


def _error_state(cursor, statement: str) -> str:
    from pyhive.exc import OperationalError

    with pytest.raises(OperationalError) as info:
        cursor.execute(statement)
    return info.value.args[0].status.sqlState


def _script(cursor, statement: str) -> str:
    """A compound statement's rows, or its error's message (either may hold a leak)."""
    from pyhive.exc import OperationalError

    try:
        return repr(_rows(cursor, statement))
    except OperationalError as e:
        return e.args[0].status.errorMessage




def test_the_canary_is_in_the_servers_environment(spark):
    """Else the tests below prove nothing: the JVM has it, and the operator's own
    session (Python's) substitutes it, as Spark does."""
    assert spark.sparkContext._jvm.java.lang.System.getenv("DFSQL_TEST_CANARY") == CANARY
    assert spark.sql(f"SELECT '{ENV}'").collect()[0][0] == CANARY


def test_a_clients_dollar_braces_are_text(cursor):
    quoted = ", ".join(f"'{t}' AS c{i}" for i, t in enumerate(SUBSTITUTED))
    assert _rows(cursor, f"SELECT {quoted}") == [tuple(SUBSTITUTED)]
    assert _rows(cursor, "EXECUTE IMMEDIATE 'SELECT ''" + ENV + "'' AS c'") == [(ENV,)]
    assert _rows(cursor, "EXECUTE IMMEDIATE 'EXECUTE IMMEDIATE ''SELECT ''''${system:"
                         "user.dir}'''' AS c'''") == [("${system:user.dir}",)]
    windowed = _rows(cursor, f"SELECT key, SUM(value) AS total, '{ENV}' AS c FROM scores "
                             "GROUP BY key WINDOW GLOBAL")
    assert windowed and {r[2] for r in windowed} == {ENV}
    cursor.execute(f"CREATE OR REPLACE TEMP VIEW subst_v AS SELECT '{ENV}' AS x, "
                   "'${system:user.dir}' AS y")
    assert _rows(cursor, "SELECT * FROM subst_v") == [(ENV, "${system:user.dir}")]
    assert _rows(cursor, "WITH c AS (SELECT '${env:HOME}' AS h) SELECT h FROM c") == \
        [("${env:HOME}",)]
    assert _rows(cursor, "SELECT /* ${env:HOME} */ '${spark.app.name}' -- ${x}\n AS a") == \
        [("${spark.app.name}",)]


def test_no_error_message_carries_a_substitution(cursor):
    """A name or a path the server's environment would have filled in: the error
    (Spark's, or the judge's refusal) names it as written."""
    for statement in (f"SELECT * FROM IDENTIFIER('{ENV}')", f"SELECT * FROM `{ENV}`",
                      f"SELECT * FROM parquet.`/{ENV}/x`",
                      "SELECT * FROM parquet.`/tmp/${system:user.name}`",
                      "SELECT ${env:DFSQL_TEST_CANARY} AS c"):
        message = _error(cursor, statement)
        assert CANARY not in message and os.getcwd() not in message, (statement, message)
        if "parquet" in statement:  # the judge's refusal names the path as written
            assert "${" in message, message


def test_reset_and_settings_do_not_turn_substitution_back_on(server, cursor):
    cursor.execute("RESET")
    assert _rows(cursor, f"SELECT '{ENV}' AS c") == [(ENV,)]
    script = _script(cursor, "BEGIN\n  RESET;\n  EXECUTE IMMEDIATE 'SELECT ''" + ENV +
                     "'' AS c';\nEND")
    assert CANARY not in script, script
    for statement in ("SET spark.sql.variable.substitute=true",
                      "SET spark.sql.variable.substitute = TRUE",
                      "SET `spark.sql.variable.substitute`=true",
                      "RESET spark.sql.variable.substitute",
                      "EXECUTE IMMEDIATE 'SET spark.sql.variable.substitute=true'",
                      "/* x */ SET spark.sql.variable.substitute=true"):
        assert "42501" in _error_state(cursor, statement), statement
        assert _rows(cursor, f"SELECT '{ENV}' AS c") == [(ENV,)], statement
    with pytest.raises(Exception, match="spark.sql.variable.substitute"):
        _connect_as(server, "mallory", "pw", configuration={
            "set:hiveconf:spark.sql.variable.substitute": "true"})
    conn = _connect_as(server, "walter", "pw2")  # another user, served as before
    try:
        assert _rows(conn.cursor(), f"SELECT '{ENV}' AS c, 1 AS one") == [(ENV, 1)]
    finally:
        conn.close()


def test_over_http_dollar_braces_are_text(spark, places, tmp_path):
    from pyhive import hive

    pw = tmp_path / "users"
    set_password(pw, "mallory", "pw")
    srv = Server(spark, port=0, auth="PLAIN", password_file=str(pw), transport_mode="http",
                 data_roots=[str(places["root"])]).start()
    try:
        conn = hive.connect(host="127.0.0.1", port=srv.port, scheme="http",
                            username="mallory", password="pw", auth="BASIC")
        try:
            assert _rows(conn.cursor(), f"SELECT '{ENV}' AS c") == [(ENV,)]
        finally:
            conn.close()
    finally:
        srv.stop()
