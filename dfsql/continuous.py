"""Running the continuous-query statements (:mod:`dfsql.language.continuous`): one
registry per Spark application, so that any session — a Thrift client's, the shell's,
Python's — lists and stops the queries any other started.

The statements are run for :func:`dfsql.api.sql`; their queries are planned, started and
read by :mod:`dfsql.planning`, below this module (nothing here calls back up to the API).

A :class:`Keeper` (``dfsql serve --state-dir``, :mod:`dfsql.server.state`) makes the
queries outlive the process: with one set, every query checkpoints and keeps its table
where the keeper says, is written down before CREATE returns, and is forgotten by STOP
only. A kept query that could not be restarted is listed as failed until STOPped, or
STARTed again once the cause is fixed (its history is never the cause: a version that
has completed a micro-batch restarts from its checkpoint without it).

Each query belongs to the user who created it (:class:`Actor`, set by the endpoint for
its clients' statements): another user's STOP is refused with SQLSTATE 42501 unless that
user is an admin. Python and the shell run as the process itself, which may stop any."""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from dfsql import continuous_revival as revival
from dfsql.continuous_actors import Actor, NotOwnerError, acting_as, not_owner, start_refusal
from dfsql.continuous_actors import actor as _actor
from dfsql.continuous_kept import Altered, Keeper, drop_old_places
from dfsql.continuous_queries import QUERIES, Running
from dfsql.continuous_show import Totals, current_totals, show_queries
from dfsql.errors import (
    AnalysisError,
    DatabaseError,
    DfsqlError,
    NotSupportedError,
    SourceError,
)
from dfsql.language.continuous import (
    Backfill,
    ContinuousStatement,
    parse_continuous,
    string_literal,
)
from dfsql.language.scan import Source
from dfsql.language.statement import parse_statement
from dfsql.planning import alter_running, explain_running, start
from dfsql.session import spark_context
from dfsql.spark.stream import progress_log
from dfsql.spark.stream.checkpoint import committed_batches
from dfsql.spark.stream.sink import Restatement, restated
from dfsql.spark.stream.sinks import statement_into

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, SparkSession


def owners() -> dict[str, str | None]:
    """Every registered query's name and owner (running, or kept but failed)."""
    return QUERIES.owners()


def keep_with(keeper: Keeper | None) -> None:
    """Keep every continuous query of this process with ``keeper`` from now on (None:
    no longer; the failed entries of the old one go too)."""
    QUERIES.keep_with(keeper)


def restart(stmt: ContinuousStatement, text: str, spark: SparkSession,
            owner: str | None = None, altered: Altered | None = None,
            history: Backfill | None = None) -> None:
    """Start a kept query again, from its checkpoint, its table from the kept rows, as
    ``owner``'s again; an altered one with the history ALTER gave it (used only if it
    had not completed a micro-batch)."""
    with acting_as(Actor(owner)):
        _create(stmt, text, spark, restarting=True, altered=altered, history=history)
    QUERIES.started_again(stmt.name or "")


def failed(name: str, sink: str, reason: str, owner: str | None = None) -> None:
    """Record that the kept query ``name`` (into ``sink``) could not start again (one of
    that name whose stream had died is then listed with this reason only)."""
    QUERIES.fail(name, sink, reason, owner)


def run(stmt: ContinuousStatement, text: str, spark: SparkSession) -> DataFrame:
    """CREATE (its query started by :func:`dfsql.planning.start`), SHOW, STOP or START
    STREAMING QUERY, EXPLAIN FIRINGS FOR STREAMING QUERY (its query's state read by
    :func:`~dfsql.planning.explain_running`) or ALTER STREAMING QUERY (checked, and what
    it read made the new query's history, by :func:`~dfsql.planning.alter_running`)."""
    if stmt.kind == "show":
        return _show(spark)
    if stmt.kind == "stop":
        return _stop(stmt, text, spark)
    if stmt.kind == "start":
        return _start(stmt, text, spark)
    if stmt.kind == "explain":
        return _explain(stmt, text, spark)
    if stmt.kind == "alter":
        return _alter(stmt, text, spark)
    return _create(stmt, text, spark)


