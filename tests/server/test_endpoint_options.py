"""A client may give a data source or a function only the option keys it is listed for
(issue #52, dfsql.server.options): Spark hands a file source's options to Hadoop as its
configuration (``fs.defaultFS``, ``fs.viewfs.mounttable.*`` move a path under the root
anywhere), a file stream's ``cleanSource``/``sourceArchiveDir`` move the files it read,
``from_xml``'s ``rowValidationXSDPath`` opens a file.

Each attack is sent by an authenticated PLAIN user over PyHive, in the disguises Spark
accepts (case, back-quoted, double-quoted and unquoted keys, ``WITH`` vs ``OPTIONS``, a
CTE, a view, a subquery, a windowed query, ``EXECUTE IMMEDIATE '…'``, ``IDENTIFIER``),
and must come back 42501 with nothing read, written or moved outside the root (the
canary beside it keeps its content, which no reply carries), while the server goes on
serving another user. Legitimate options still run.

The generated test holds the judge to Spark's *analysed* plan of each statement (on the
test's own unguarded session, over harmless paths under a temporary root): refused
exactly when that plan carries an option key outside the source's or function's list.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dfsql.server.judge import Judge, Policy
from dfsql.server.options import FUNCTION_KEYS, SOURCE_KEYS
from dfsql.spark.parsed_plan import parse_plan, walk
from tests.server.clients import answers_select_1
from tests.server.judged import _connect_as, _fill, _refused

SECRET = "CANARY-52-OPTIONS"
XSD = """<?xml version="1.0"?>
<!DOCTYPE xs:schema [<!ENTITY leak SYSTEM "file://{outside}/secret.txt">]>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema">
  <xs:element name="r" type="xs:string" default="&leak;"/>
