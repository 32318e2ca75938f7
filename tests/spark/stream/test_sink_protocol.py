"""The sink seam (dfsql/spark/stream/sink.py; docs/reference.md#output-columns): a sink
written only against the protocol, driven by ``dfsql.start`` over a file stream, gets
each committed micro-batch once, in changelog order, and a restart from the same
checkpoint commits no batch again. Expected rows: Figure 14's changelog
(examples/paper/figures.json, derived by hand from the paper's rows)."""

from __future__ import annotations

from datetime import datetime

import dfsql
from dfsql.spark.stream.sink import Sink
from dfsql.spark.stream.sinks import as_sink
from tests.paper import FIGURES
from tests.spark.feeds import paper_events, with_sentinel, write_parts

FIG14 = FIGURES["fig14_sessions_retracting"]


class KeptBatches:
    """A sink of the protocol alone: every committed batch's rows, by batch id, and the
    last id committed (what a restart resumes from), kept across instances in ``kept``."""

    changelog_order = True

    def __init__(self, kept: dict) -> None:
        self.kept = kept
        self.opened: list[str] = []

    def native(self, visible, name):
        return None

    def open(self, spark, schema, key_names, name) -> None:
        self.opened = [f.name for f in schema.fields]

    def commit(self, batch, batch_id: int) -> None:
        if batch_id <= self.kept.get("last", -1):  # a replayed batch: once only
            return
        self.kept.setdefault("batches", {})[batch_id] = [tuple(r) for r in batch.collect()]
        self.kept["last"] = batch_id


def _row(r: dict) -> tuple:
    when = "%Y-%m-%d %H:%M:%S"
    return (r["key"], r["total"], datetime.strptime(r["window_start"], when),
            datetime.strptime(r["window_end"], when), r["pane_index"], r["pane_timing"],
            r["is_last"], datetime.strptime(r["emit_time"], when), r["is_retraction"])


def test_a_protocol_sink_is_passed_through_and_a_callable_is_wrapped():
    sink = KeptBatches({})
    assert isinstance(sink, Sink) and as_sink(sink) is sink
    got: list = []
    wrapped = as_sink(lambda b, i: got.append((b, i)))
    assert isinstance(wrapped, Sink) and wrapped.native(None, None) is None
    wrapped.commit("batch", 3)
    assert got == [("batch", 3)]


def test_each_committed_batch_reaches_the_sink_once_in_changelog_order(
        spark, paper_tables, tmp_path):
    # a file per arrival minute (12:04 … 12:08, the sentinel), one per micro-batch
    write_parts(with_sentinel(paper_events()), [2, 5, 6, 8, 10], tmp_path / "in")
    (spark.readStream.schema(spark.read.parquet(str(tmp_path / "in")).schema)
     .option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
     .createOrReplaceTempView("protocol_live"))
    query = FIG14["query"].replace("FROM scores", "FROM protocol_live")
    kept: dict = {}
    sink = KeptBatches(kept)
    dfsql.start(query, sink=sink, checkpoint=str(tmp_path / "ck"),
                trigger={"availableNow": True}, spark=spark).awaitTermination()
    assert sink.opened == ["key", "total", "window_start", "window_end", "pane_index",
                           "pane_timing", "is_last", "emit_time", "is_retraction"]
    batches = kept["batches"]
    assert sorted(batches) == list(range(len(batches)))  # every id once, from 0
    rows = [r for i in sorted(batches) for r in batches[i]]
    assert sorted(rows) == sorted(_row(r) for r in FIG14["expected"])
    for each in batches.values():  # §7's order inside a batch: by emit time first
        assert [r[7] for r in each] == sorted(r[7] for r in each)
    # a restart from the same checkpoint: Spark replays nothing committed, and the
    # sink is opened again (where it would resume from what it kept)
    again = KeptBatches(kept)
    dfsql.start(query, sink=again, checkpoint=str(tmp_path / "ck"),
                trigger={"availableNow": True}, spark=spark).awaitTermination()
    assert again.opened == sink.opened
    assert kept["batches"] == batches
