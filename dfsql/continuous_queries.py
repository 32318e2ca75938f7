"""The continuous queries of this process, in one owner (:class:`Queries`): those running
and those kept but failed to start again, and the :class:`Keeper` they are kept with.

Lifecycle: :data:`QUERIES` lives as long as the process (one registry per Spark
application: any session lists and stops the queries any other started). A query enters
it when CREATE (or a restart) has started it, and leaves it when STOP drops it or the
process stops them all; a failed entry goes when STOP drops the query or it is started
again, and all of them when the keeper is let go (``dfsql serve``'s state directory closes)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsql.errors import DfsqlError
from dfsql.language.continuous import ContinuousStatement, parse_continuous

if TYPE_CHECKING:
    from dfsql.continuous_kept import Altered, Keeper
    from dfsql.language.continuous import Backfill


@dataclass
class Running:
    name: str
    query: object  # pyspark StreamingQuery
    sink: str
    checkpoint: str
    text: str
    started: float
    owner: str | None = None
    #: where its panes go: its :class:`~dfsql.spark.stream.sink.Sink`
    #: (:func:`~dfsql.spark.stream.sinks.statement_into`), which ALTER restates
    sink_object: object = None
    #: its history (BACKFILL FROM, or what ALTER gave it), for the next version's
    history: Backfill | None = None
    #: what ALTER made of it (None: as created)
    altered: Altered | None = None

    @property
    def versions(self) -> tuple[tuple[int, str | None], ...]:
        """(version, the frontier it took effect at; None: from the start)."""
        return self.altered.versions if self.altered is not None else ((1, None),)

    def created(self) -> ContinuousStatement:
        """Its CREATE statement (after ALTER, the latest version's)."""
        stmt = parse_continuous(self.text)
        assert stmt is not None and stmt.kind == "create"
        return stmt


@dataclass
class Failed:
    """A kept query that could not be started again (its input gone, say): listed by SHOW
    with the reason until STOP forgets it."""

    name: str
    sink: str
    reason: str
    since: float
    owner: str | None = None


class Queries:
    """The running and failed queries by name, and the keeper, under one lock (the
    endpoint's clients run statements on threads of their own); ``starting`` lets one
    START STREAMING QUERY run at a time."""

    def __init__(self) -> None:
        self.running: dict[str, Running] = {}
        #: streams :func:`dfsql.start` started with a name and a checkpoint: not
        #: continuous queries (SHOW and STOP leave them to their program), but watched:
        #: the metrics list them while they run
        self.started: dict[str, Running] = {}
        self.failed: dict[str, Failed] = {}
        #: where the queries are kept (None: in memory only, gone with the process)
        self.keeper: Keeper | None = None
        #: reentrant: a caller holding it (STOP's owner check) may drop under it
        self.lock = threading.RLock()
        self.starting = threading.Lock()

    def keep_with(self, keeper: Keeper | None) -> None:
        """Keep every query with ``keeper`` from now on (None: no longer; the failed
        entries of the old one go too)."""
        with self.lock:
            if keeper is not None and self.keeper is not None and self.keeper is not keeper:
                raise DfsqlError("this process already keeps its continuous queries "
                                 "elsewhere", hint="one --state-dir per process")
            self.keeper = keeper
            if keeper is None:
                self.failed.clear()

    def owners(self) -> dict[str, str | None]:
        """Every query's name and owner (running, or kept but failed)."""
        with self.lock:
            return {**{f.name: f.owner for f in self.failed.values()},
                    **{r.name: r.owner for r in self.running.values()}}

    def run(self, r: Running) -> None:
        """``r`` is running now (started, restarted or altered)."""
        with self.lock:
            self.running[r.name] = r

    def started_again(self, name: str) -> None:
        """A kept query started again: it is no longer failed."""
        with self.lock:
            self.failed.pop(name, None)

    def fail(self, name: str, sink: str, reason: str, owner: str | None = None) -> None:
        """The kept query ``name`` could not start again (one of that name whose stream
        had died is then listed with this reason only)."""
        with self.lock:
            self.failed[name] = Failed(name, sink, reason, time.time(), owner)
            r = self.running.get(name)
            if r is not None and not r.query.isActive:  # type: ignore[attr-defined]
                del self.running[name]

    def drop(self, name: str) -> tuple[Running | None, Failed | None, Keeper | None]:
        """STOP: the query's entries removed, returned with the keeper that keeps it."""
        with self.lock:
            return self.running.pop(name, None), self.failed.pop(name, None), self.keeper

    def drain(self) -> list[Running]:
        """Every running query, removed (the process stops them all)."""
        with self.lock:
            running = list(self.running.values())
            self.running.clear()
        return running

    def watch_started(self, r: Running) -> None:
        """The stream ``r`` :func:`dfsql.start` started: in the metrics while it runs."""
        with self.lock:
            self.started[r.name] = r

    def streams(self) -> list[Running]:
        """The running streams :func:`dfsql.start` started (those stopped, forgotten)."""
        with self.lock:
            for name in [n for n, r in self.started.items()
                         if not r.query.isActive]:  # type: ignore[attr-defined]
                del self.started[name]
            return list(self.started.values())

    def listed(self) -> tuple[list[Running], list[Failed]]:
        """The running and failed queries now (SHOW)."""
        with self.lock:
            return list(self.running.values()), list(self.failed.values())


#: this process's continuous queries (see the module's lifecycle)
QUERIES = Queries()