</xs:schema>
"""


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("options")
    root, out = base / "root", base / "outside"
    for d in (root / "t1", root / "mnt", root / "x", root / "csv", root / "json",
              root / "st", out):
        d.mkdir(parents=True)
    (root / "t1" / "a.txt").write_text("inside\n")
    (root / "st" / "s.txt").write_text("streamed\n")
    (out / "secret.txt").write_text(SECRET + "\n")
    (root / "evil.xsd").write_text(XSD.format(outside=out))
    (root / "csv" / "d.csv").write_text("key,value,event_time\nk,5,2026-01-01 00:00:10\n"
                                        "k,7,2026-01-01 00:01:30\nj,1,2026-01-01 00:00:20\n")
    (root / "json" / "d.json").write_text('[{"a": 1},\n {"a": 2}]\n')
    return {"root": root, "outside": out}


# ``server`` and ``cursor``: the judged endpoint's (tests/server/judged.py, through
# tests/server/conftest.py) over this module's ``places``


VIEWFS = ("'fs.default.name' 'viewfs://a/', 'fs.viewfs.mounttable.a.link.{root}/mnt' "
          "'file://{outside}'")
VIEWFS_EQ = ("'fs.defaultFS' = 'viewfs://a/', 'fs.viewfs.mounttable.a.link.{root}/x' = "
             "'file:///etc'")
#: (statement, the key's spelling the refusal must stand at, or None for "anywhere")
ATTACKS = [
    # item 1: data-source options are Hadoop's configuration
    ("CREATE TEMPORARY VIEW v1 USING text OPTIONS (path '{root}/mnt/secret.txt', "
     + VIEWFS + ")", "'fs.default.name'"),
    ("SELECT * FROM text.`{root}/x/passwd` WITH (" + VIEWFS_EQ + ")", "'fs.defaultFS'"),
    ("INSERT OVERWRITE DIRECTORY '{root}/m/victim' USING text OPTIONS (" + VIEWFS +
     ") SELECT 'x'", "'fs.default.name'"),
    ("INSERT OVERWRITE DIRECTORY '{root}/m/victim' USING text OPTIONS ('fs.defaultFS' "
     "'file:///') SELECT 'x'", "'fs.defaultFS'"),
    # disguises: case, quoting, no quotes, WITH vs OPTIONS
    ("CREATE TEMPORARY VIEW v1 USING text OPTIONS (path '{root}/t1', 'FS.DefaultFS' "
     "'file:///')", "'FS.DefaultFS'"),
    ("CREATE TEMPORARY VIEW v1 USING text OPTIONS (path '{root}/t1', `fs.defaultFS` "
     "'file:///')", "`fs.defaultFS`"),
    ("CREATE TEMPORARY VIEW v1 USING text OPTIONS (path '{root}/t1', \"fs.defaultFS\" "
     "'file:///')", "\"fs.defaultFS\""),
    ("CREATE TEMPORARY VIEW v1 USING text OPTIONS (path '{root}/t1', fs.defaultFS "
     "'file:///')", "fs.defaultFS"),
    ("CREATE TEMPORARY VIEW v1 USING TEXT OPTIONS (path '{root}/t1', 'fs.file.impl' "
     "'x.Y')", "'fs.file.impl'"),
    ("SELECT * FROM text.`{root}/t1` WITH (\"FS.DefaultFS\" = 'file:///')",
     "\"FS.DefaultFS\""),
    ("SELECT * FROM text.`{root}/t1` WITH (`spark.sql.files.maxPartitionBytes` = '1')",
     "`spark.sql.files.maxPartitionBytes`"),
    ("SELECT * FROM text.`{root}/t1` WITH ('hadoop.security.authentication' = 'simple')",
     None),
    ("SELECT * FROM scores WITH ('fs.defaultFS' = 'file:///')", "'fs.defaultFS'"),
    ("CREATE TEMPORARY VIEW IDENTIFIER('v1') USING text OPTIONS (path '{root}/t1', "
     "'fs.defaultFS' 'file:///')", "'fs.defaultFS'"),
    ("ALTER TABLE IDENTIFIER('scores') SET SERDEPROPERTIES ('fs.file.impl' = 'x.Y')",
     "'fs.file.impl'"),
    ("/* 'fs.defaultFS' */ SELECT * FROM text.`{root}/t1` -- 'fs.defaultFS'\n"
     "WITH ('fs.defaultFS' = 'file:///')", None),
    ("CREATE TABLE t_fs (value STRING) USING text OPTIONS ('fs.defaultFS' 'file:///') "
     "LOCATION '{root}/t1'", "'fs.defaultFS'"),
    ("CREATE TABLE t_fs USING parquet OPTIONS (mapreduce.input.fileinputformat.split."
     "minsize '1') AS SELECT 1 AS a", None),
    ("ALTER TABLE scores SET SERDEPROPERTIES ('fs.defaultFS' = 'file:///')", None),
    # inside a CTE, a view, a subquery, a windowed query, EXECUTE IMMEDIATE, IDENTIFIER
    ("WITH c AS (SELECT * FROM text.`{root}/x/passwd` WITH (" + VIEWFS_EQ + ")) "
     "SELECT * FROM c", "'fs.defaultFS'"),
    ("CREATE OR REPLACE TEMPORARY VIEW v2 AS SELECT * FROM text.`{root}/x/passwd` WITH ("
     + VIEWFS_EQ + ")", "'fs.defaultFS'"),
    ("SELECT * FROM (SELECT value FROM text.`{root}/x/passwd` WITH (" + VIEWFS_EQ +
     ")) s WHERE value IS NOT NULL", "'fs.defaultFS'"),
    ("SELECT key, COUNT(*) AS n, MAX(to_json(named_struct('k', key), map('fs.defaultFS', "
     "'x'))) AS j FROM scores GROUP BY key WINDOW GLOBAL", "'fs.defaultFS'"),
    ("EXECUTE IMMEDIATE 'SELECT * FROM text.`{root}/x/passwd` WITH (''fs.defaultFS'' = "
     "''viewfs://a/'')'", None),
    ("SELECT * FROM IDENTIFIER('text.`{root}/x/passwd`') WITH (" + VIEWFS_EQ + ")",
     "'fs.defaultFS'"),
    # item 2: a file stream's source moves what it read
    ("CREATE TABLE st_arch (value STRING) USING text OPTIONS ('cleanSource' 'archive', "
     "'sourceArchiveDir' '{outside}/arch') LOCATION '{root}/st'", "'cleanSource'"),
    ("SELECT * FROM STREAM scores WITH ('CLEANSOURCE' = 'archive', 'sourceArchiveDir' = "
     "'{outside}/arch')", "'CLEANSOURCE'"),
    ("CREATE OR REPLACE TEMPORARY VIEW st_v USING text OPTIONS (path '{root}/st', "
     "sourceArchiveDir '{outside}/arch', cleanSource 'archive')", "sourceArchiveDir"),
    ("CREATE TABLE st_arch2 (value STRING) USING text LOCATION '{root}/st' OPTIONS "
     "(`cleansource` 'delete')", "`cleansource`"),
    # item 3: a function's options name a file
    ("SELECT from_xml('<r>1</r>', 'a INT', map('rowValidationXSDPath', "
     "'{outside}/secret.txt'))", "'rowValidationXSDPath'"),
    ("SELECT from_xml('<r>1</r>', 'r STRING', map('rowValidationXSDPath', "
     "'{root}/evil.xsd'))", "'rowValidationXSDPath'"),
    ("SELECT FROM_XML('<r>1</r>', 'a INT', MAP('ROWVALIDATIONXSDPATH', "
     "'{outside}/secret.txt'))", "'ROWVALIDATIONXSDPATH'"),
    ("SELECT system.builtin.from_xml('<r>1</r>', 'a INT', map('mode', 'PERMISSIVE', "
     "'rowValidationXSDPath', '{outside}/secret.txt'))", "'rowValidationXSDPath'"),
    ("SELECT IDENTIFIER('from_xml')('<r>1</r>', 'a INT', map('rowValidationXSDPath', "
     "'{outside}/secret.txt'))", "'rowValidationXSDPath'"),
    ("SELECT schema_of_xml('<r>1</r>', map('rowValidationXSDPath', '{outside}/x.xsd'))",
     "'rowValidationXSDPath'"),
    ("SELECT from_xml('<r>1</r>', 'a INT', str_to_map('rowValidationXSDPath:{outside}/"
     "secret.txt'))", None),
    ("SELECT from_xml('<r>1</r>', 'a INT', map(concat('rowValidation', 'XSDPath'), "
     "'{outside}/secret.txt'))", None),
    ("SELECT from_xml('<r>1</r>', 'a INT', m)", None),  # m: a variable declared below
    ("EXECUTE IMMEDIATE 'SELECT from_xml(''<r>1</r>'', ''a INT'', map("
     "''rowValidationXSDPath'', ''{outside}/secret.txt''))'", None),
    ("SELECT from_json('{{}}', 'a INT', map('fs.defaultFS', 'x'))", "'fs.defaultFS'"),
    ("SELECT key, MAX(from_xml('<r>1</r>', 'a INT', map('rowValidationXSDPath', "
     "'{outside}/secret.txt')).a) AS m FROM scores GROUP BY key WINDOW GLOBAL", None),
]
#: (statement, rows): the options a client's data legitimately needs
ALLOWED = [
    ("SELECT * FROM csv_v ORDER BY key, value", [("j", 1, "2026-01-01 00:00:20"),
                                                  ("k", 5, "2026-01-01 00:00:10"),
                                                  ("k", 7, "2026-01-01 00:01:30")]),
    ("SELECT a FROM json.`{root}/json` WITH ('multiLine'='true') ORDER BY a",
     [(1,), (2,)]),
    ("SELECT a FROM json.`{root}/json` WITH ('MULTILINE' = 'true', `mode` = 'FAILFAST', "
     "recursiveFileLookup 'true') ORDER BY a", [(1,), (2,)]),
    ("SELECT from_json('{{\"a\": 1}}', 'a INT', map('mode','PERMISSIVE')).a AS a", [(1,)]),
    ("SELECT to_json(named_struct('a', 1), map('pretty', 'false')) AS j", [('{"a":1}',)]),
    ("SELECT from_xml('<r><a>2</a></r>', 'a INT', map('mode', 'PERMISSIVE')).a AS a",
     [(2,)]),
    ("SELECT 'fs.defaultFS' AS k, map('rowValidationXSDPath', 1) AS m", None),
    ("SELECT key, SUM(value) AS total FROM (SELECT key, value, CAST(event_time AS "
     "TIMESTAMP) AS event_time FROM csv_v) GROUP BY key WINDOW FIXED(1 MINUTE) ON "
     "event_time", [("j", 1), ("k", 5), ("k", 7)]),
]


def test_every_option_attack_is_refused_and_nothing_happens(server, cursor, places):
    cursor.execute(f"DECLARE OR REPLACE VARIABLE m MAP<STRING, STRING> DEFAULT "
                   f"map('rowValidationXSDPath', '{places['outside']}/secret.txt')")
    before = sorted(str(p) for p in places["outside"].rglob("*"))
    for template, at in ATTACKS:
        statement = _fill(template, places)
        status = _refused(cursor, statement)
        assert status.sqlState == "42501", (statement, status.errorMessage)
        assert SECRET not in status.errorMessage, statement
        assert "option" in status.errorMessage or "map(" in status.errorMessage or \
            "descriptor" in status.errorMessage, (statement, status.errorMessage)
        if at is not None:
            at = _fill(at, places)
            column = statement.index(at) + 1
            assert status.errorMessage.startswith(f"line 1, col {column}:"), \
                (statement, status.errorMessage)
            assert "dfsql serve --allow-any-path" in status.errorMessage
    assert sorted(str(p) for p in places["outside"].rglob("*")) == before, "outside moved"
    assert (places["outside"] / "secret.txt").read_text() == SECRET + "\n"
    assert (places["root"] / "st" / "s.txt").exists()
    assert not (places["root"] / "m").exists()
    for view in ("v1", "v2"):  # no view was made
        status = _refused(cursor, f"SELECT * FROM {view}")
        assert SECRET not in status.errorMessage
    answers_select_1(_connect_as(server, "walter", "pw2"))  # another user, served as before
    cursor.execute("SELECT 1 AS one")  # and the attacker's own session
    assert cursor.fetchall() == [(1,)]


def test_legitimate_options_still_work(cursor, places):
    cursor.execute(_fill("CREATE OR REPLACE TEMPORARY VIEW csv_v USING csv OPTIONS (path "
                         "'{root}/csv', header 'true', inferSchema 'true', "
                         "timestampFormat 'yyyy-MM-dd HH:mm:ss')", places))
    for template, rows in ALLOWED:
        cursor.execute(_fill(template, places))
        got = [tuple(r) for r in cursor.fetchall()]
        if rows is None:
            continue
        got = sorted(tuple(str(v) if hasattr(v, "year") else v for v in r[:len(rows[0])])
                     for r in got)
        assert got == rows, template


def test_the_lists_are_sparks_own_keys(spark):
    """Every key listed for a source is one Spark's option classes read (or a file
    source's, a stream's, a writer's): none is made up."""
    jvm = spark.sparkContext._jvm

    def spark_keys(cls: str) -> set[str]:
        keys = jvm.scala.jdk.CollectionConverters.SetHasAsJava(
            getattr(jvm, cls).getAllOptions()).asJava()
        return {str(k).lower() for k in keys}

    pkg = "org.apache.spark.sql."
    assert SOURCE_KEYS["csv"] >= spark_keys(pkg + "catalyst.csv.CSVOptions")
    assert SOURCE_KEYS["json"] >= spark_keys(pkg + "catalyst.json.JSONOptions")
    assert SOURCE_KEYS["text"] >= spark_keys(pkg + "execution.datasources.text.TextOptions")
    xml = spark_keys(pkg + "catalyst.xml.XmlOptions")
    assert FUNCTION_KEYS["from_xml"][1] == xml - {"rowvalidationxsdpath"}
    index = spark_keys(pkg + "execution.datasources.FileIndexOptions")
    for keys in SOURCE_KEYS.values():
        assert index - keys == {"pathglobfilter", "ignoredpathsegmentregex"}
        assert not keys & {"cleansource", "sourcearchivedir", "rowvalidationxsdpath"}