def _running(stmt: ContinuousStatement, src: Source, what: str) -> Running:
    """The running query the statement names, if the actor may ``what`` it."""
    assert stmt.name is not None
    with QUERIES.lock:
        r = QUERIES.running.get(stmt.name)
    if r is None:
        raise src.error(AnalysisError, f"no continuous query named {stmt.name} is running",
                        stmt.name_offset, "SHOW STREAMING QUERIES lists them")
    if not _actor().may_change(r.owner):
        raise src.error(NotOwnerError, not_owner(stmt.name, r.owner, what),
                        stmt.name_offset, "SHOW STREAMING QUERIES names each query's owner")
    return r


def _alter(stmt: ContinuousStatement, text: str, spark: SparkSession) -> DataFrame:
    """ALTER STREAMING QUERY (docs/guides/streams.md#continuous-queries-as-statements): checked while the old query runs (a
    refusal leaves it running unchanged); then it stops at its last completed
    micro-batch and the new query starts from everything it read, its sink restated by
    the new query's first micro-batch (a table whole; a directory by retractions and
    RESTATED rows). Should the new query not start, the old one starts again from its
    checkpoint: one of them always runs."""
    src = Source(text)
    r = _running(stmt, src, "ALTER")
    if spark_context(spark) is None:
        raise src.error(NotSupportedError, "ALTER STREAMING QUERY reads the stream's plan "
                        "and checkpoint in the Spark application itself, which Spark "
                        "Connect keeps on its server", stmt.query_offset, "STOP the query "
                        "and CREATE the new one, or run dfsql on classic Spark")
    created = r.created()
    written = statement_into(r.name, created.sink, created.path, created.target)
    reader_rows = written.reader_rows  # restated by retractions (None: whole)
    query = stmt.query_statement
    if stmt.statement is None:  # the new query's own mistake, placed where written
        parse_statement(stmt.query, stmt.query_scanned)
    change = alter_running(query, created.query_statement, r.checkpoint, r.history, src,
                           stmt.query_offset, spark, reader_rows)
    keeper, version = QUERIES.keeper, r.versions[-1][0] + 1
    table_path = None
    if keeper is not None:  # each version in places of its own: the old ones stay whole
        checkpoint, table_path = keeper.places(r.name, fresh=True, version=version)
    else:
        checkpoint = tempfile.mkdtemp(prefix=f"dfsql-{stmt.name}-v{version}-")
    if created.checkpoint is not None:
        checkpoint = f"{created.checkpoint.rstrip('/')}/alter-v{version}"
    # the frontier of its last completed micro-batch, and its figures, which the new
    # version's log starts from
    totals = _stopped(r, spark)
    body = stmt.query[stmt.query_offset:]
    head = "" if created.checkpoint is None else f" CHECKPOINT {string_literal(checkpoint)}"
    into = written.clause
    new_text = f"CREATE STREAMING QUERY {r.name}{head}{into} AS {body}"
    versions = (*r.versions, (version, totals.frontier))
    switched = False
    try:
        history = change.history()
        # the changed query's sink over the old one's place (a table readers keep until
        # the restated one; a directory's log, its current rows retracted)
        sink, base = restated(r.sink_object, Restatement(
            spark, r.name, r.checkpoint, table_path, change.retractions,
            lambda message, hint: src.error(DfsqlError, message, stmt.name_offset, hint)))
        altered = Altered(versions, change.stream, history.skip, _first_backfill(r), base)
        if keeper is not None:  # the switch, before the new query can write a row: the
            # record replaced whole, or not at all (a kill after it starts the new one)
            keeper.keep(parse_continuous(new_text), new_text, spark, r.owner, altered)
            switched = True
        progress_log.write_base(spark, checkpoint, totals.as_base())
        progress_log.watch(spark, r.name, checkpoint)
        new = start(query, sink=sink, checkpoint=checkpoint, name=r.name, spark=spark,
                    backfill=history)
    except BaseException:  # the old query goes on, as it was, and is kept as it was
        if switched:
            keeper.keep(created, r.text, spark, r.owner, r.altered)  # type: ignore[union-attr]
        progress_log.watch(spark, r.name, r.checkpoint)
        old = start(created.query_statement, sink=r.sink_object, checkpoint=r.checkpoint,
                    name=r.name, spark=spark)
        QUERIES.run(replace(r, query=old))
        raise
    if keeper is not None and created.checkpoint is None:
        drop_old_places(keeper, r.name, r.versions[-1][0])
    QUERIES.run(replace(r, query=new, checkpoint=checkpoint, sink_object=sink,
                        text=new_text, history=history, altered=altered))
    frontier = versions[-1][1]
    return spark.createDataFrame([(r.name, str(new.id), version, frontier, checkpoint)],
                                 "name STRING, id STRING, version BIGINT, "
                                 "from_frontier STRING, checkpoint STRING")


