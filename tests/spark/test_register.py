"""``dfsql.register``: a registered source's defaults for ON, PROCESSING TIME and
WATERMARK (LANGUAGE.md §8) apply to queries that leave those clauses out."""

from __future__ import annotations

from datetime import datetime

import pytest

import dfsql
from dfsql.errors import DfsqlError

#: (key, value, event_time, arrival_time): key a fires an EARLY pane before the watermark
#: (DELAY 1 MINUTE) passes its window's end.
ROWS = [("a", 1, "2024-01-01 12:00:10", "2024-01-01 12:00:20"),
        ("a", 2, "2024-01-01 12:00:40", "2024-01-01 12:00:50"),
        ("b", 4, "2024-01-01 12:01:30", "2024-01-01 12:01:40"),
        ("a", 8, "2024-01-01 12:02:20", "2024-01-01 12:02:30")]
CLAUSES = ("TRIGGER AT WATERMARK EARLY EVERY 1 ROW EMIT ACCUMULATING AND RETRACTING")


@pytest.fixture(scope="module")
def registered(spark):
    df = spark.createDataFrame(
        [(k, v, datetime.fromisoformat(e), datetime.fromisoformat(a)) for k, v, e, a in ROWS],
        "k STRING, v BIGINT, et TIMESTAMP, at TIMESTAMP")
    dfsql.register("reg_events", df, event_time="et", processing_time="at",
                   watermark="DELAY 1 MINUTE")
    df.createOrReplaceTempView("unreg_events")
    spark.createDataFrame([("a", "alpha"), ("b", "beta")], "k STRING, name STRING") \
        .createOrReplaceTempView("reg_names")
    return "reg_events"


def _rows(df):
    return [tuple(r) for r in df.collect()]


def test_defaults_equal_the_clauses_written_out(spark, registered):
    implicit = dfsql.sql(f"SELECT k, SUM(v) AS total FROM reg_events GROUP BY k "
                         f"WINDOW FIXED(1 MINUTE) {CLAUSES}", spark)
    explicit = dfsql.sql(f"SELECT k, SUM(v) AS total FROM unreg_events GROUP BY k "
                         "WINDOW FIXED(1 MINUTE) ON et WATERMARK DELAY 1 MINUTE "
                         f"PROCESSING TIME at {CLAUSES}", spark)
    got = _rows(implicit)
    assert got == _rows(explicit)
    # a replay (emit times), windows of 2024 (not the 1970 window of a missing ON)
    assert all(r[-2] is not None for r in got)
    assert {r[2] for r in got} == {datetime(2024, 1, 1, 12, m) for m in (0, 1, 2)}
    assert any(r[5] == "EARLY" for r in got)


def test_a_clause_written_overrides_the_default(spark, registered):
    df = dfsql.sql("SELECT k, COUNT(*) AS n FROM reg_events GROUP BY k "
                   "WINDOW FIXED(1 MINUTE) ON at WATERMARK DELAY 1 SECOND", spark)
    # ON at: the 12:00:50 arrival is in the 12:00 window with 12:00:20
    assert sorted((r.k, r.window_start, r.n) for r in df.collect() if not r.is_retraction
                  and r.is_last) == [("a", datetime(2024, 1, 1, 12, 0), 2),
                                     ("a", datetime(2024, 1, 1, 12, 2), 1),
                                     ("b", datetime(2024, 1, 1, 12, 1), 1)]


def test_join_of_a_registered_and_an_unregistered_table(spark, registered):
    df = dfsql.sql("SELECT n.name, SUM(e.v) AS total FROM reg_events e "
                   "JOIN reg_names n ON e.k = n.k GROUP BY n.name "
                   "WINDOW FIXED(1 MINUTE)", spark)
    finals = sorted((r.name, r.window_start, r.total) for r in df.collect()
                    if r.is_last and not r.is_retraction)
    assert finals == [("alpha", datetime(2024, 1, 1, 12, 0), 3),
                      ("alpha", datetime(2024, 1, 1, 12, 2), 8),
                      ("beta", datetime(2024, 1, 1, 12, 1), 4)]
    assert all(r.emit_time is not None for r in df.collect())


def test_the_source_is_the_from_relation_not_a_word_in_the_text(spark, registered):
    """A registered name that appears only as a string or column alias is no source."""
    with pytest.raises(DfsqlError, match="ON <event time> is required"):
        dfsql.sql("SELECT k, COUNT(*) AS reg_events FROM unreg_events "
                  "WHERE k <> 'reg_events' GROUP BY k WINDOW FIXED(1 MINUTE)", spark)


@pytest.mark.parametrize("kwargs, word", [
    ({"event_time": "no_such_column"}, "no_such_column"),
    ({"processing_time": "arrival"}, "arrival"),
    ({"event_time": "k"}, "TIMESTAMP"),
    ({"watermark": "DELAY 2 MINUTS"}, "MINUTS"),
    ({"watermark": "SOMETIMES"}, "SOMETIMES"),
])
def test_wrong_registration_is_a_positioned_error(spark, registered, kwargs, word):
    df = spark.table("unreg_events")
    with pytest.raises(DfsqlError) as info:
        dfsql.register("bad_events", df, **kwargs)
    err = info.value
    assert word in str(err) and err.line is not None and err.column is not None and err.hint
    assert "register(" in err.message
