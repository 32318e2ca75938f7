"""Issue #54: a live retracting sessions query into PostgreSQL, its process dying at random
cut points relative to the database's commit, and started again from its checkpoint with
fresh sinks, as a restart starts it (docs/guides/databases.md#exactly-once).

A cut is a micro-batch and a place: (1) before the batch's transaction starts, (2) after
its ``COPY`` and before its ``COMMIT`` (the sink raises inside the transaction, which
rolls back), (3) after the ``COMMIT`` and before Spark records the batch as committed.
Dying is the sink raising: the query fails, Spark has not committed the batch, and the
restart runs it again under the same id.

Expected rows come from another path, the batch model: ``dfsql.sql`` of the same query
over the same rows as a bounded table, its rows before the stream's frontier (the
sentinel's arrival). The changelog table holds exactly those rows, none doubled or lost;
the table holds each window's current row (its last row unless that is a retraction,
docs/reference.md#output-columns); the progress rows name the last batch Spark
committed; and a batch replayed after a cut at (3) changes nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dfsql
from dfsql.connections import Connections
from dfsql.spark.stream.postgres_sink import PostgresChangelog, PostgresTable
from tests.postgres import running
from tests.spark.feeds import workload, write_parts

#: a live retracting sessions query (tests/spark/stream/stream_job.py's), ``{t}`` its input
QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM {t} GROUP BY key "
         "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 20 SECONDS "
         "PROCESSING TIME arrival_time ALLOWED LATENESS 60 SECONDS "
         "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
         "EMIT ACCUMULATING AND RETRACTING")
#: the output columns, the order both tables and the replay's rows are compared in
COLUMNS = ("key", "total", "n", "window_start", "window_end", "pane_index", "pane_timing",
           "is_last", "emit_time", "is_retraction")
#: the three places a process dies, relative to the database transaction
BEFORE, STAGED, COMMITTED = "before the transaction", "after COPY", "after COMMIT"
PLACES = (BEFORE, STAGED, COMMITTED)


class Died(RuntimeError):
    """The process dying at a cut (never a lost connection: the sink does not retry)."""


class _Cut:
    """A database sink that dies at ``cut`` (batch id, place), else writes as it does."""

    def __init__(self, *args: Any, cut: tuple[int, str] | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.cut = cut
        self._batch = -1

    def _dies(self, place: str) -> None:
        if self.cut == (self._batch, place):
            raise Died(f"{self.table} died at batch {self._batch}, {place}")

    def _apply(self, data: bytes, batch_id: int) -> None:
        self._batch = batch_id
        self._dies(BEFORE)
        super()._apply(data, batch_id)  # type: ignore[misc]
        self._dies(COMMITTED)

    def _write(self, cur: Any, data: bytes) -> None:
        super()._write(cur, data)  # type: ignore[misc]
        self._dies(STAGED)  # inside the transaction: it rolls back


class CutTable(_Cut, PostgresTable):
    """The current-rows sink, with its cut."""


class CutChangelog(_Cut, PostgresChangelog):
    """The changelog sink, with its cut."""


class _Both:
    """The table and the changelog written by one query, each in its own transaction
    with its own progress row, as two INTO queries write them (at one query's cost);
    ``after(batch_id)`` called once both have written a batch."""

    changelog_order = True

    def __init__(self, sinks: list[_Cut], after: Callable[[int], None]) -> None:
        self.sinks, self.after = sinks, after

    def native(self, visible: Any, name: str | None) -> None:
        return None

    def open(self, spark: Any, schema: Any, key_names: tuple[str, ...],
             name: str | None) -> None:
        for s in self.sinks:
            s.open(spark, schema, key_names, name)  # type: ignore[attr-defined]

    def commit(self, batch: Any, batch_id: int) -> None:
        batch = batch.persist()  # read by both sinks: the stateful operator runs once
        try:
            for s in self.sinks:
                s.commit(batch, batch_id)  # type: ignore[attr-defined]
        finally:
            batch.unpersist()
        self.after(batch_id)

    def close(self) -> None:
        for s in self.sinks:
            s.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def pg():
    with running() as server:
        yield server


@pytest.fixture(scope="module")
def conn(pg):
    return Connections().add("cuts_db", pg.url())


@pytest.fixture
def _no_leftover_streams(spark):
    yield
    for q in spark.streams.active:
        q.stop()


def _utc(v: object) -> object:
    """A timestamp as Spark's rows show it (naive, UTC: the session's time zone)."""
    if isinstance(v, datetime) and v.tzinfo is not None:
        return v.astimezone(timezone.utc).replace(tzinfo=None)
    return v


def _select(pg, sql: str) -> list[tuple]:
    with pg.connect() as c:
        return [tuple(_utc(v) for v in r) for r in c.execute(sql).fetchall()]


def _snapshot(pg, table: str, name: str) -> tuple[Counter, list[tuple]]:
    """All of ``table``'s rows (in any order), and its progress row: what a replayed
    batch must keep."""
    return (Counter(_select(pg, f'SELECT * FROM public."{table}"')),
            _select(pg, "SELECT batch_id FROM public.dfsql_progress WHERE query = "
                    f"'{name}' AND target = '{table}'"))


def _feed(spark, seed: int, tmp: Path, view: str) -> tuple[Path, int, datetime]:
    """A random workload in 3-4 files at random cuts, then a sentinel (a NULL event time
    an hour after the last arrival) alone in the last file: (the files' directory, how
    many, the frontier the sentinel sets)."""
    import pandas as pd

    rng = np.random.default_rng(5400 + seed)
    frame = workload(seed, n=90)
    sentinel = frame.iloc[-1:].copy()
    sentinel["arrival_time"] = frame["arrival_time"].max() + pd.Timedelta(hours=1)
    sentinel["event_time"] = pd.NaT
    frame = pd.concat([frame, sentinel], ignore_index=True)
    cuts = sorted(rng.choice(np.arange(1, len(frame) - 1), int(rng.integers(2, 4)),
                             replace=False).tolist())
    src = tmp / "in"
    write_parts(frame, [*cuts, len(frame) - 1], src)
    (spark.readStream.schema(spark.read.parquet(str(src)).schema)
     .option("maxFilesPerTrigger", 1).parquet(str(src)).createOrReplaceTempView(view))
    frontier = sentinel["arrival_time"].iloc[0].to_pydatetime().replace(tzinfo=None)
    return src, len(cuts) + 2, frontier


def _replay(spark, src: Path, frontier: datetime) -> list[tuple]:
    """The bounded replay's changelog before the frontier, each row as ``COLUMNS``."""
    spark.read.parquet(str(src)).createOrReplaceTempView("cuts_bounded")
    try:
        rows = dfsql.sql(QUERY.format(t="cuts_bounded"), spark).collect()
    finally:
        spark.catalog.dropTempView("cuts_bounded")
    return [tuple(r[c] for c in COLUMNS) for r in rows if r["emit_time"] < frontier]