def test_with_jvm_functions_a_file_source_by_any_name_keeps_to_the_list(spark, places):
    """``--allow-jvm-functions`` (roots kept) lets a client name any data source: a file
    source spelt by its class is still held to the five's keys; JDBC's own are not
    judged (it runs code of its own, which no root binds)."""
    judge = Judge(Policy((str(places["root"]),), allow_code=True))
    session = spark.newSession()
    for cls in ("org.apache.spark.sql.execution.datasources.text.TextFileFormat",
                "org.apache.spark.sql.execution.datasources.v2.text.TextDataSourceV2",
                "binaryFile"):
        found = judge.refusal(session, _fill(
            f"CREATE TEMPORARY VIEW v USING {cls} OPTIONS (path '{{root}}/t1', "
            "'fs.defaultFS' 'viewfs://a/')", places))
        assert found is not None and "'fs.defaultFS'" in found.message, cls
    assert judge.refusal(session, "CREATE TEMPORARY VIEW j USING jdbc OPTIONS (url "
                                  "'jdbc:derby:memory:x', dbtable 't')") is None
    assert judge.refusal(session, _fill("CREATE TEMPORARY VIEW v USING text OPTIONS (path "
                                        "'{root}/t1', wholetext 'true')", places)) is None
    assert Judge(Policy(None, allow_code=False)).refusal(
        session, "SELECT * FROM scores WITH ('fs.defaultFS' = 'x')") is None


