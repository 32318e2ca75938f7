"""Who runs a continuous-query statement (:mod:`dfsql.continuous`): the endpoint's
client, an admin, or the process itself; and the words of a refusal to change another
user's query."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from dfsql.errors import DfsqlError


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