def _current(changelog: list[tuple]) -> set[tuple]:
    """Each window's current row (docs/reference.md#output-columns): its last row by
    emit time, then pane index, a retraction after the row it retracts; none when that
    last row is a retraction. The row without ``is_retraction``, as the table holds it."""
    at = {c: i for i, c in enumerate(COLUMNS)}
    last: dict[tuple, tuple] = {}
    for r in changelog:
        window = (r[at["key"]], r[at["window_start"]], r[at["window_end"]])
        rank = (r[at["emit_time"]], r[at["pane_index"]], r[at["is_retraction"]])
        if window not in last or rank > last[window][0]:
            last[window] = (rank, r)
    return {r[:-1] for _, r in last.values() if not r[at["is_retraction"]]}


def _committed_batches(ck: Path) -> int:
    """The last batch Spark's commit log records (the checkpoint's own word)."""
    return max(int(p.name) for p in (ck / "commits").iterdir() if p.name.isdigit())


def _cuts(rng: np.random.Generator, batches: int) -> list[tuple[str, int, str]]:
    """Three cuts, (sink, batch, place): the three places in a random order, each at a
    random sink and batch (never before the previous cut's: Spark committed those, they
    never run again), drawn again until every cut is one the runs reach."""
    for _ in range(1000):
        at = sorted(int(b) for b in rng.integers(0, batches, 3))
        plan = [(str(rng.choice(["table", "log"])), b, str(p))
                for b, p in zip(at, rng.permutation(PLACES), strict=True)]
        if _reached(plan):
            return plan
    raise AssertionError(f"no plan of cuts over {batches} batches is reached")


def _reached(plan: list[tuple[str, int, str]]) -> bool:
    """Whether each cut is reached: one after ``COPY`` is not in a sink that already
    committed its batch (the replay finds its progress row and copies nothing), which it
    did when it died there after its ``COMMIT``, or when it is the table and the
    changelog (written after the table) died there."""
    done = {"table": -1, "log": -1}
    for sink, batch, place in plan:
        if place == STAGED and done[sink] >= batch:
            return False
        if sink == "log":
            done["table"] = max(done["table"], batch)
        if place == COMMITTED:
            done[sink] = max(done[sink], batch)
    return True


