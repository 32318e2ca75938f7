"""The sink seam (dfsql/spark/stream/sink.py; docs/reference.md#output-columns): a sink
written only against the protocol, driven by ``dfsql.start`` over a file stream, gets
each committed micro-batch once, in changelog order, and a restart from the same
checkpoint commits no batch again. Expected rows: Figure 14's changelog
(examples/paper/figures.json, derived by hand from the paper's rows).

ALTER STREAMING QUERY restates a sink through the same seam
(docs/guides/streams.md#continuous-queries-as-statements): a Restatable sink builds
the changed query's sink over its own place (a table the one replacing it, read until
its first batch; a directory on with its log's next entry, the old rows retracted, a
batch written but not committed refused), and CREATE's INTO words become a sink in one
place, for a restart too. Expected values are the guide's, by hand."""

from __future__ import annotations

from datetime import datetime

import pytest

import dfsql
from dfsql.language.continuous import parse_continuous
from dfsql.spark.stream.plain_sinks import CallableSink, ConsoleSink, FileSink, MemorySink
from dfsql.spark.stream.restate import LoggedDirectory, log_latest
from dfsql.spark.stream.sink import Restatable, Restated, Restatement, Sink, restated
from dfsql.spark.stream.sinks import Into, TableSink, as_sink, statement_into
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

    def open(self, spark, schema, row_key, name) -> None:
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


# ALTER's restatement through the seam (docs/guides/streams.md#continuous-queries-as-statements):
# a sink that can be restated is Restatable; continuous.py asks restated() and
# statement_into() alone.

class Refused(Exception):
    pass


def _how(spark=None, checkpoint: str = "ck", place: str | None = None,
         retractions=None) -> Restatement:
    return Restatement(spark, "q", checkpoint, place, retractions,
                       lambda message, hint: Refused(message, hint))


class KeptRestatable(KeptBatches):
    """A sink of the protocol alone that ALTER can restate: the changed query's sink
    keeps the same ``kept`` place, and says which version it is."""

    def __init__(self, kept: dict, version: int = 1) -> None:
        super().__init__(kept)
        self.version = version

    def restated(self, how: Restatement) -> Restated:
        return Restated(KeptRestatable(self.kept, self.version + 1))


def test_a_protocol_sink_is_restated_by_its_own_method_and_others_are_refused():
    kept: dict = {}
    old = KeptRestatable(kept)
    assert isinstance(old, Sink) and isinstance(old, Restatable)
    new, log_base = restated(old, _how())
    assert isinstance(new, KeptRestatable) and new.kept is kept and new.version == 2
    assert log_base is None
    # the protocol of a micro-batch's changes is not widened: a sink without
    # ``restated`` is still a Sink, and ALTER refuses it, placed as its refusals are
    assert isinstance(KeptBatches({}), Sink)
    for plain in (KeptBatches({}), MemorySink(), ConsoleSink(), CallableSink(print)):
        assert not isinstance(plain, Restatable)
        with pytest.raises(Refused) as e:
            restated(plain, _how())
        assert e.value.args == ("q writes into a sink ALTER STREAMING QUERY cannot "
                                "restate", "STOP the query and CREATE the changed one")


def test_a_table_is_restated_by_the_table_replacing_it_in_the_new_versions_place():
    # the guide: readers see the old query's table until the new one's first batch,
    # which a restart publishes from the old version's place
    old = TableSink("q", path="/kept/tables/q", global_view=True)
    new, log_base = restated(old, _how(place="/kept/tables/q.v2"))
    assert isinstance(new, TableSink) and log_base is None
    assert (new.name, new.path, new.global_view, new.replaces, new.previous) == \
        ("q", "/kept/tables/q.v2", True, True, "/kept/tables/q")


def _into(into: str) -> Into:
    """The sink a CREATE STREAMING QUERY statement with ``into`` words gets."""
    stmt = parse_continuous(f"CREATE STREAMING QUERY q{into} AS SELECT key, SUM(value) "
                            "AS total FROM s GROUP BY key WINDOW TUMBLING(SIZE 1 MINUTE) "
                            "ON event_time")
    assert stmt is not None and stmt.name == "q"
    return statement_into(stmt.name, stmt.sink, stmt.path)


