"""``dfsql serve --state-dir DIR``: continuous queries that outlive the server.

Every ``CREATE STREAMING QUERY`` is written down in DIR before the statement answers,
and every query written there starts again, from its checkpoint, when a server starts on
DIR; ``STOP STREAMING QUERY`` is the only thing that removes one. DIR holds::

    queries/<name>.json      the statement, its owner (the user who created it), its
                             sink, checkpoint and the --stream registrations it reads
                             (schema included); after ALTER, its versions and history
    checkpoints/<name>/      Spark's checkpoint (offsets, commits, state)
    tables/<name>/           an INTO TABLE query's rows after its last batch, with that
                             batch's id (dfsql.spark.stream.sinks.TableSink)
    checkpoints/<name>.vN/   version N's, after ALTER STREAMING QUERY: each version has
    tables/<name>.vN/        places of its own, and its record names them

ALTER switches versions by replacing the record (a temporary file renamed): a kill
before that starts the old version again, untouched; after it, the new one, which
backfills again from the record's history until its first micro-batch completes.

Exactly once across a kill: Spark replays the batch whose commit it had not written, and
the table applies a batch id it has already applied as nothing (and one half-applied
again, which is the same). A query that cannot be planned any more (its input gone) is
listed by SHOW STREAMING QUERIES as failed, with the reason; the server starts anyway.
A lock on DIR keeps a second server off it (two would run each query twice).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dfsql import continuous
from dfsql.errors import DfsqlError
from dfsql.language.continuous import Backfill, ContinuousStatement, parse_any
from dfsql.server.operations import describe
from dfsql.server.settings import text_only
from dfsql.server.streams import StreamView
from dfsql.spark.errors import quiet_spark_loggers
from dfsql.spark.stream.alter import file_stream, history_of, unread_history
from dfsql.spark.stream.backfill import needed as backfill_needed
from dfsql.spark.stream.sinks import statement_into

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dfsql.server.judge import Judge

#: the record's format; a record of another version is reported, not guessed at
VERSION = 1


def file_name(name: str) -> str:
    """A query's name as a file name: letters, digits, ``_`` and ``-`` as themselves,
    anything else (``/``, ``.``, a space) as ``%XX``; distinct names stay distinct."""
    return "".join(c if c.isalnum() or c in "_-" else "".join(f"%{b:02X}" for b in
                                                              c.encode()) for c in name)


def one_line(e: BaseException) -> str:
    """Why a kept query did not start again, in one line (no position, hint or stack)."""
    if isinstance(e, DfsqlError):
        return e.message
    return (describe(e)[0].strip().splitlines() or [type(e).__name__])[0]


@dataclass(frozen=True)
class Restarted:
    """What became of one kept query when the server started."""

    name: str
    ok: bool
    detail: str  # the checkpoint it resumed from, or why it did not start
    seconds: float

    def __str__(self) -> str:
        if self.ok:
            return (f"continuous query {self.name} started again from its checkpoint "
                    f"{self.detail} ({self.seconds:.1f} s)")
        return f"continuous query {self.name} not started again: {self.detail}"


class StateDir:
    """The :class:`dfsql.continuous.Keeper` of ``dfsql serve --state-dir``."""

    def __init__(self, path: str | os.PathLike, streams: Sequence[StreamView] = ()) -> None:
        self.root = Path(path).expanduser().resolve()
        #: the server's --stream views: a query's record keeps those it reads
        self.streams = list(streams)
        #: the server's Spark, session setup and judge (:meth:`open`), which a kept query
        #: is started with again
        self._opened: tuple[SparkSession, Callable[[SparkSession], None] | None, Judge] | \
            None = None
        try:
            for sub in ("queries", "checkpoints", "tables"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
            self._lock = open(self.root / "lock", "w")  # noqa: SIM115 (held while serving)
        except OSError as e:
            raise DfsqlError(f"--state-dir {path}: {e.strerror}",
                             hint="a directory this user can create and write") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise DfsqlError(f"--state-dir {self.root} is in use by another dfsql serve",
                             hint="one server per state directory: its queries would run "
                                  "twice") from None

    def open(self, spark: SparkSession, setup: Callable[[SparkSession], None] | None,
             judge: Judge) -> list[Restarted]:
        """Keep this process's continuous queries here from now on, and start those kept
        here before."""
        continuous.keep_with(self)
        self._opened = (spark, setup, judge)  # START STREAMING QUERY starts as they do
        return self.restart_all(spark, setup, judge)

    def close(self) -> None:
        """No longer keep queries here (those kept stay, for the next start)."""
        continuous.keep_with(None)
        self._lock.close()  # and the lock with it

    # ------------------------------------------------------------------ the Keeper
    def _record(self, name: str) -> Path:
        return self.root / "queries" / f"{file_name(name)}.json"

    def places(self, name: str, fresh: bool, version: int = 1) -> tuple[str, str]:
        place = file_name(name) + (f".v{version}" if version > 1 else "")
        checkpoint = self.root / "checkpoints" / place
        table = self.root / "tables" / place
        if fresh:  # what an earlier query of this name left, never kept or since stopped
            for d in (checkpoint, table):
                shutil.rmtree(d, ignore_errors=True)
        return str(checkpoint), str(table)

    def keep(self, stmt: ContinuousStatement, text: str, spark: SparkSession,
             owner: str | None, altered: continuous.Altered | None = None) -> None:
        assert stmt.name is not None
        checkpoint, table = self.places(stmt.name, False, altered.version if altered else 1)
        # the streams it reads: the --stream views among the tables its facts name
        reads = {name.replace("`", "").lower() for name in stmt.facts.reads}
        streams = [{"name": v.name, "path": v.path, "format": v.format,
                    "schema": spark.table(v.name).schema.json()}
                   for v in self.streams if v.name.lower() in reads]
        record = {
            "version": VERSION, "name": stmt.name, "statement": text,
            # the user who created it (None: the process itself); absent from records
            # written before queries had owners, which read as None: anyone's to stop
            "owner": owner,
            "sink": stmt.sink,
            "directory": stmt.path,
            # INTO TABLE NAME.schema.table's names (no host, user or password: the
            # connection is named again by whoever starts the server)
            "target": list(stmt.target) if stmt.target else None,
            # DIR's own places relative to DIR (it may move); the user's as given
            "checkpoint": stmt.checkpoint or str(Path(checkpoint).relative_to(self.root)),
            "table": str(Path(table).relative_to(self.root)) if stmt.sink == "table" else None,
            "streams": streams,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            # ALTER STREAMING QUERY's versions, and the history the latest starts from
            "altered": None if altered is None else {
                "versions": [list(v) for v in altered.versions], "stream": altered.stream,
                "files": list(altered.files), "backfill": altered.backfill,
                "log_base": altered.log_base},
        }
        target = self._record(stmt.name)
        tmp = target.with_name(f".{target.name}.tmp")
        try:
            with open(tmp, "w") as f:  # whole or not at all: a temporary file, renamed
                json.dump(record, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
            _sync_dir(target.parent)
        except OSError as e:  # the query is stopped: one not kept would not come back
            raise DfsqlError(f"cannot keep {stmt.name} in {self.root}: {e.strerror}",
                             hint="free space or permissions in --state-dir") from None

    def forget(self, name: str) -> str:
        self._record(name).unlink(missing_ok=True)
        _sync_dir(self.root / "queries")
        for sub in ("checkpoints", "tables"):  # every version's places
            for d in (self.root / sub).glob(f"{file_name(name)}.v*"):
                shutil.rmtree(d, ignore_errors=True)
        self.places(name, fresh=True)
        return f"removed from {self.root}"

    # ------------------------------------------------------------------ restart
    def restart_all(self, spark: SparkSession, setup: Callable[[SparkSession], None] | None,
                    judge: Judge) -> list[Restarted]:
        """Start every kept query again, each in a session of its own (the server's
        setup, then the stream registrations it was planned over); one that cannot be
        started is recorded as failed (:func:`dfsql.continuous.failed`)."""
        return [self._restart_one(path, spark, setup, judge)
                for path in sorted((self.root / "queries").glob("*.json"))]

    def start_again(self, name: str) -> str | None:
        assert self._opened is not None, "started again only once open"
        done = self._restart_one(self._record(name), *self._opened)
        return None if done.ok else done.detail

    def _restart_one(self, path: Path, spark: SparkSession,
                     setup: Callable[[SparkSession], None] | None,
                     judge: Judge) -> Restarted:
        """Start the query kept at ``path`` again, or record it as failed, with why (in
        one line: PySpark's loggers, which print an analysis error's Java stack trace
        before raising it, quiet before any query of this process has been planned)."""
        quiet_spark_loggers()
        began = time.monotonic()
        name, sink, owner = path.stem, "?", None
        try:
            record = json.loads(path.read_text())
            name, owner = record.get("name", name), record.get("owner")
            sink = statement_into(name, record.get("sink"), record.get("directory"),
                                  record.get("target")).where
            self._restart(record, spark, setup, judge)
            return Restarted(name, True, str(self.root / record["checkpoint"]),
                             time.monotonic() - began)
        except Exception as e:  # noqa: BLE001 (one broken query must not stop the rest)
            reason = one_line(e)
            continuous.failed(name, sink, reason, owner)
            return Restarted(name, False, reason, time.monotonic() - began)

    def _restart(self, record: dict, spark: SparkSession,
                 setup: Callable[[SparkSession], None] | None,
                 judge: Judge) -> None:
        if record.get("version") != VERSION:
            raise DfsqlError(f"a record of version {record.get('version')}, this server "
                             f"reads version {VERSION}")
        text = record["statement"]
        stmt = parse_any(text)  # its query parsed too, once, for the judge and the start
        if not isinstance(stmt, ContinuousStatement) or stmt.kind != "create":
            raise DfsqlError("the record holds no CREATE STREAMING QUERY")
        judge.check_continuous(text, stmt)  # the roots may have changed since
        for s in record["streams"]:  # before any Spark work: a query that cannot start
            if not os.path.isdir(s["path"]):  # costs the server's start nothing
                raise DfsqlError(f"its stream {s['name']} reads {s['path']}, which is gone")
        session = spark.newSession()
        if setup is not None:
            setup(session)
        text_only(session)  # a client's statement, read as the client's session reads it
        for s in record["streams"]:
            StreamView(s["name"], s["path"], s["format"]).register(session, s["schema"])
        judge.guard(session)  # what it reads is judged, as a client's would be
        judge.check_statement(session, stmt)  # and the whole statement again, first
        checkpoint = self.root / record["checkpoint"]
        drop_unfinished_writes(checkpoint)
        altered, history = _altered(record.get("altered"), session, str(checkpoint))
        continuous.restart(stmt, text, session, record.get("owner"), altered, history)


def drop_unfinished_writes(checkpoint: Path) -> list[Path]:
    """Remove the temporary files a kill left in ``checkpoint``'s logs.

    Spark writes each entry of a checkpoint's logs to a hidden temporary file
    (``.0.<uuid>.tmp``, with its ``.crc``) and renames it; a kill between the two leaves
    the file, which Spark never reads, but which makes a query killed before its first
    entry refuse to start ("the checkpoint location …/offsets should be empty on batch
    0"). The server holds DIR's lock, so no one else writes there."""
    gone = [f for log in ("offsets", "commits", "sources/*")
            for f in checkpoint.glob(f"{log}/.*.tmp*")]
    for f in gone:
        f.unlink(missing_ok=True)
    return gone


def _altered(kept: dict | None, spark: SparkSession, checkpoint: str
             ) -> tuple[continuous.Altered | None, Backfill | None]:
    """What ALTER made of a kept query, and the history its latest version starts from:
    read only while its ``checkpoint`` holds no completed micro-batch. After one, the
    checkpoint's state holds it, so nothing of it is planned (its BACKFILL FROM table, or
    the files an earlier version read, may be gone): it is named, for a later ALTER."""
    if not kept:
        return None, None
    altered = continuous.Altered(tuple((int(v), at) for v, at in kept["versions"]),
                                 kept["stream"], tuple(kept["files"]), kept.get("backfill"),
                                 kept.get("log_base"))
    if not backfill_needed(spark, checkpoint):
        return altered, unread_history(altered.backfill, altered.files)
    stream = file_stream(spark, altered.stream)
    if stream is None:
        raise DfsqlError(f"its stream {altered.stream} is no longer a stream of files")
    before = None if altered.backfill is None else Backfill(sql=altered.backfill)
    history = history_of(spark, stream, list(altered.files), before)
    # into a directory: the history's panes are the old version's, restated (§8c)
    return altered, replace(history, restate=altered.log_base is not None)


def _sync_dir(path: Path) -> None:
    """A rename in ``path`` made durable (the directory's entry, not just the file's)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