def _first_backfill(r: Running) -> str | None:
    """The first version's BACKFILL FROM (as Spark reads it), which every version's
    history holds."""
    if r.altered is not None:
        return r.altered.backfill
    return r.history.sql if r.history is not None else None


def _explain(stmt: ContinuousStatement, text: str, spark: SparkSession) -> DataFrame:
    """EXPLAIN FIRINGS FOR STREAMING QUERY: its owner's (or an admin's), as STOP is: the
    rows show the values of whatever the query reads."""
    src = Source(text)
    r = _running(stmt, src, "EXPLAIN")
    if not committed_batches(spark, r.checkpoint):
        raise src.error(DfsqlError, f"{stmt.name} has not completed a micro-batch yet: it "
                        "has no state to explain", stmt.name_offset,
                        "SHOW STREAMING QUERIES shows its inputs' latest processing times")
    rows = explain_running(r.created().query_statement, r.checkpoint, stmt.where, src,
                           spark)
    if rows is None:
        raise src.error(NotSupportedError, f"{stmt.name} runs on Spark's own streaming "
                        "aggregation, whose state dfsql does not read", stmt.name_offset,
                        "a query with PROCESSING TIME, a TRIGGER or EMIT … RETRACTING runs "
                        "in dfsql's bucket processor, which EXPLAIN FIRINGS reads")
    return rows


def _create(stmt: ContinuousStatement, text: str, spark: SparkSession,
            restarting: bool = False, altered: Altered | None = None,
            history: Backfill | None = None) -> DataFrame:
    src = Source(text)
    assert stmt.name is not None
    keeper = QUERIES.keeper
    owner = _actor().user
    with QUERIES.lock:
        old = QUERIES.running.get(stmt.name)
        if old is not None and old.query.isActive:  # type: ignore[attr-defined]
            raise src.error(DfsqlError, f"a continuous query named {stmt.name} is running",
                            stmt.name_offset, f"STOP STREAMING QUERY {stmt.name} first, or "
                                              "choose another name")
        if stmt.name in QUERIES.failed and not restarting:
            raise src.error(DfsqlError, f"a continuous query named {stmt.name} is kept but "
                            "failed to start again", stmt.name_offset,
                            f"STOP STREAMING QUERY {stmt.name} forgets it")
    with _at_the_table(stmt, src):  # an unknown connection
        into = statement_into(stmt.name, stmt.sink, stmt.path, stmt.target)
    if into.classic_only is not None and spark_context(spark) is None:
        raise src.error(NotSupportedError, into.classic_only[0], stmt.name_offset,
                        into.classic_only[1])
    table_path = None
    if keeper is not None:
        checkpoint, table_path = keeper.places(stmt.name, fresh=not restarting,
                                               version=altered.version if altered else 1)
        checkpoint = stmt.checkpoint or checkpoint
    else:
        checkpoint = stmt.checkpoint or tempfile.mkdtemp(prefix=f"dfsql-{stmt.name}-")
    previous = None  # a changed query's: its version before, until its first batch
    if keeper is not None and altered is not None and altered.version > 1:
        previous = keeper.places(stmt.name, fresh=False, version=altered.version - 1)[1]
    sink = into.sink(table_path, altered is not None,
                     None if altered is None else altered.log_base, previous)
    where = into.where
    try:
        history = history or stmt.backfill
        progress_log.watch(spark, stmt.name, checkpoint)
        if keeper is not None:  # a stream whose Python worker did not start: again
            revival.watch(spark)
        with _at_the_table(stmt, src):  # a refused login, a table that does not match
            query = start(stmt.query_statement, sink=sink, checkpoint=checkpoint,
                          name=stmt.name, spark=spark, backfill=history)
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
    QUERIES.run(Running(
        stmt.name, query, where, checkpoint, text, time.time(), owner, sink_object=sink,
        history=history, altered=altered))
    return spark.createDataFrame([(stmt.name, str(query.id), where, checkpoint)],
                                 "name STRING, id STRING, sink STRING, checkpoint STRING")


