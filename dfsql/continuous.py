"""Running the continuous-query statements (:mod:`dfsql.language.continuous`): one
registry per Spark application, so that any session — a Thrift client's, the shell's,
Python's — lists and stops the queries any other started.

The statements are run for :func:`dfsql.api.sql`, which passes its own ``start`` in: this
module sits below the API and does not import it (no cycle between the two).

A :class:`Keeper` (``dfsql serve --state-dir``, :mod:`dfsql.server.state`) makes the
queries outlive the process: with one set, every query checkpoints and keeps its table
where the keeper says, is written down before CREATE returns, and is forgotten by STOP
only. A kept query that could not be restarted is listed as failed until STOPped.

Each query belongs to the user who created it (:class:`Actor`, set by the endpoint for
its clients' statements): another user's STOP is refused with SQLSTATE 42501 unless that
user is an admin. Python and the shell run as the process itself, which may stop any."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from dfsql.errors import AnalysisError, DfsqlError, NotSupportedError, SourceError
from dfsql.language.continuous import Backfill, ContinuousStatement, parse_continuous
from dfsql.language.scan import Source
from dfsql.language.statement import parse_statement
from dfsql.spark.stream.checkpoint import committed_batches
from dfsql.spark.stream.sinks import TableSink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dfsql.language.statement import Statement


class Keeper(Protocol):
    """Where the continuous queries of a process are kept across its restarts."""

    def places(self, name: str, fresh: bool) -> tuple[str, str]:
        """(checkpoint, table directory) of the query ``name``; ``fresh``: a new query,
        so whatever an earlier one of that name left there goes."""
        ...

    def keep(self, stmt: ContinuousStatement, text: str, spark: SparkSession,
             owner: str | None) -> None:
        """Write the query down, with its owner (raise if it cannot be): a restart
        starts it again, still ``owner``'s."""
        ...

    def forget(self, name: str) -> str:
        """Remove the query ``name`` (its record, checkpoint and table); what was done."""
        ...


class Explainer(Protocol):
    """How a running query's windows are read from its state: the signature of
    :func:`dfsql.api.explain_running` (None: Spark's own operator runs it)."""

    def __call__(self, query: Statement | str, checkpoint: str,
                 where: tuple[int, str] | None, source: Source,
                 spark: SparkSession) -> DataFrame | None: ...


class Alterer(Protocol):
    """How ALTER STREAMING QUERY is checked and its history made: the signature of
    :func:`dfsql.api.alter_running`."""

    def __call__(self, query: Statement | str, old: Statement | str, checkpoint: str,
                 history: Backfill | None, source: Source, at: int,
                 spark: SparkSession) -> Callable[[], Backfill]: ...


class Starter(Protocol):
    """How a continuous query starts its stream: :func:`dfsql.api.start`'s signature."""

    def __call__(self, text: str | Statement, sink: object = ..., checkpoint: str | None = ...,
                 trigger: dict | None = ..., name: str | None = ...,
                 spark: SparkSession | None = ..., backfill: object = ...) -> object: ...


#: the name of dfsql's figures in a batch's progress (dfsql.spark.stream.plan.METRICS, not
#: imported: that module loads Spark's and numpy's, which ``import dfsql`` does not)
METRICS = "dfsql"