# --------------------------------------------------------------------------- generated

#: (key, a harmless value) a source or function may be given
GOOD = {
    "csv": [("header", "true"), ("inferSchema", "false"), ("sep", ","),
            ("mode", "PERMISSIVE"), ("nullValue", "")],
    "json": [("multiLine", "false"), ("mode", "PERMISSIVE"), ("allowComments", "true")],
    "text": [("wholetext", "false"), ("encoding", "UTF-8")],
    "parquet": [("mergeSchema", "false"), ("datetimeRebaseMode", "CORRECTED")],
    "files": [("recursiveFileLookup", "false"), ("ignoreCorruptFiles", "false"),
              ("maxFilesPerTrigger", "2"), ("timeZone", "UTC")],
    "from_json": [("mode", "PERMISSIVE"), ("allowComments", "true")],
    "from_csv": [("sep", ","), ("mode", "PERMISSIVE")],
    "from_xml": [("mode", "PERMISSIVE"), ("attributePrefix", "_")],
    "to_json": [("pretty", "false"), ("ignoreNullFields", "true")],
}
#: keys no source or function here may be given, with harmless values
BAD = [("fs.defaultFS", "file:///"), ("fs.file.impl.disable.cache", "true"),
       ("spark.sql.files.maxPartitionBytes", "1048576"), ("hadoop.tmp.dir", "{root}/tmp"),
       ("cleanSource", "off"), ("sourceArchiveDir", "{root}/arch"),
       ("rowValidationXSDPath", "{root}/gen/s.xsd"), ("pathGlobFilter", "*"),
       ("mapreduce.input.fileinputformat.split.minsize", "1"), ("header", "true"),
       ("wholetext", "false"), ("pretty", "false")]
