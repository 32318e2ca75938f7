"""Who runs a continuous-query statement (:mod:`dfsql.continuous`): the endpoint's
client, an admin, or the process itself; and the words of a refusal to change another
user's query (or to START one that cannot be started)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from dfsql.errors import AnalysisError, DfsqlError


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


def not_owner(name: str, owner: str | None, what: str) -> str:
    """The refusal's words: whose the query is, and who may."""
    return (f"the continuous query {name} belongs to user {owner!r}: {what} is theirs or "
            "an admin's (dfsql serve --admin)")


def start_refusal(name: str, owner: str | None, known: bool, running: bool, kept: bool,
                  actor: Actor) -> tuple[type[DfsqlError], str, str] | None:
    """Why ``actor`` may not START STREAMING QUERY ``name`` (error class, message, hint),
    or None: a query SHOW lists (``known``), not ``running``, kept by a ``--state-dir``
    (what it starts from), and the actor's own or any if an admin."""
    if not known:
        return (AnalysisError, f"no continuous query named {name}",
                "SHOW STREAMING QUERIES lists them")
    if not actor.may_change(owner):
        return NotOwnerError, not_owner(name, owner, "START"), \
            "SHOW STREAMING QUERIES names each query's owner"
    if running:
        return (DfsqlError, f"the continuous query {name} is running",
                "START STREAMING QUERY starts a query SHOW STREAMING QUERIES lists as FAILED")
    if not kept:
        return (DfsqlError, f"the continuous query {name} is not kept (this process has no "
                "--state-dir), so there is no record to start it from",
                f"STOP STREAMING QUERY {name}, then CREATE it again")
    return None
