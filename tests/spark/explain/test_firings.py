"""EXPLAIN FIRINGS through ``dfsql.sql`` on Spark (docs/reference.md#explaining-time): the events of the
same replay that makes the query's panes, WHERE narrowing to a key, a window still
waiting on a writer when the input ends, and the positioned errors."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

import dfsql
from dfsql.errors import NotSupportedError
from dfsql.spark.explain.firings import COLUMNS, _split_where
from dfsql.spark.plan.planner import planned_of

FIG14 = (Path(__file__).resolve().parents[3] / "examples" / "paper" /
         "fig14_sessions_retracting.sql").read_text().split("\n", 1)[1].strip().rstrip(";")


def _t(hms: str) -> datetime:
    return datetime.strptime("2015-09-01 " + hms, "%Y-%m-%d %H:%M:%S")


@pytest.fixture(scope="module")
def fig14_df(spark, paper_tables):
    """Figure 14's events; its only key is k, so the WHERE keeps them all (and is pushed
    down to the input: test_where_on_a_key_filters_the_input)."""
    return dfsql.sql("EXPLAIN FIRINGS " + FIG14 + "\nWHERE key = 'k'", spark)


@pytest.fixture(scope="module")
def fig14(fig14_df):
    return [r.asDict() for r in fig14_df.collect()]


def test_fire_and_retract_rows_are_the_query_panes(spark, fig14) -> None:
    """The FIRE rows are the query's own rows (window, pane, timing, emit time and the
    value emitted), the RETRACT rows its retractions, in the query's §7 order."""
    assert list(fig14[0]) == ["key", *COLUMNS]
    rows = dfsql.sql(FIG14, spark).collect()

    def mine(event: str) -> list[tuple]:
        return [(r["key"], r["window_start"], r["window_end"], r["pane_index"],
                 r["pane_timing"], r["at"],
                 int(re.search(r"total=(\d+)", r["detail"]).group(1)))
                for r in fig14 if r["event"] == event]

    def theirs(retraction: bool) -> list[tuple]:
        return [(r.key, r.window_start, r.window_end, r.pane_index, r.pane_timing,
                 r.emit_time, r.total) for r in rows if r.is_retraction == retraction]

    assert mine("FIRE") == theirs(False)
    assert mine("RETRACT") == theirs(True)


def test_paper_fig14_events(fig14) -> None:
    """By hand from examples/paper (see tests/model/test_firings.py for the derivation):
    the 8 bridges two sessions at 12:06:20 and the 9 two more at 12:07:20; the 9 is the
    one late element; the early 7 fired by EVERY 1 MINUTE, the on-time 25 by WATERMARK;
    two sessions released at the end of input (12:09:00); nothing waits."""
    by = {}
    for r in fig14:
        by.setdefault(r["event"], []).append(r)
    bridges = [r for r in by["MERGE"] if r["detail"].count(" + ") == 2]
    assert [(r["at"], r["window_start"], r["window_end"]) for r in bridges] == [
        (_t("12:06:20"), _t("12:02:10"), _t("12:05:00")),
        (_t("12:07:20"), _t("12:00:30"), _t("12:05:00"))]
    assert [(r["at"], r["detail"]) for r in by["LATE_ELEMENT"]] == [
        (_t("12:07:20"), "event time 12:01:20; late: its window ended at or before the "
                         "watermark")]
    fire = {(r["at"], r["window_start"]): r["detail"] for r in by["FIRE"]}
    assert fire[(_t("12:05:00"), _t("12:02:10"))] == (
        "EVERY 1 MINUTE in EVERY 1 MINUTE UNTIL WATERMARK, before UNTIL, THEN branch 1; "
        "emits total=7")
    assert "WATERMARK in EVERY 1 MINUTE UNTIL WATERMARK, after UNTIL" in \
        fire[(_t("12:07:00"), _t("12:02:10"))]
    assert fire[(_t("12:07:00"), _t("12:02:10"))].endswith("emits total=25")
    assert [(r["at"], r["window_start"], r["watermark"]) for r in by["EXPIRE"]] == [
        (_t("12:09:00"), _t("12:00:30"), None), (_t("12:09:00"), _t("12:06:30"), None)]
    assert "WAITING" not in by
    assert [r["at"] for r in fig14] == sorted(r["at"] for r in fig14)