SOURCES = ("csv", "json", "text", "parquet")
FUNCTIONS = {"from_json": "from_json('{{\"a\": 1}}', 'a INT', map({}))",
             "from_csv": "from_csv('1', 'a INT', map({}))",
             "from_xml": "from_xml('<r><a>1</a></r>', 'a INT', map({}))",
             "to_json": "to_json(named_struct('a', 1), map({}))"}


def _spelt(rng: random.Random, key: str, style: str) -> str:
    key = rng.choice([key, key.upper(), key.lower(), key[:1].upper() + key[1:]])
    if style == "map":
        return f"'{key}'"
    return rng.choice([f"'{key}'", f"`{key}`", f'"{key}"', key])


def _options(rng: random.Random, pool: list[tuple[str, str]], style: str, root: Path) -> str:
    picked = rng.sample(pool, rng.randrange(1, min(4, len(pool)) + 1))
    parts = []
    for key, value in picked:
        value = value.format(root=root)
        spelt = _spelt(rng, key, style)
        parts.append(f"{spelt}, '{value}'" if style == "map" else
                     f"{spelt} {rng.choice(['', '= '])}'{value}'")
    return ", ".join(parts)


def _generated(rng: random.Random, root: Path) -> tuple[str, str]:
    """A statement and what its options are held to (a source, or a function)."""
    kind = rng.randrange(4)
    if kind == 3:
        fn = rng.choice(list(FUNCTIONS))
        pool = GOOD[fn] + rng.sample(BAD, 2)
        return f"SELECT {FUNCTIONS[fn].format(_options(rng, pool, 'map', root))} AS v", fn
    fmt = rng.choice(SOURCES)
    pool = GOOD[fmt] + GOOD["files"] + rng.sample(BAD, 3)
    opts = _options(rng, pool, "sql", root)
    where = f"{root}/gen/{fmt}"
    if kind == 0:
        return f"SELECT * FROM {fmt}.`{where}` WITH ({opts})", fmt
    if kind == 1:
        return (f"CREATE OR REPLACE TEMPORARY VIEW gv USING {fmt} OPTIONS (path "
                f"'{where}', {opts})"), fmt
    return (f"INSERT OVERWRITE DIRECTORY '{root}/gen/out' USING {fmt} OPTIONS ({opts}) "
            "SELECT 'x' AS value"), fmt


