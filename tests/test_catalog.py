"""A persistent catalog (dfsql.warehouse): tables made in one process are there in the
next and in every other process on the same warehouse, with their schema, format and
partitions; DROP TABLE deletes them for all; a session dfsql did not create is left as
it is. Each "process" is a real ``dfsql -e`` run (or a Python script) on the warehouse.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dfsql
from dfsql.errors import DfsqlError
from dfsql.warehouse import DEFINITION, VIEWS


def _dfsql(warehouse: Path | str, *statements: str, ok: bool = True) -> str:
    """Run ``dfsql --warehouse W -e s1 -e s2 ...`` in a new process; its output."""
    args = [sys.executable, "-m", "dfsql.cli", "--warehouse", str(warehouse)]
    for s in statements:
        args += ["-e", s]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "DFSQL_WAREHOUSE": "/nonexistent/not-this-one"})
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout + proc.stderr


def _cells(out: str) -> list[list[str]]:
    """The data rows of the ASCII tables in ``out``."""
    rows = [ln for ln in out.splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in rows]


def test_tables_outlive_the_process_and_are_shared(spark, tmp_path):
    """Tables made in one process are in the next, and a DROP in one is a DROP for all;
    ``dfsql serve`` (here in this process, on the test session) and a shell on the same
    warehouse, running side by side, each see the other's tables (Derby, Hive's embedded
    metastore, would let only one of them open the catalog). The served check rides on
    the second shell of the flow (one JVM start fewer than a shell of its own)."""
    from pyhive import hive
    from pyhive.exc import OperationalError

    from dfsql.server import Server

    wh = Path(os.environ["DFSQL_WAREHOUSE"])  # the test session's own warehouse
    assert spark.conf.get("spark.sql.warehouse.dir").rstrip("/").endswith(wh.name)
    # process 1 makes a table (CTAS: parquet), a database with a CSV table (whose schema
    # is not in its files) and a partitioned table
    _dfsql(wh, "CREATE TABLE cat_t AS SELECT 1 AS a, 'x' AS b",
           "CREATE DATABASE cat_db",
           "CREATE TABLE cat_db.c (a INT, b STRING) USING csv",
           "INSERT INTO cat_db.c VALUES (1, 'one'), (2, 'two')",
           "CREATE TABLE cat_p USING parquet PARTITIONED BY (k) "
           "AS SELECT id AS v, id % 2 AS k FROM range(4)",
           "CREATE TABLE cat_again AS SELECT 1 AS a",
           "CREATE VIEW cat_wv AS SELECT b, COUNT(*) AS n FROM cat_t GROUP BY b WINDOW GLOBAL")
    assert (wh / "cat_t" / DEFINITION).is_file()
    # a persistent windowed view made there is read here as its query (one GLOBAL pane of
    # a batch input: ON_TIME, the last, no emit time); dropped here, its definition goes
    assert [tuple(r) for r in dfsql.sql("SELECT * FROM cat_wv", spark).collect()] == [
        ("x", 1, None, None, 0, "ON_TIME", True, None, False)]
    dfsql.sql("DROP VIEW cat_wv", spark)
    assert not (wh / VIEWS / "default.cat_wv.sql").exists()
    # this process (its session started before they existed) sees them at its next statement
    assert [tuple(r) for r in dfsql.sql("SELECT * FROM cat_t", spark).collect()] == [(1, "x")]
    assert [tuple(r) for r in dfsql.sql("SELECT * FROM cat_db.c ORDER BY a", spark).collect()] \
        == [(1, "one"), (2, "two")]
    # 0 + 1 + 2 + 3, in partitions k = 0 and k = 1
    assert tuple(dfsql.sql("SELECT SUM(v), COUNT(DISTINCT k) FROM cat_p", spark).first()) \
        == (6, 2)
    # the case: a table made in one process, the same CREATE TABLE in the next —
    # "already exists" (it is the same table), not LOCATION_ALREADY_EXISTS
    with pytest.raises(DfsqlError, match="TABLE_OR_VIEW_ALREADY_EXISTS") as info:
        dfsql.sql("CREATE TABLE cat_again AS SELECT 1 AS a", spark)
    assert "LOCATION_ALREADY_EXISTS" not in str(info.value)
    # a table made here is in the next process; a DROP TABLE there deletes it here too;
    # the first table, dropped and made again after a restart (no LOCATION_ALREADY_EXISTS);
    # IF NOT EXISTS keeps a table another process made
    # a DROP TABLE here: gone for the next process, files and all (its last statement,
    # which fails)
    dfsql.sql("CREATE TABLE cat_here AS SELECT 'made here' AS s", spark)
    dfsql.sql("CREATE TABLE cat_gone AS SELECT 1 AS a", spark)
    dfsql.sql("DROP TABLE cat_gone", spark)
    assert not (wh / "cat_gone").exists()
    # the endpoint, serving while the next shell runs: a table made through it is in
    # the shell, and one the shell makes is in the endpoint
    server = Server(spark, port=0, auth="NONE").start()
    try:
        conn = hive.connect(host="127.0.0.1", port=server.port, username="analyst")
        cur = conn.cursor()
        cur.execute("CREATE TABLE cat_served AS SELECT 7 AS n")
        out = _dfsql(wh, "SELECT * FROM cat_here", "SELECT * FROM cat_db.c ORDER BY a",
                     "DROP TABLE cat_p", "DROP TABLE cat_t",
                     "CREATE TABLE cat_t AS SELECT 2 AS a",
                     "CREATE TABLE IF NOT EXISTS cat_again AS SELECT 5 AS a",
                     "INSERT INTO cat_again VALUES (3)", "SELECT SUM(a) AS s FROM cat_again",
                     "SELECT n FROM cat_served", "CREATE TABLE cat_shell AS SELECT 8 AS n",
                     "SELECT * FROM cat_gone", ok=False)
        cur.execute("SELECT n FROM cat_shell")
        assert cur.fetchall() == [(8,)]
        cur.execute("DROP TABLE cat_served")
        # the shell's table is the operator's: an admin's to change, not a client's
        # (docs/guides/endpoint.md, users and what is theirs)
        with pytest.raises(OperationalError, match="was not created by a client"):
            cur.execute("DROP TABLE cat_shell")
        conn.close()
    finally:
        server.stop()
    dfsql.sql("DROP TABLE cat_shell", spark)
    assert not (wh / "cat_served").exists() and not (wh / "cat_shell").exists()
    assert _cells(out) == [["s"], ["made here"], ["a", "b"], ["1", "one"], ["2", "two"],
                           ["s"], ["4"], ["n"], ["7"]]
    assert "TABLE_OR_VIEW_NOT_FOUND" in out
    assert not (wh / "cat_p").exists()
    assert [tuple(r) for r in dfsql.sql("SELECT * FROM cat_t", spark).collect()] == [(2,)]
    with pytest.raises(DfsqlError, match="TABLE_OR_VIEW_NOT_FOUND"):
        dfsql.sql("SELECT * FROM cat_p", spark)
    dfsql.sql("DROP TABLE cat_here", spark)
    dfsql.sql("DROP DATABASE cat_db CASCADE", spark)
    dfsql.sql("DROP TABLE cat_t", spark)
    dfsql.sql("DROP TABLE cat_again", spark)
    assert not (wh / "cat_again").exists()


def test_a_session_dfsql_did_not_create_keeps_its_own_catalog(spark, tmp_path):
    """dfsql.session() returns an active session unchanged: its catalog is not filled from
    a warehouse (here the test session's, holding a table dfsql made), and its statements
    write no definitions."""
    wh = tmp_path / "wh"
    spark_wh = Path(os.environ["DFSQL_WAREHOUSE"])
    dfsql.sql("CREATE TABLE cat_theirs AS SELECT 1 AS a", spark)
    assert (spark_wh / "cat_theirs" / DEFINITION).is_file()
    shutil.copytree(spark_wh / "cat_theirs", wh / "cat_theirs")
    dfsql.sql("DROP TABLE cat_theirs", spark)
    script = f"""
from pyspark.sql import SparkSession
import dfsql
own = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
       .config("spark.sql.warehouse.dir", {str(wh)!r}).getOrCreate())