def test_where_on_a_key_filters_the_input(fig14_df) -> None:
    """``WHERE key = 'k' AND event = 'MERGE'``: the key's conjunct also filters the input
    stage (by the key's input column, ``__k0``); the whole predicate filters the events."""
    import sqlglot

    def where(p: str):  # as the statement's parser gives it: (offset, text), tree
        return (0, p), sqlglot.parse_one(p, read="spark")

    plan = planned_of(fig14_df).blocks[-1].plan
    residual, pushed = _split_where(plan, *where("key = 'k' AND event = 'MERGE'"))
    assert pushed == "(__k0 = 'k')"
    assert residual == (0, "key = 'k' AND event = 'MERGE'")
    assert _split_where(plan, *where("window_start > key")) == ((0, "window_start > key"), None)
    # a predicate the parser could not read: Spark reports it, nothing is pushed
    assert _split_where(plan, (0, "key = = 1"), None) == ((0, "key = = 1"), None)


def test_waiting_on_a_writer_that_stopped(spark) -> None:
    """FIXED(1 MINUTE) and writers w1, w2 without IDLE TIMEOUT: w1 notes 12:01:00 at
    12:01:00 and 12:04:00 at 12:04:00; w2 notes 12:01:10 at 12:01:00 and then nothing.
    The watermark is the lower latest note: 12:01:00 from 12:01:00 on, then 12:01:10
    (w2's) from 12:04:00. Elements at 12:00:10 (arriving 12:00:20) and 12:03:10
    (arriving 12:03:20); the input ends at 12:04:00 (the notes' last row). [12:00,12:01)
    fired on time at 12:01:00; [12:03,12:04) is held by w2 (12:01:10 < 12:04:00) and
    fires only because the end of input takes the watermark to +inf: its final pane
    fired, so no WAITING row (docs/reference.md: WAITING is for a window whose final pane
    never fired). With TRIGGER EVERY 1 ROW each element fires its own EARLY pane and
    nothing is left for +inf: [12:03,12:04) never has its final pane and WAITS at 12:04:00,
    after its pane of 12:03:20, held by w2."""
    spark.sql("""CREATE OR REPLACE TEMP VIEW fr_rows AS SELECT 'a' AS k,
        CAST(et AS TIMESTAMP) AS et, CAST(pt AS TIMESTAMP) AS pt FROM VALUES
        ('2015-09-01 12:00:10', '2015-09-01 12:00:20'),
        ('2015-09-01 12:03:10', '2015-09-01 12:03:20') AS t(et, pt)""")
    spark.sql("""CREATE OR REPLACE TEMP VIEW fr_notes AS SELECT writer,
        CAST(p AS TIMESTAMP) AS processing_time, CAST(n AS TIMESTAMP) AS noted_time
        FROM VALUES ('w1', '2015-09-01 12:01:00', '2015-09-01 12:01:00'),
        ('w2', '2015-09-01 12:01:00', '2015-09-01 12:01:10'),
        ('w1', '2015-09-01 12:04:00', '2015-09-01 12:04:00') AS t(writer, p, n)""")
    rows = dfsql.sql("""EXPLAIN FIRINGS SELECT k, COUNT(*) AS n FROM fr_rows GROUP BY k
        WINDOW FIXED(1 MINUTE) ON et WATERMARK FROM fr_notes BY writer
        PROCESSING TIME pt WHERE event IN ('FIRE', 'WAITING')""", spark).collect()
    assert [(r.at, r.event, r.window_start, r.watermark) for r in rows] == [
        (_t("12:01:00"), "FIRE", _t("12:00:00"), _t("12:01:00")),
        (_t("12:04:00"), "FIRE", _t("12:03:00"), None)]
    assert rows[1].detail.endswith("end of input: watermark → +inf; emits n=1")
    rows = dfsql.sql("""EXPLAIN FIRINGS SELECT k, COUNT(*) AS n FROM fr_rows GROUP BY k
        WINDOW FIXED(1 MINUTE) ON et WATERMARK FROM fr_notes BY writer
        PROCESSING TIME pt TRIGGER EVERY 1 ROW
        WHERE event IN ('FIRE', 'WAITING')""", spark).collect()
    assert [(r.at, r.event, r.window_start) for r in rows] == [
        (_t("12:00:20"), "FIRE", _t("12:00:00")), (_t("12:03:20"), "FIRE", _t("12:03:00")),
        (_t("12:04:00"), "WAITING", _t("12:03:00"))]
    assert rows[2].watermark == _t("12:01:10")
    assert rows[2].detail == ("watermark 12:01:10 < window end 12:04:00 (held by writer w2); "
                              "the trigger waits for EVERY 1 ROW (0 of 1 so far)")