def test_the_into_words_are_mapped_to_a_sink_in_one_place():
    table = _into("")  # the default: INTO TABLE
    assert (table.where, table.clause, table.reader_rows) == ("table global_temp.q", "", None)
    assert table.classic_only is not None and \
        table.classic_only[0].startswith("INTO TABLE is not supported over Spark Connect")
    fresh = table.sink("/kept/tables/q")
    assert isinstance(fresh, TableSink)
    assert (fresh.name, fresh.path, fresh.global_view, fresh.replaces, fresh.previous) == \
        ("q", "/kept/tables/q", True, False, None)
    changed = table.sink("/kept/tables/q.v3", True, None, "/kept/tables/q.v2")
    assert (changed.replaces, changed.previous) == (True, "/kept/tables/q.v2")  # type: ignore

    d = _into(" INTO DIRECTORY '/data/panes'")
    assert (d.where, d.clause, d.classic_only) == \
        ("directory /data/panes", " INTO DIRECTORY '/data/panes'", None)
    assert d.reader_rows is not None and d.reader_rows.where == "directory /data/panes"
    first = d.sink(None)  # Spark's own file sink
    assert isinstance(first, FileSink) and first.path == "/data/panes"
    later = d.sink(None, True, 3)  # a changed version: on with the log from entry 3
    assert isinstance(later, LoggedDirectory)
    assert (later.path, later.base, later.first) == ("/data/panes", 3, None)


def _log_of_two_batches(spark, directory: str) -> None:
    rows = spark.createDataFrame([("k", 5, False)], "key STRING, total BIGINT, "
                                 "is_retraction BOOLEAN")
    logged = LoggedDirectory(directory, 0)
    logged.write(rows, 0)
    logged.write(rows, 1)
    assert log_latest(spark, directory) == 1


def _committed(checkpoint, *batches: int) -> str:
    (checkpoint / "commits").mkdir(parents=True)
    for b in batches:
        (checkpoint / "commits" / str(b)).write_text("v1\n{}\n")
    return str(checkpoint)


def test_a_directory_is_restated_on_with_its_log_and_restarts_through_the_same_seam(
        spark, tmp_path):
    import pandas as pd

    directory = str(tmp_path / "panes")
    _log_of_two_batches(spark, directory)  # log entries 0 and 1, both committed
    retracted = pd.DataFrame({"key": ["k"], "total": [5], "is_retraction": [True]})
    place = tmp_path / "tables" / "q.v2"
    how = _how(spark, _committed(tmp_path / "ck", 0, 1), str(place), lambda: retracted)
    new, log_base = restated(FileSink(directory), how)  # a first version: Spark's sink
    # the next version's first batch is the log's next entry, with the retractions
    assert isinstance(new, LoggedDirectory) and log_base == 2
    assert (new.path, new.base) == (directory, 2)
    assert new.first.to_dict("list") == retracted.to_dict("list")
    # kept in its place: a restart before that batch commits restates again
    again = _into(f" INTO DIRECTORY '{directory}'").sink(
        str(place), True, log_base)
    assert isinstance(again, LoggedDirectory) and again.base == 2
    assert again.first.to_dict("list") == retracted.to_dict("list")
    # a later version: its log entries count from its own base
    newer, base = restated(LoggedDirectory(directory, 1), _how(
        spark, _committed(tmp_path / "ck1", 0), None, lambda: retracted))
    assert base == 2 and newer.base == 2  # type: ignore[attr-defined]


def test_a_directory_a_batch_ahead_of_its_checkpoint_is_refused(spark, tmp_path):
    # the guide: stopped after a batch's files are listed but before it commits
    directory = str(tmp_path / "panes")
    _log_of_two_batches(spark, directory)
    with pytest.raises(Refused) as e:
        restated(FileSink(directory), _how(spark, _committed(tmp_path / "ck", 0), None,
                                           lambda: None))
    assert e.value.args == ("q stopped between writing a micro-batch and committing it, "
                            "so its state is a batch behind its directory; it runs on "
                            "unchanged", "run the ALTER again")


def test_the_statements_name_no_sink_kind():
    """continuous.py and continuous_kept.py build every sink through the seam: they name
    no sink class and compare no INTO word (a new sink is its own module)."""
    import ast
    import inspect

    from dfsql import continuous, continuous_kept
    from dfsql.spark.stream import plain_sinks, restate, table_sink

    kinds = {n for m in (plain_sinks, restate, table_sink) for n, v in vars(m).items()
             if inspect.isclass(v) and v.__module__ == m.__name__
             and isinstance(v, type) and hasattr(v, "commit")}
    assert {"TableSink", "LoggedDirectory", "FileSink", "MemorySink"} <= kinds
    for module in (continuous, continuous_kept):
        tree = ast.parse(inspect.getsource(module))
        named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        named |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        named |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                  for a in n.names}
        assert not named & kinds, module.__name__
        assert "isinstance" not in named, module.__name__
        words = {c.value for n in ast.walk(tree) if isinstance(n, ast.Compare)
                 for c in ast.walk(n) if isinstance(c, ast.Constant)}
        assert not words & {"table", "directory"}, module.__name__
