"""Mistakes found only with Spark or data: a DfsqlError pointing into the query text,
and nothing registered or written by the failed query."""

from __future__ import annotations

import pytest

import dfsql
from dfsql.errors import AnalysisError, DataError, SourceError


def _view_exists(spark, name: str) -> bool:
    return spark.catalog.tableExists(name)


CASES = [
    # (query, error class, line, column, text in message)
    ("SELECT key, SUM(valu) AS total\nFROM scores\nGROUP BY key\nWINDOW FIXED(2 MINUTES) ON event_time",
     AnalysisError, 1, 17, "valu"),
    ("SELECT key, SUM(value) AS total\nFROM scorez\nGROUP BY key\nWINDOW FIXED(2 MINUTES) ON event_time",
     AnalysisError, 2, 6, "scorez"),
    ("SELECT key, SUM(value) AS total\nFROM scores\nGROUP BY key\nWINDOW FIXED(2 MINUTES) ON event_tim",
     AnalysisError, 4, 28, "event_tim"),
    # the name also written earlier, in a string and a comment: placed at the column of
    # the ON tree, where a search of the text found the string first
    ("SELECT key, 'event_tim' AS s, SUM(value) AS total -- event_tim\nFROM scores\n"
     "GROUP BY key\nWINDOW FIXED(2 MINUTES)\n  ON  date_trunc( 'MINUTE',event_tim )",
     AnalysisError, 5, 28, "event_tim"),
    ("SELECT key, SUM(value) AS total\nFROM scores\nGROUP BY key\nWINDOW FIXED(2 MINUTES) ON key",
     AnalysisError, 4, 28, "TIMESTAMP"),
    ("SELECT key, SUM(value) AS total\nFROM scores\nGROUP BY key\nWINDOW FIXED(2 MINUTES) ON event_time\n"
     "PROCESSING TIME value", AnalysisError, 5, 17, "TIMESTAMP"),
    ("SELECT key, SUM(value) AS total\nFROM scores\nGROUP BY key\nWINDOW FIXED(2 MINUTES) ON event_time\n"
     "PROCESSING TIME CASE WHEN value = 9 THEN NULL ELSE arrival_time END\n"
     "ALLOWED LATENESS 1 MINUTE LATE ROWS INTO late_fail_view",
     DataError, 5, 17, "NULL"),
    ("SELECT key, SUM(value) AS total\nFROM scores\nGROUP BY key\nWINDOW FIXED(2 MINUTES) ON event_time\n"
     "WATERMARK FROM scores\nPROCESSING TIME arrival_time", SourceError, 5, 1, "processing_time"),
    ("SELECT key, SUM(value) AS total\nFROM scores\nGROUP BY key\nWINDOW FIXED(2 MINUTES) ON event_time\n"
     "WATERMARK FROM no_such_marks\nPROCESSING TIME arrival_time", AnalysisError, 5, 1,
     "no_such_marks"),
]


@pytest.mark.parametrize("query,cls,line,col,text", CASES,
                         ids=["agg-column", "table", "on-column", "on-column-decoys",
                              "on-type", "pt-type",
                              "pt-nulls", "wm-table-shape", "wm-table-missing"])
def test_spark_side_errors(spark, paper_tables, query, cls, line, col, text):
    with pytest.raises(cls) as info:
        dfsql.sql(query, spark).collect()
    err = info.value
    assert (err.line, err.column) == (line, col), str(err)
    assert text in str(err)
    assert "Traceback" not in str(err) and "at org.apache" not in str(err)
    assert not _view_exists(spark, "late_fail_view")


def test_failed_create_view_creates_nothing(spark, paper_tables):
    q = ("CREATE OR REPLACE TEMP VIEW failed_v AS SELECT key, SUM(valu) FROM scores GROUP BY key "
         "WINDOW FIXED(2 MINUTES) ON event_time")
    with pytest.raises(AnalysisError):
        dfsql.sql(q, spark)
    assert not _view_exists(spark, "failed_v")


def test_plain_sql_error_is_mapped(spark, paper_tables):
    with pytest.raises(dfsql.DfsqlError) as info:
        dfsql.sql("SELECT key,\n  nope FROM scores", spark)
    assert (info.value.line, info.value.column) == (2, 3)