def _analysed_keys(spark, text: str) -> set[str]:
    """The option keys Spark's analysed plan of ``text`` carries (a command analysed,
    not run): a relation's, a write's, a view's, an expression's options."""
    jss = spark._jsparkSession
    mode = spark.sparkContext._jvm.org.apache.spark.sql.execution.CommandExecutionMode
    analysed = jss.sessionState().executePlan(parse_plan(spark, text), mode.SKIP()).analyzed()
    keys = set()
    for node in walk(spark, analysed).nodes:
        for path, _ in node.values:
            owner, _, key = path.partition("[")
            if key and owner.rsplit(".", 1)[-1].lower() in ("options", "properties") and \
                    not owner.lower().startswith("table.properties"):
                keys.add(key[:-1].lower())
    return keys


@pytest.fixture(scope="module")
def gen_root(places) -> Path:
    root = places["root"] / "g"
    for fmt in SOURCES:
        (root / "gen" / fmt).mkdir(parents=True)
    (root / "gen" / "csv" / "a.csv").write_text("value\nx\n")
    (root / "gen" / "json" / "a.json").write_text('{"value": "x"}\n')
    (root / "gen" / "text" / "a.txt").write_text("x\n")
    (root / "gen" / "s.xsd").write_text('<?xml version="1.0"?><xs:schema xmlns:xs='
                                        '"http://www.w3.org/2001/XMLSchema"/>')
    return root


def test_generated_options_agree_with_sparks_analysed_plan(spark, gen_root):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"value": ["x"]}), gen_root / "gen" / "parquet" / "a.parquet")
    judge = Judge(Policy((str(gen_root),), allow_code=False))
    session = spark.newSession()
    rng = random.Random(52)
    refused = allowed = 0
    for _ in range(120):
        text, held_to = _generated(rng, gen_root)
        listed = SOURCE_KEYS[held_to] if held_to in SOURCE_KEYS else \
            FUNCTION_KEYS[held_to][1]
        try:
            keys = _analysed_keys(session, text)
        except Exception:  # noqa: BLE001 (Spark refuses it: nothing to judge)
            continue
        expected = bool(keys - listed)
        shaped = text if rng.random() < 0.7 or text.startswith(("CREATE", "INSERT")) else \
            f"WITH c AS ({text}) SELECT * FROM c"
        if rng.random() < 0.3:
            shaped = "EXECUTE IMMEDIATE '" + shaped.replace("'", "''") + "'"
        found = judge.refusal(session, shaped)
        assert (found is not None) == expected, (shaped, keys - listed, found)
        refused += expected
        allowed += not expected
    assert refused > 30 and allowed > 15, (refused, allowed)
