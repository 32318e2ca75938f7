"""CREATE / SHOW / STOP STREAMING QUERY through ``dfsql.sql`` (issue #12, item 4): a
continuous query started by a statement, its live windows read back as a table, listed
and stopped; mistakes are positioned errors and start nothing."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

import dfsql
from dfsql.errors import DfsqlError
from tests.conftest import paper_stream_dir

ROOT = Path(__file__).resolve().parents[2]
FIG14 = next(f for f in json.loads((ROOT / "examples" / "paper" / "figures.json")
                                   .read_text())["figures"]
             if f["name"] == "fig14_sessions_retracting")
#: Figure 14's windows still live after its last pane, with their last row (from the
#: paper's panes: every other window was retracted or merged away)
FIG14_TABLE = [
    ("k", 39, datetime(2015, 9, 1, 12, 0, 30), datetime(2015, 9, 1, 12, 5), 0, "LATE", False,
     datetime(2015, 9, 1, 12, 7, 20)),
    ("k", 12, datetime(2015, 9, 1, 12, 6, 30), datetime(2015, 9, 1, 12, 8, 50), 0, "ON_TIME",
     False, datetime(2015, 9, 1, 12, 9)),
]


@pytest.fixture
def scores_live(spark, paper_tables, tmp_path):
    src = paper_stream_dir(tmp_path / "scores")
    schema = spark.read.parquet(str(src)).schema
    spark.readStream.schema(schema).parquet(str(src)).createOrReplaceTempView("scores_live")
    yield "scores_live"
    for q in spark.streams.active:
        q.stop()
    spark.catalog.dropTempView("scores_live")  # the session is shared with later modules


def _query(name: str, head: str = "") -> str:
    return (f"CREATE STREAMING QUERY {name}{head}\nAS "
            + FIG14["query"].replace("FROM scores", "FROM scores_live"))


def test_create_read_show_and_stop(spark, scores_live):
    from dfsql.continuous import _RUNNING

    created = dfsql.sql(_query("fig14_live"), spark).collect()
    assert [(r.name, r.sink) for r in created] == [("fig14_live", "table global_temp.fig14_live")]
    _RUNNING["fig14_live"].query.processAllAvailable()
    rows = spark.sql("SELECT * FROM global_temp.fig14_live ORDER BY window_start").collect()
    assert [tuple(r) for r in rows] == FIG14_TABLE
    shown = dfsql.sql("SHOW STREAMING QUERIES", spark).collect()
    assert [(r.name, r.status) for r in shown] == [("fig14_live", "RUNNING")]
    assert shown[0].batches >= 1 and shown[0].state_elements is not None
    # another session of the application sees it too
    other = spark.newSession()
    assert other.sql("SELECT COUNT(*) FROM global_temp.fig14_live").first()[0] == 2
    assert [r.name for r in dfsql.sql("SHOW STREAMING QUERIES", other).collect()] == [
        "fig14_live"]
    # a second query of that name while it runs
    with pytest.raises(DfsqlError) as info:
        dfsql.sql(_query("fig14_live"), spark)
    assert (info.value.line, info.value.column) == (1, 24)
    stopped = dfsql.sql("STOP STREAMING QUERY fig14_live", spark).collect()
    assert [tuple(r) for r in stopped] == [("fig14_live", "STOPPED")]
    assert dfsql.sql("SHOW STREAMING QUERIES", spark).collect() == []
    assert not spark.streams.active


def test_into_directory(spark, scores_live, tmp_path):
    from dfsql.continuous import _RUNNING

    out = tmp_path / "panes"
    dfsql.sql(_query("fig14_files", f"\nINTO DIRECTORY '{out}' CHECKPOINT '{tmp_path / 'ck'}'"),
              spark)
    _RUNNING["fig14_files"].query.processAllAvailable()
    got = spark.read.parquet(str(out)).orderBy("emit_time", "is_retraction").collect()
    assert len(got) == len(FIG14["expected"]) == 12
    assert sum(r.is_retraction for r in got) == 5
    dfsql.sql("STOP STREAMING QUERY fig14_files", spark)


@pytest.mark.parametrize("text,line,col", [
    ("STOP STREAMING QUERY nothing_here", 1, 22),
    ("CREATE STREAMING QUERY q INTO NOWHERE AS SELECT 1", 1, 31),
    ("CREATE STREAMING QUERY q\nAS", 2, 3),
    ("SHOW STREAMING QUERY", 1, 16),
    # a bounded source: the query is not a stream
    (_query("bounded").replace("scores_live", "scores"), 2, 4),
    # a mistake inside the query keeps its own line and column
    (_query("typo").replace("EMIT", "EMT"), 10, 1),
])
def test_mistakes_are_positioned_and_start_nothing(spark, scores_live, text, line, col):
    with pytest.raises(DfsqlError) as info:
        dfsql.sql(text, spark)
    assert (info.value.line, info.value.column) == (line, col), info.value
    assert info.value.hint
    assert not spark.streams.active
