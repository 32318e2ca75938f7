"""A continuous query's progress log (dfsql.spark.stream.progress_log) without Spark: the
records SHOW STREAMING QUERIES folds (docs/guides/streams.md "Continuous queries"),
Spark's idle reports told from batches, and a long-running query's log kept bounded by
folding old records into one, which changes no figure."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from dfsql.continuous_show import Totals
from dfsql.spark.stream import progress_log as log


def _report(batch: int, rows: int, ran: bool = True, **ours) -> dict:
    """A progress report as Spark gives it (the fields the log reads)."""
    durations = {"latestOffset": 3, "triggerExecution": 9}
    if ran:
        durations["addBatch"] = 5
    return {"batchId": batch, "numInputRows": rows, "durationMs": durations,
            "timestamp": f"2026-01-01T00:00:{batch:02d}.000Z",
            "observedMetrics": {"dfsql": ours} if ours else {}}


def test_an_idle_report_is_no_batch():
    """Spark's report while idle carries the next batch's id and no addBatch."""
    assert log.batch_record(_report(3, 0, ran=False)) is None
    record = log.batch_record(_report(3, 7, watermark="2026-01-01 00:00:00",
                                      state_change=2))
    assert (record["batch_id"], record["input_rows"], record["dfsql"]["watermark"],
            record["dfsql"]["state_change"]) == (3, 7, "2026-01-01 00:00:00", 2)


def test_rows_read_again_by_a_changed_query_are_not_counted():
    report = _report(0, 10)
    report["observedMetrics"][log.REREAD] = {"rows": 6}
    assert log.batch_record(report)["input_rows"] == 4


def test_totals_of_the_records_and_the_earlier_versions():
    """Hand-derived: two versions' figures add; the latest watermark and clock win;
    the state is the latest version's own."""
    base = Totals(batches=5, input_rows=40, watermark="w5", state=9, frontier="f5",
                  rows_latest="f5").as_base()
    records = [log.batch_record(r) for r in (
        _report(0, 3, state_change=4, watermark="w6", frontier="f6", rows_latest="f6"),
        _report(1, 0),  # a batch without rows (the watermark moved)
        _report(2, 2, state_change=-1))]
    t = Totals.of(base, records)
    assert (t.batches, t.input_rows, t.watermark, t.state, t.frontier) == (
        8, 45, "w6", 3, "f6")
    assert Totals.of(base, []) == Totals(**base)  # no batch yet: the versions before


record_strategy = st.builds(
    lambda rows, change, wm, clock: {"input_rows": rows, "duration_ms": 1,
                                     "dfsql": {"state_change": change, "watermark": wm,
                                               "frontier": clock, "rows_latest": clock,
                                               "marks_latest": None}},
    st.integers(0, 50), st.integers(-5, 5), st.none() | st.sampled_from("abc"),
    st.none() | st.sampled_from("xyz"))


@given(st.lists(record_strategy, min_size=2, max_size=30), st.data())
@settings(max_examples=200, deadline=None)
def test_folding_old_records_changes_no_figure(records, data):
    for i, r in enumerate(records):
        r["batch_id"] = i
    cut = data.draw(st.integers(2, len(records)))
    assert Totals.of(None, [log.folded(records[:cut]), *records[cut:]]) == \
        Totals.of(None, records)


def test_a_long_log_is_folded_and_stays_bounded(tmp_path, monkeypatch):
    """Every FOLD_EVERY batches past KEEP, the batches older than the last KEEP fold into
    one record (small numbers here): the figures stay those of every batch."""
    monkeypatch.setattr(log, "KEEP", 10)
    monkeypatch.setattr(log, "FOLD_EVERY", 5)
    ck = str(tmp_path / "ck")
    written = []
    for b in range(23):
        r = log.batch_record(_report(b, b + 1, state_change=1, watermark=f"w{b:02d}"))
        written.append(r)
        log.write_record(None, ck, r)
    _, kept = log.read_log(None, ck)
    # folded at 15 (batches < 5) and at 20 (< 10): one record for 0-9, then 10-22
    assert [r["batch_id"] for r in kept] == [9, *range(10, 23)]
    assert kept[0]["folded"] == 10
    assert Totals.of(None, kept) == Totals.of(None, written)
    assert Totals.of(None, kept).input_rows == sum(range(1, 24))


def test_a_base_is_read_back(tmp_path):
    ck = str(tmp_path / "ck")
    log.write_base(None, ck, {"batches": 2, "input_rows": 5})
    log.write_record(None, ck, log.batch_record(_report(0, 1)))
    base, records = log.read_log(None, ck)
    assert base == {"batches": 2, "input_rows": 5}
    assert [r["batch_id"] for r in records] == [0]
    assert json.loads((tmp_path / "ck" / log.LOG / "0000000000.json").read_text())[
        "input_rows"] == 1