@dataclass
class Totals:
    """A query's figures over all its micro-batches so far, folded from Spark's progress
    reports (one per batch): a report says what its batch did, and the last one is
    often a batch without data (input 0, no dfsql figures), which SHOW must not take for
    the query's state.

    * input_rows: every batch's ``numInputRows``, summed;
    * watermark: the latest batch's that has one — dfsql's own (the executor's
      ``observedMetrics``), else Spark's ``eventTime.watermark`` (Spark's own operator);
    * state: the elements dfsql's executor retains (its batches' ``state_change``,
      summed: every bucket, also those the last batch did not run), or the rows Spark's
      own operator keeps (``stateOperators[].numRowsTotal`` of the latest batch);
    * frontier, rows_latest, marks_latest: dfsql's executor's, of the latest batch that
      has them: the query's clock, and each input's latest processing time (the rows,
      and a ``WATERMARK FROM`` stream of marks).

    Spark keeps the last ``spark.sql.streaming.numRecentProgressUpdates`` reports (100):
    SHOW folds those it has not seen, so totals stay exact while SHOW runs at least that
    often."""

    last_batch: int = -1
    input_rows: int = 0
    watermark: str | None = None
    state: int | None = None
    frontier: str | None = None
    rows_latest: str | None = None
    marks_latest: str | None = None

    def fold(self, progress: list) -> None:
        for p in progress:
            batch = int(p["batchId"])
            if batch <= self.last_batch:
                continue
            self.last_batch = batch
            self.input_rows += int(p.get("numInputRows") or 0)
            ours = (p.get("observedMetrics") or {}).get(METRICS)
            ours = ours.asDict() if hasattr(ours, "asDict") else (ours or {})
            spark_wm = (p.get("eventTime") or {}).get("watermark")
            if ours.get("watermark") is not None:
                self.watermark = str(ours["watermark"])
            elif spark_wm and not spark_wm.startswith("1970-01-01T00:00:00"):  # none yet
                self.watermark = spark_wm.replace("T", " ").rstrip("Z").removesuffix(".000")
            if ours.get("frontier") is not None or ours.get("rows_latest") is not None:
                self.frontier, self.rows_latest, self.marks_latest = (
                    None if ours.get(k) is None else str(ours[k])
                    for k in ("frontier", "rows_latest", "marks_latest"))
            if "state_change" in ours:  # dfsql's executor (None: no bucket ran)
                self.state = (self.state or 0) + int(ours["state_change"] or 0)
            elif p.get("stateOperators"):
                self.state = sum(int(op.get("numRowsTotal") or 0)
                                 for op in p["stateOperators"])


class NotOwnerError(DfsqlError):
    """A statement that would change another user's continuous query (or its view)."""

    sqlstate = "42501"


@dataclass(frozen=True)
class Actor:
    """Who runs a statement: an endpoint client's ``user`` (None: this process itself,
    Python or the shell, which owns nothing and may stop anything) and whether that user
    is an admin (``dfsql serve --admin``), who may stop any user's queries."""

    user: str | None = None
    admin: bool = False

    def may_change(self, owner: str | None) -> bool:
        """Whether it may stop (or drop the view of) a query of ``owner`` (None: a query
        with no owner, made by the process itself or kept from before owners were)."""
        return self.user is None or self.admin or owner is None or owner == self.user


#: who runs the current statement (None: the process itself)
_ACTOR: ContextVar[Actor | None] = ContextVar("dfsql_continuous_actor", default=None)


def _actor() -> Actor:
    return _ACTOR.get() or Actor()


def actor() -> Actor:
    """Who runs the current statement."""
    return _actor()


@contextmanager
def acting_as(actor: Actor) -> Iterator[None]:
    """Run the statements of the block as ``actor`` (the endpoint: a client's user)."""
    token = _ACTOR.set(actor)
    try:
        yield
    finally:
        _ACTOR.reset(token)


def owners() -> dict[str, str | None]:
    """Every registered query's name and owner (running, or kept but failed)."""
    with _LOCK:
        return {**{f.name: f.owner for f in _FAILED.values()},
                **{r.name: r.owner for r in _RUNNING.values()}}


def not_owner(name: str, owner: str | None, what: str) -> str:
    """The refusal's words: whose the query is, and who may."""
    return (f"the continuous query {name} belongs to user {owner!r}: {what} is theirs or "
            "an admin's (dfsql serve --admin)")


@dataclass
class Running:
    name: str
    query: object  # pyspark StreamingQuery
    sink: str
    checkpoint: str
    text: str
    started: float
    owner: str | None = None
    totals: Totals = field(default_factory=Totals)
    #: where its panes go (the TableSink object, or the directory)
    sink_object: object = None
    #: (version, the frontier it took effect at; None: from the start), ALTER's
    versions: tuple[tuple[int, str | None], ...] = ((1, None),)


@dataclass
class Failed:
    """A kept query that could not be started again (its input gone, say): listed by SHOW
    with the reason until STOP forgets it."""

    name: str
    sink: str
    reason: str
    since: float
    owner: str | None = None


_RUNNING: dict[str, Running] = {}
_FAILED: dict[str, Failed] = {}
_LOCK = threading.Lock()
#: where this process keeps its queries (None: in memory only, gone with the process)
_KEEPER: Keeper | None = None


def keep_with(keeper: Keeper | None) -> None:
    """Keep every continuous query of this process with ``keeper`` from now on (None:
    no longer; the failed entries of the old one go too)."""
    global _KEEPER
    with _LOCK:
        if keeper is not None and _KEEPER is not None and _KEEPER is not keeper:
            raise DfsqlError("this process already keeps its continuous queries elsewhere",
                             hint="one --state-dir per process")
        _KEEPER = keeper
        if keeper is None:
            _FAILED.clear()