@pytest.mark.parametrize("query, message", [
    ("EXPLAIN FIRINGS SELECT key FROM scores", "explains a windowed query"),
    ("EXPLAIN FIRINGS SELECT key, SUM(value) AS total FROM scores GROUP BY key\n"
     "WINDOW FIXED(1 MINUTE) ON event_time", "needs PROCESSING TIME"),
    ("EXPLAIN FIRINGS SELECT COUNT(*) AS n FROM fr_stream WINDOW FIXED(1 MINUTE) "
     "ON timestamp PROCESSING TIME timestamp", "reads a stream"),
])
def test_refused_at_firings(spark, paper_tables, query, message) -> None:
    spark.readStream.format("rate").load().createOrReplaceTempView("fr_stream")
    with pytest.raises(NotSupportedError, match=message) as info:
        dfsql.sql(query, spark)
    assert (info.value.line, info.value.column) == (1, 9)
    assert info.value.hint


def test_plot_draws_one_key_with_merges_and_leaves(fig14_df, fig14, tmp_path) -> None:
    """``\\plot`` / ``dfsql.plot`` of EXPLAIN FIRINGS: Figure 14's panes (7 FIRE and 5
    RETRACT events: +5 +7 +10, -7 -10 +25, -5 -25 +39, +3, -3 +12) with the leaf that
    fired each and the merges annotated."""
    from dfsql.shell.plot import plot_result

    path = tmp_path / "firings.png"
    summary = plot_result(fig14_df.columns, [tuple(r.values()) for r in fig14], str(path),
                          "EXPLAIN FIRINGS fig14")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p[3] for p in summary.panes] == ["5", "7", "10", "25", "39", "3", "12"]
    assert len(summary.retractions) == 5
    texts = [t.get_text() for ax in summary.figure.axes for t in ax.texts]
    assert "EVERY 1 MINUTE + WATERMARK" in texts  # the on-time 5, 25 and 12
    assert "EVERY 1 MINUTE" in texts  # the early 7, 10 and 3
    assert "WATERMARK" in texts  # the late 39
    assert "MERGE → [12:02:10,12:05:00)" in texts and "MERGE → [12:00:30,12:05:00)" in texts


def test_shell_explain_firings_then_plot(spark, paper_tables, capsys, tmp_path) -> None:
    """``\\explain firings QUERY WHERE ...`` in the shell prints the events (here Figure
    14's merges and firings) and keeps them as the last result, which ``\\plot`` draws:
    its 7 panes and 5 retractions."""
    from in_process import shell_on

    shell = shell_on(spark)
    shell.command("\\explain firings " + " ".join(FIG14.split())
                  + " WHERE event IN ('MERGE', 'FIRE', 'RETRACT');")
    out = capsys.readouterr().out
    assert out.count("| MERGE") == 6 and out.count("| FIRE") == 7
    assert shell.last is not None and shell.last.columns[-1] == "detail"
    path = tmp_path / "merges.png"
    shell.command(f"\\plot {path}")
    assert path.exists()
    assert "7 panes, 5 retractions" in capsys.readouterr().out


def test_endpoint_returns_the_events(spark, paper_tables) -> None:
    """Through the Thrift endpoint (PyHive, the statement as a client sends it): the same
    result set, here Figure 14's two bridging merges."""
    from pyhive import hive

    from dfsql.server import Server
    from dfsql.session import register_paper_tables

    server = Server(spark, port=0, auth="NONE", session_setup=register_paper_tables).start()
    try:
        conn = hive.connect(host="127.0.0.1", port=server.port, auth="NONE",
                            username="analyst")
        cur = conn.cursor()
        cur.execute("EXPLAIN FIRINGS " + FIG14
                    + " WHERE event = 'MERGE' AND detail LIKE '% + % + %'")
        rows = cur.fetchall()
        assert [d[0] for d in cur.description] == ["key", *COLUMNS]
        assert [(r[3], r[1]) for r in rows] == [(_t("12:06:20"), _t("12:02:10")),
                                                (_t("12:07:20"), _t("12:00:30"))]
        conn.close()
    finally:
        server.stop()