def _run(spark, view: str, name: str, ck: Path, sink: _Both) -> str | None:
    """The query started on ``ck`` into ``sink`` and run to its end: None, or why it
    failed (a cut); the sink closed either way, as a dead process's would be."""
    from pyspark.errors import StreamingQueryException

    q = dfsql.start(QUERY.format(t=view), sink=sink, checkpoint=str(ck),
                    trigger={"availableNow": True}, name=name, spark=spark)
    try:
        q.awaitTermination()
        return None
    except StreamingQueryException as e:
        return str(e)
    finally:
        sink.close()


#: seeds whose plans between them cut each sink at each place: the changelog cut after
#: its COMMIT is the cut that shows a batch applied twice (a table's replayed batch
#: writes its windows' same rows again)
SEEDS = [3, 19]


def _plan(seed: int, files: int) -> list[tuple[str, int, str]]:
    return _cuts(np.random.default_rng(5500 + seed), files)


def test_the_examples_cut_each_sink_at_each_place():
    """(No Spark: the plans alone.) The seeds' plans over their files' batches."""
    files = {seed: int(np.random.default_rng(5400 + seed).integers(2, 4)) + 2
             for seed in SEEDS}  # _feed's first draw: its cuts, files = cuts + 2
    cut = {(sink, place) for seed in SEEDS for sink, _, place in _plan(seed, files[seed])}
    assert cut == {(sink, place) for sink in ("table", "log") for place in PLACES}


@pytest.mark.usefixtures("_no_leftover_streams")
@pytest.mark.parametrize("seed", SEEDS)
def test_the_tables_hold_the_replay_through_random_cuts(spark, pg, conn, tmp_path, seed):
    name, view = f"cuts_{seed}", f"cuts_src_{seed}"
    targets = {"table": name, "log": f"{name}_log"}
    src, files, frontier = _feed(spark, seed, tmp_path, view)
    ck = tmp_path / "ck"
    plan = _plan(seed, files)
    #: a died target's batch replayed after a cut after COMMIT: (batch, what it held)
    pending: dict[str, tuple[int, object]] = {}
    seen: dict[str, object] = {}

    def look(batch_id: int) -> None:
        for target, (b, _) in pending.items():
            if b == batch_id:
                seen[target] = _snapshot(pg, target, name)

    try:
        for cut in [*plan, None]:
            sinks = [kind(conn, "public", targets[which], query=name,
                          cut=cut[1:] if cut and cut[0] == which else None)
                     for which, kind in (("table", CutTable), ("log", CutChangelog))]
            failed = _run(spark, view, name, ck, _Both(sinks, look))
            for target in [t for t in pending if t in seen]:  # the replay changed nothing
                assert seen.pop(target) == pending.pop(target)[1], (target, plan)
            if cut is None:
                assert failed is None, failed
                break
            which, batch, place = cut
            assert failed and f"{targets[which]} died at batch {batch}, {place}" in failed, (
                plan, failed)
            if place == COMMITTED:
                held = _snapshot(pg, targets[which], name)
                assert pending.setdefault(targets[which], (batch, held))[1] == held
    finally:
        spark.catalog.dropTempView(view)
    assert not pending, (pending, plan)
    # one batch per file (a cut batch run again under its id, never two files merged)
    assert _committed_batches(ck) == files - 1
    _hold_to_the_replay(spark, pg, name, targets, src, frontier, ck)


def _hold_to_the_replay(spark, pg, name: str, targets: dict[str, str], src: Path,
                        frontier: datetime, ck: Path) -> None:
    replay = _replay(spark, src, frontier)
    assert any(r[-1] for r in replay), "no retraction: the example would show little"
    cols = ", ".join(COLUMNS)
    log = _select(pg, f'SELECT {cols}, batch_id, batch_row FROM public."{targets["log"]}"')
    assert Counter(r[:-2] for r in log) == Counter(replay)  # none doubled, none lost
    rows: dict[int, list[int]] = {}
    for r in log:
        rows.setdefault(r[-2], []).append(r[-1])
    assert all(sorted(v) == list(range(len(v))) for v in rows.values())  # batches whole
    table = _select(pg, f'SELECT {", ".join(COLUMNS[:-1])} FROM public."{targets["table"]}"')
    assert len(table) == len(set(table))
    assert set(table) == _current(replay)
    last = _committed_batches(ck)
    assert _select(pg, "SELECT target, batch_id FROM public.dfsql_progress WHERE query = "
                   f"'{name}' ORDER BY target") == sorted((t, last) for t in targets.values())