def restart(stmt: ContinuousStatement, text: str, spark: SparkSession,
            start: Starter, owner: str | None = None) -> None:
    """Start a kept query again, from its checkpoint, its table from the kept rows, as
    ``owner``'s again."""
    with acting_as(Actor(owner)):
        _create(stmt, text, spark, start, restarting=True)
    with _LOCK:
        _FAILED.pop(stmt.name or "", None)


def failed(name: str, sink: str, reason: str, owner: str | None = None) -> None:
    """Record that the kept query ``name`` (into ``sink``) could not start again."""
    with _LOCK:
        _FAILED[name] = Failed(name, sink, reason, time.time(), owner)

SHOW_SCHEMA = ("name STRING, id STRING, status STRING, sink STRING, batches BIGINT, "
               "input_rows BIGINT, input_rows_per_second DOUBLE, "
               "processed_rows_per_second DOUBLE, watermark STRING, state_elements BIGINT, "
               "frontier STRING, inputs STRING, held_by STRING, versions STRING, "
               "started TIMESTAMP, owner STRING")


def run(stmt: ContinuousStatement, text: str, spark: SparkSession, start: Starter,
        explain: Explainer | None = None, alter: Alterer | None = None) -> DataFrame:
    """CREATE (its query started with ``start``), SHOW or STOP STREAMING QUERY, EXPLAIN
    FIRINGS FOR STREAMING QUERY (its query's state read with ``explain``) or ALTER
    STREAMING QUERY (what it read made the new query's history by ``alter``)."""
    if stmt.kind == "show":
        return _show(spark)
    if stmt.kind == "stop":
        return _stop(stmt, text, spark)
    if stmt.kind == "explain":
        assert explain is not None
        return _explain(stmt, text, spark, explain)
    if stmt.kind == "alter":
        assert alter is not None
        return _alter(stmt, text, spark, start, alter)
    return _create(stmt, text, spark, start)


def _running(stmt: ContinuousStatement, src: Source, what: str) -> Running:
    """The running query the statement names, if the actor may ``what`` it."""
    assert stmt.name is not None
    with _LOCK:
        r = _RUNNING.get(stmt.name)
    if r is None:
        raise src.error(AnalysisError, f"no continuous query named {stmt.name} is running",
                        stmt.name_offset, "SHOW STREAMING QUERIES lists them")
    if not _actor().may_change(r.owner):
        raise src.error(NotOwnerError, not_owner(stmt.name, r.owner, what),
                        stmt.name_offset, "SHOW STREAMING QUERIES names each query's owner")
    return r


def _alter(stmt: ContinuousStatement, text: str, spark: SparkSession, start: Starter,
           alter: Alterer) -> DataFrame:
    """ALTER STREAMING QUERY (LANGUAGE.md §8c): checked while the old query runs (a
    refusal leaves it running unchanged); then it stops at its last completed
    micro-batch and the new query starts from everything it read, its table restated
    by the new query's first micro-batch. Should the new query not start, the old one
    starts again from its checkpoint: one of them always runs."""
    src = Source(text)
    r = _running(stmt, src, "ALTER")
    if _KEEPER is not None:
        raise src.error(NotSupportedError, "ALTER STREAMING QUERY is not kept across "
                        "restarts yet (this server keeps its queries in --state-dir)", 0,
                        "STOP the query and CREATE it again with the new query")
    created = parse_continuous(r.text)
    assert created is not None and created.kind == "create"
    if created.sink != "table":
        raise src.error(NotSupportedError, "ALTER STREAMING QUERY restates an INTO TABLE "
                        "query's table; an INTO DIRECTORY query's files cannot be "
                        "restated yet", stmt.name_offset, "STOP the query and CREATE it "
                        "again with the new query over a new directory")
    query = stmt.query_statement
    if stmt.statement is None:  # the new query's own mistake, placed where written
        parse_statement(stmt.query, stmt.query_scanned)
    history = alter(query, created.query_statement, r.checkpoint, created.backfill, src,
                    stmt.query_offset, spark)
    r.totals.fold(r.query.recentProgress)  # type: ignore[attr-defined]
    r.query.stop()  # type: ignore[attr-defined]
    version = r.versions[-1][0] + 1
    checkpoint = tempfile.mkdtemp(prefix=f"dfsql-{stmt.name}-v{version}-") \
        if created.checkpoint is None else f"{created.checkpoint.rstrip('/')}/alter-v{version}"
    sink = TableSink(r.name, global_view=True)
    try:
        new = start(query, sink=sink, checkpoint=checkpoint, name=r.name, spark=spark,
                    backfill=history())
    except BaseException:
        old = start(created.query_statement, sink=r.sink_object, checkpoint=r.checkpoint,
                    name=r.name, spark=spark)
        with _LOCK:
            _RUNNING[r.name] = replace(r, query=old)
        raise
    frontier = r.totals.frontier
    body = stmt.query[stmt.query_offset:]
    with _LOCK:
        _RUNNING[r.name] = replace(
            r, query=new, checkpoint=checkpoint, sink_object=sink, totals=Totals(),
            text=f"CREATE STREAMING QUERY {r.name} AS {body}",
            versions=(*r.versions, (version, frontier)))
    return spark.createDataFrame([(r.name, str(new.id), version, frontier, checkpoint)],
                                 "name STRING, id STRING, version BIGINT, "
                                 "from_frontier STRING, checkpoint STRING")


