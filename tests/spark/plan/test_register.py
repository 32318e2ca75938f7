"""``dfsql.register``: a registered source's defaults for ON, PROCESSING TIME and
WATERMARK (docs/reference.md#sources) apply to queries that leave those clauses out."""

from __future__ import annotations

from datetime import datetime

import pytest

import dfsql
from dfsql.api import dropped_warnings
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


@pytest.mark.parametrize("clauses, replayed", [
    ("", False),  # a plain windowed aggregate over a bounded table: a batch
    ("TRIGGER AT WATERMARK", True),  # asks for processing time: the registered clock
    ("ALLOWED LATENESS 1 MINUTE", True),
    ("WATERMARK DELAY 0 SECONDS", True),
])
def test_join_of_a_registered_and_an_unregistered_table(spark, registered, clauses, replayed):
    """The registered event time always applies; the registered processing time only to a
    query that asks for processing time (then nothing here is late: same totals)."""
    df = dfsql.sql("SELECT n.name, SUM(e.v) AS total FROM reg_events e "
                   f"JOIN reg_names n ON e.k = n.k GROUP BY n.name "
                   f"WINDOW FIXED(1 MINUTE) {clauses}", spark)
    rows = df.collect()
    last = {(r.name, r.window_start): r.total  # accumulating: the last pane holds all
            for r in sorted(rows, key=lambda r: r.pane_index) if not r.is_retraction}
    finals = sorted((*k, v) for k, v in last.items())
    assert finals == [("alpha", datetime(2024, 1, 1, 12, 0), 3),
                      ("alpha", datetime(2024, 1, 1, 12, 2), 8),
                      ("beta", datetime(2024, 1, 1, 12, 1), 4)]
    assert all((r.emit_time is not None) is replayed for r in rows)


def test_a_plain_count_over_a_registered_table_drops_nothing(spark, registered):
    """A row arriving behind the registered watermark (DELAY 1 MINUTE) is dropped only by
    a query that asks for processing time; a plain count counts it, as unregistered."""
    late = ("z", 16, "2024-01-01 12:00:05", "2024-01-01 12:05:00")  # window 12:00, at 12:05
    df = spark.createDataFrame(
        [(k, v, datetime.fromisoformat(e), datetime.fromisoformat(a))
         for k, v, e, a in [*ROWS, late]], "k STRING, v BIGINT, et TIMESTAMP, at TIMESTAMP")
    dfsql.register("reg_late", df, event_time="et", processing_time="at",
                   watermark="DELAY 1 MINUTE")
    plain = dfsql.sql("SELECT COUNT(*) AS n FROM reg_late WINDOW FIXED(1 MINUTE)", spark)
    assert sorted((r.window_start.minute, r.n) for r in plain.collect()) == \
        [(0, 3), (1, 1), (2, 1)]
    assert dfsql.dropped_late(plain) == 0 and dropped_warnings(plain) == []
    replay = dfsql.sql("SELECT COUNT(*) AS n FROM reg_late WINDOW FIXED(1 MINUTE) "
                       "TRIGGER AT WATERMARK", spark)
    # by 12:05 the watermark is 12:02:20 - 1 minute = 12:01:20, past 12:01: the z dropped
    assert sorted((r.window_start.minute, r.n) for r in replay.collect()) == \
        [(0, 2), (1, 1), (2, 1)]
    assert dfsql.dropped_late(replay) == 1
    assert dropped_warnings(replay) == [
        "warning: 1 row dropped as late: they arrived (PROCESSING TIME at (registered with "
        "reg_late)) after the watermark (WATERMARK DELAY 1m (registered with reg_late)) had "
        "passed their window's end + ALLOWED LATENESS 0s or after their window's trigger had "
        "finished. ALLOWED LATENESS <duration> keeps them (LATE panes); LATE ROWS INTO "
        "<view> lists them"]