assert dfsql.session() is own
print("tables", [t.name for t in own.catalog.listTables()])
dfsql.sql("CREATE TABLE mine AS SELECT 2 AS b", own)
import os
print("definition", os.path.exists({str(wh / 'mine' / DEFINITION)!r}))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "tables []" in proc.stdout
    assert "definition False" in proc.stdout


def test_sessions_of_one_process_sync_one_at_a_time(tmp_path, monkeypatch):
    """The endpoint's sessions are threads sharing the process's catalog. Two tables both
    sessions had seen are gone from the warehouse (dropped by a third); both sessions sync
    at once, and forgetting a table takes a while (a JVM call, here a 0.3 s sleep). Unlocked,
    both list the two as dropped and one forgets a table the other already did: the KeyError
    dbt got as ``PosixPath('…/paper_watermarks')`` when its two threads dropped two seeds."""
    import threading
    import time

    from dfsql.warehouse import Catalog, _Seen

    def slow_exists(self, db: str, table: str) -> bool:
        time.sleep(0.3)
        return False  # gone from Spark's catalog too: nothing else to undo

    monkeypatch.setattr(Catalog, "_exists", slow_exists)
    cat = Catalog(spark=None, warehouse=tmp_path)  # type: ignore[arg-type]  # no Spark call
    for name in ("scores", "paper_watermarks"):
        cat.seen[tmp_path / "analytics.db" / name] = _Seen("analytics", name, 1, 1)
    start, errors = threading.Barrier(2), []

    def session() -> None:
        start.wait()
        try:
            cat.sync()
        except Exception as e:  # noqa: BLE001 - what the endpoint would have sent
            errors.append(e)

    threads = [threading.Thread(target=session) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert errors == [] and cat.seen == {}


def test_external_tables_outlive_the_process(spark, tmp_path):
    """``CREATE TABLE … LOCATION`` (an external table: its files are the user's, outside
    the warehouse), with columns or as CTAS, is there in the next process as it is in
    this one (docs/guides/shell.md "Tables that outlive the process"); DROP TABLE forgets
    it for every process but leaves its files."""
    wh = Path(os.environ["DFSQL_WAREHOUSE"])
    cols, ctas = tmp_path / "ext_cols", tmp_path / "ext_ctas"
    _dfsql(wh, f"CREATE TABLE ext_cols (a INT, b STRING) USING csv LOCATION '{cols}'",
           "INSERT INTO ext_cols VALUES (1, 'one'), (2, 'two')",
           f"CREATE TABLE ext_ctas USING parquet PARTITIONED BY (k) LOCATION '{ctas}' "
           "AS SELECT id AS v, id % 2 AS k FROM range(4)")
    assert not (wh / "ext_cols").exists()  # not in the warehouse: the user's directory
    # this process, its session started before they were made, at its next statement
    assert [tuple(r) for r in dfsql.sql("SELECT * FROM ext_cols ORDER BY a", spark)
            .collect()] == [(1, "one"), (2, "two")]
    dfsql.sql("DROP TABLE ext_cols", spark)
    assert sorted(p.suffix for p in cols.iterdir() if not p.name.startswith((".", "_"))) \
        == [".csv", ".csv"]  # an external table's files are not the catalog's to delete
    # a new process: the CTAS table with its partitions (0 + 1 + 2 + 3 in k = 0 and 1),
    # the dropped one gone
    out = _dfsql(wh, "SELECT SUM(v) AS s, COUNT(DISTINCT k) AS ks FROM ext_ctas",
                 "DROP TABLE ext_ctas", "SELECT * FROM ext_cols", ok=False)
    assert _cells(out) == [["s", "ks"], ["6", "2"]]
    assert "TABLE_OR_VIEW_NOT_FOUND" in out
    with pytest.raises(DfsqlError, match="TABLE_OR_VIEW_NOT_FOUND"):
        dfsql.sql("SELECT * FROM ext_ctas", spark)
    assert (ctas / "k=0").is_dir()