def _explain(stmt: ContinuousStatement, text: str, spark: SparkSession,
             explain: Explainer) -> DataFrame:
    """EXPLAIN FIRINGS FOR STREAMING QUERY: its owner's (or an admin's), as STOP is: the
    rows show the values of whatever the query reads."""
    src = Source(text)
    r = _running(stmt, src, "EXPLAIN")
    if not committed_batches(spark, r.checkpoint):
        raise src.error(DfsqlError, f"{stmt.name} has not completed a micro-batch yet: it "
                        "has no state to explain", stmt.name_offset,
                        "SHOW STREAMING QUERIES shows its inputs' latest processing times")
    created = parse_continuous(r.text)
    assert created is not None and created.kind == "create"
    rows = explain(created.query_statement, r.checkpoint, stmt.where, src, spark)
    if rows is None:
        raise src.error(NotSupportedError, f"{stmt.name} runs on Spark's own streaming "
                        "aggregation, whose state dfsql does not read", stmt.name_offset,
                        "a query with PROCESSING TIME, a TRIGGER or EMIT … RETRACTING runs "
                        "in dfsql's bucket processor, which EXPLAIN FIRINGS reads")
    return rows


def _create(stmt: ContinuousStatement, text: str, spark: SparkSession,
            start: Starter, restarting: bool = False) -> DataFrame:
    src = Source(text)
    assert stmt.name is not None
    keeper = _KEEPER
    owner = _actor().user
    with _LOCK:
        old = _RUNNING.get(stmt.name)
        if old is not None and old.query.isActive:  # type: ignore[attr-defined]
            raise src.error(DfsqlError, f"a continuous query named {stmt.name} is running",
                            stmt.name_offset, f"STOP STREAMING QUERY {stmt.name} first, or "
                                              "choose another name")
        if stmt.name in _FAILED and not restarting:
            raise src.error(DfsqlError, f"a continuous query named {stmt.name} is kept but "
                            "failed to start again", stmt.name_offset,
                            f"STOP STREAMING QUERY {stmt.name} forgets it")
    table_path = None
    if keeper is not None:
        checkpoint, table_path = keeper.places(stmt.name, fresh=not restarting)
        checkpoint = stmt.checkpoint or checkpoint
    else:
        checkpoint = stmt.checkpoint or tempfile.mkdtemp(prefix=f"dfsql-{stmt.name}-")
    if stmt.sink == "directory":
        sink: object = stmt.path
        where = f"directory {stmt.path}"
    else:
        sink = TableSink(stmt.name, path=table_path, global_view=True)
        where = f"table global_temp.{stmt.name}"
    try:
        query = start(stmt.query_statement, sink=sink, checkpoint=checkpoint, name=stmt.name,
                      spark=spark, backfill=stmt.backfill)
    except SourceError as e:
        if e.line == 1 and e.column == 1:  # "not over a stream": point at the query
            p = src.pos(stmt.query_offset)
            raise SourceError(e.message.replace("dfsql.start runs",
                                                "CREATE STREAMING QUERY runs"),
                              p.line, p.column, e.hint) from None
        raise
    if keeper is not None and not restarting:
        try:  # written down before CREATE answers: a query reported started is kept
            keeper.keep(stmt, text, spark, owner)
        except BaseException:
            query.stop()
            raise
    with _LOCK:
        _RUNNING[stmt.name] = Running(stmt.name, query, where, checkpoint, text, time.time(),
                                      owner, sink_object=sink)
    return spark.createDataFrame([(stmt.name, str(query.id), where, checkpoint)],
                                 "name STRING, id STRING, sink STRING, checkpoint STRING")