def test_a_registered_stream_is_always_on_its_registered_clock(spark, tmp_path):
    """A stream runs in processing time whatever the query says: the registered column
    is its clock, and EXPLAIN says so (nothing runs: a stream is only planned)."""
    import pandas as pd

    pd.DataFrame({"k": ["a"], "v": [1], "et": [pd.Timestamp("2024-01-01 12:00")],
                  "at": [pd.Timestamp("2024-01-01 12:00:05")]}).to_parquet(
        tmp_path / "part-0.parquet", coerce_timestamps="us")
    live = spark.readStream.schema("k STRING, v BIGINT, et TIMESTAMP, at TIMESTAMP") \
        .parquet(str(tmp_path))
    dfsql.register("reg_live", live, event_time="et", processing_time="at",
                   watermark="DELAY 5 SECONDS")
    lines = dfsql.explain("SELECT k, SUM(v) AS s FROM reg_live GROUP BY k "
                          "WINDOW FIXED(1 MINUTE)").splitlines()
    assert "PROCESSING TIME at  -- registered with reg_live" in lines
    assert "WATERMARK DELAY 5s  -- registered with reg_live" in lines
    assert "WINDOW FIXED(1m) ON et  -- registered with reg_live" in lines
    df = dfsql.sql("SELECT k, SUM(v) AS s FROM reg_live GROUP BY k WINDOW FIXED(1 MINUTE)",
                   spark)
    assert df.isStreaming and dropped_warnings(df) == []


def test_explain_marks_registered_defaults_and_the_ones_not_in_force(registered):
    batch = dfsql.explain("SELECT k, COUNT(*) AS n FROM reg_events GROUP BY k "
                          "WINDOW FIXED(1 MINUTE)").splitlines()
    assert batch[1] == "WINDOW FIXED(1m) ON et  -- registered with reg_events"
    assert batch[2].startswith("-- batch: no PROCESSING TIME")
    assert batch[3].startswith("-- not in force: PROCESSING TIME at, registered with "
                               "reg_events (a query runs in processing time when it writes")
    assert batch[4].startswith("-- not in force: WATERMARK DELAY 1m, registered with")
    own = dfsql.explain("SELECT k, COUNT(*) AS n FROM reg_events GROUP BY k "
                        "WINDOW FIXED(1 MINUTE) ON at PROCESSING TIME et").splitlines()
    # written clauses unmarked; the registered watermark applies to the query's replay
    assert own[1:4] == ["WINDOW FIXED(1m) ON at",
                        "WATERMARK DELAY 1m  -- registered with reg_events",
                        "PROCESSING TIME et"]
    plain = dfsql.explain("SELECT k, COUNT(*) AS n FROM unreg_events GROUP BY k "
                          "WINDOW FIXED(1 MINUTE) ON et").splitlines()
    assert plain[2].startswith("WATERMARK DELAY 0s  -- no PROCESSING TIME: over a bounded "
                               "table a batch")
    assert "registered" not in "\n".join(plain)


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


def test_explain_of_a_mistake_over_a_registered_source_is_positioned(registered):
    with pytest.raises(DfsqlError) as info:
        dfsql.explain("SELECT k, COUNT(*) AS n FROM reg_events GROUP BY k\n"
                      "WINDOW FIXED(1 MINUT)")
    assert (info.value.line, info.value.column) == (2, 16) and "MINUT" in str(info.value)


def test_a_registration_belongs_to_its_session(spark, registered):
    """Registrations are a session's, as its temp views are: another session (an
    endpoint client's, say) neither sees reg_events' defaults nor shares its own."""
    from dfsql.api import registration

    other = spark.newSession()
    assert registration("reg_events", spark).event_time == "et"
    assert registration("reg_events", other) is None
    df = spark.table("reg_events")
    other.createDataFrame(df.toPandas()).createOrReplaceTempView("reg_events")
    with pytest.raises(DfsqlError) as err:  # no default ON in the other session
        dfsql.sql("SELECT k, COUNT(*) AS n FROM reg_events GROUP BY k WINDOW FIXED(1 MINUTE)",
                  other)
    assert "ON <event time> is required" in str(err.value)
    dfsql.register("reg_other", other.table("reg_events"), event_time="at")
    assert registration("reg_other", other).event_time == "at"
    assert registration("reg_other", spark) is None
    assert "-- registered with reg_events" in dfsql.explain(
        "SELECT k, COUNT(*) AS n FROM reg_events GROUP BY k WINDOW FIXED(1 MINUTE)", spark)
