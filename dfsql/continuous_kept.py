"""What a kept continuous query is (:mod:`dfsql.continuous`): the :class:`Keeper` of a
process's queries (``dfsql serve --state-dir``, :mod:`dfsql.server.state`), what ALTER
made of a query (:class:`Altered`), and what its places hold across versions."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dfsql.language.continuous import ContinuousStatement


class Keeper(Protocol):
    """Where the continuous queries of a process are kept across its restarts."""

    def places(self, name: str, fresh: bool, version: int = 1) -> tuple[str, str]:
        """(checkpoint, table directory) of the query ``name`` (of its ``version``:
        ALTER's); ``fresh``: a new query, so whatever an earlier one of that name and
        version left there goes."""
        ...

    def keep(self, stmt: ContinuousStatement, text: str, spark: SparkSession,
             owner: str | None, altered: Altered | None = None) -> None:
        """Write the query down, with its owner and what ALTER made of it (raise if it
        cannot be): a restart starts it again, still ``owner``'s. A record is replaced
        whole or not at all."""
        ...

    def forget(self, name: str) -> str:
        """Remove the query ``name`` (its record, checkpoint and table); what was done."""
        ...

    def start_again(self, name: str) -> str | None:
        """Start the kept query ``name`` again from its record, as a server's start does
        (START STREAMING QUERY); None once it runs, else why not (one line: it is then
        listed as failed with that reason)."""
        ...


@dataclass(frozen=True)
class Altered:
    """What ALTER STREAMING QUERY made of a query, which a restart needs: its versions
    (each with the frontier it took effect at), and its history: the first version's
    ``BACKFILL FROM`` and the files of its stream the versions before it read."""

    versions: tuple[tuple[int, str | None], ...]
    stream: str
    files: tuple[str, ...]
    backfill: str | None = None  # the first version's BACKFILL FROM, as Spark reads it
    #: what its sink's restatement left for a restart to build it again
    #: (:class:`~dfsql.spark.stream.sink.Restated`): into a directory, the log entry the
    #: latest version's first batch is written as
    log_base: int | None = None

    @property
    def version(self) -> int:
        return self.versions[-1][0]


def drop_old_places(keeper: Keeper, name: str, old: int) -> None:
    """After ALTER made version ``old + 1``: the old version's checkpoint goes (the new
    one starts from its history, not from that state), its table stays until the next
    change (it is what readers see until the new version's first batch, and after a
    restart before that batch), and the table before it goes."""
    checkpoint, _ = keeper.places(name, fresh=False, version=old)
    shutil.rmtree(checkpoint, ignore_errors=True)
    if old > 1:
        _, older = keeper.places(name, fresh=False, version=old - 1)
        shutil.rmtree(older, ignore_errors=True)