def _stop(stmt: ContinuousStatement, text: str, spark: SparkSession) -> DataFrame:
    assert stmt.name is not None
    actor = _actor()
    with _LOCK:
        known = _RUNNING.get(stmt.name) or _FAILED.get(stmt.name)
        if known is not None and not actor.may_change(known.owner):
            raise Source(text).error(NotOwnerError, not_owner(stmt.name, known.owner, "STOP"),
                                     stmt.name_offset, "SHOW STREAMING QUERIES names each "
                                     "query's owner")
        r = _RUNNING.pop(stmt.name, None)
        gone = _FAILED.pop(stmt.name, None)
        keeper = _KEEPER
    if r is None and gone is None:
        raise Source(text).error(AnalysisError, f"no continuous query named {stmt.name}",
                                 stmt.name_offset, "SHOW STREAMING QUERIES lists them")
    if r is not None:
        r.query.stop()  # type: ignore[attr-defined]
    if keeper is None:
        return spark.createDataFrame([(stmt.name, "STOPPED")], "name STRING, status STRING")
    note = keeper.forget(stmt.name)
    return spark.createDataFrame([(stmt.name, "STOPPED", note)],
                                 "name STRING, status STRING, kept STRING")


def _show(spark: SparkSession) -> DataFrame:
    from datetime import datetime, timezone

    rows = []
    with _LOCK:
        running = list(_RUNNING.values())
        failed_now = sorted(_FAILED.values(), key=lambda f: f.name)
    for r in sorted(running, key=lambda r: r.started):
        q = r.query
        status = "RUNNING" if q.isActive else "STOPPED"  # type: ignore[attr-defined]
        error = q.exception() if not q.isActive else None  # type: ignore[attr-defined]
        if error is not None:
            status = "FAILED: " + (str(error).strip().splitlines() or ["?"])[0]
        t = r.totals
        t.fold(q.recentProgress)  # type: ignore[attr-defined]
        p = q.lastProgress or {}  # type: ignore[attr-defined]
        rows.append((r.name, str(q.id), status, r.sink,  # type: ignore[attr-defined]
                     t.last_batch + 1, t.input_rows,
                     float(p.get("inputRowsPerSecond", 0.0) or 0.0),
                     float(p.get("processedRowsPerSecond", 0.0) or 0.0),
                     t.watermark, t.state, t.frontier, *inputs_shown(t),
                     versions_shown(r.versions),
                     datetime.fromtimestamp(r.started, timezone.utc).replace(tzinfo=None),
                     r.owner))
    for f in failed_now:
        rows.append((f.name, None, f"FAILED: {f.reason}", f.sink, None, None, 0.0, 0.0, None,
                     None, None, None, None, None,
                     datetime.fromtimestamp(f.since, timezone.utc).replace(tzinfo=None),
                     f.owner))
    return spark.createDataFrame(rows, SHOW_SCHEMA)


def versions_shown(versions: tuple[tuple[int, str | None], ...]) -> str:
    """SHOW's ``versions``: each version of the query (ALTER STREAMING QUERY makes one)
    and the frontier it took effect at."""
    return "; ".join(f"v{v} from " + (f"{at}" if at else "the start") for v, at in versions)


def inputs_shown(t: Totals) -> tuple[str | None, str | None]:
    """SHOW's ``inputs`` (each input's latest processing time) and ``held_by`` (the
    input the frontier stands at: the one the query waits for; several inputs on one
    clock stand at the earliest, LANGUAGE.md §4)."""
    if t.rows_latest is None:
        return None, None
    if t.marks_latest is None and t.frontier == t.rows_latest:  # one input
        return f"rows: {t.rows_latest}", "rows"
    latest = {"rows": t.rows_latest, "marks": t.marks_latest or "nothing yet"}
    shown = "; ".join(f"{k}: {v}" for k, v in latest.items())
    if t.frontier is None:  # an input that sent nothing holds the clock
        return shown, "marks"
    held = [k for k, v in latest.items() if v == t.frontier]
    return shown, " and ".join(held) or None


def stop_all() -> None:
    """Stop every continuous query (a server shutting down); a :class:`Keeper` keeps
    them, for the next start."""
    with _LOCK:
        running = list(_RUNNING.values())
        _RUNNING.clear()
    for r in running:
        try:
            r.query.stop()  # type: ignore[attr-defined]
        except Exception:
            pass