@contextlib.contextmanager
def _at_the_table(stmt: ContinuousStatement, src: Source) -> Iterator[None]:
    """A database's error, which knows no statement, placed at the table's name (INTO
    TABLE / CHANGELOG NAME.schema.table)."""
    try:
        yield
    except DatabaseError as e:
        if e.line is None and stmt.target is not None:
            p = src.pos(stmt.target_offset)
            raise DatabaseError(e.message, p.line, p.column, e.hint) from None
        raise


def _stop(stmt: ContinuousStatement, text: str, spark: SparkSession) -> DataFrame:
    assert stmt.name is not None
    actor = _actor()
    with QUERIES.lock:
        known = QUERIES.running.get(stmt.name) or QUERIES.failed.get(stmt.name)
        if known is not None and not actor.may_change(known.owner):
            raise Source(text).error(NotOwnerError, not_owner(stmt.name, known.owner, "STOP"),
                                     stmt.name_offset, "SHOW STREAMING QUERIES names each "
                                     "query's owner")
        r, gone, keeper = QUERIES.drop(stmt.name)
    if r is None and gone is None:
        raise Source(text).error(AnalysisError, f"no continuous query named {stmt.name}",
                                 stmt.name_offset, "SHOW STREAMING QUERIES lists them")
    if r is not None:
        _stopped(r, spark)
        progress_log.unwatch(stmt.name)
    if keeper is None:
        return spark.createDataFrame([(stmt.name, "STOPPED")], "name STRING, status STRING")
    note = keeper.forget(stmt.name)
    return spark.createDataFrame([(stmt.name, "STOPPED", note)],
                                 "name STRING, status STRING, kept STRING")


def _start(stmt: ContinuousStatement, text: str, spark: SparkSession) -> DataFrame:
    """START STREAMING QUERY: a kept query SHOW lists as failed, started again from its
    record and checkpoint as a server's start does (its owner's, or an admin's, to do)."""
    assert stmt.name is not None
    src = Source(text)
    with QUERIES.starting:  # one START at a time: a second one of the same query is refused
        with QUERIES.lock:
            r, f = QUERIES.running.get(stmt.name), QUERIES.failed.get(stmt.name)
            keeper = QUERIES.keeper
        known = r or f
        refused = start_refusal(stmt.name, None if known is None else known.owner,
                                known is not None,
                                r is not None and r.query.isActive,  # type: ignore
                                keeper is not None, _actor())
        if refused is not None:
            raise src.error(refused[0], refused[1], stmt.name_offset, refused[2])
        assert keeper is not None
        why = keeper.start_again(stmt.name)
    if why is not None:
        raise src.error(DfsqlError, f"{stmt.name} did not start again: {why}",
                        stmt.name_offset, "SHOW STREAMING QUERIES lists it as failed with "
                        "the reason: START it again once the cause is fixed, or STOP it")
    with QUERIES.lock:
        new = QUERIES.running[stmt.name]
    return spark.createDataFrame([(stmt.name, str(new.query.id), "RUNNING",  # type: ignore
                                   new.checkpoint)],
                                 "name STRING, id STRING, status STRING, checkpoint STRING")


def _show(spark: SparkSession) -> DataFrame:
    running, failed_now = QUERIES.listed()
    return show_queries(spark, running, failed_now)


def stop_all() -> None:
    """Stop every continuous query (a server shutting down); a :class:`Keeper` keeps
    them, for the next start."""
    running = QUERIES.drain()
    for r in running:
        try:
            _stopped(r, None)
        except Exception:  # noqa: BLE001 (the others stop all the same)
            pass


def _stopped(r: Running, spark: SparkSession | None) -> Totals:
    """Stop a running query and write the batches Spark reported before it stopped into
    its progress log (the listener may not have had them yet): what a restart or the
    next version starts from."""
    r.query.stop()  # type: ignore[attr-defined]
    return current_totals(spark, r.query, r.checkpoint)
