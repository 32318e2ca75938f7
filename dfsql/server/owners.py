"""What belongs to whom on the endpoint: handles to the client that holds their secret
and to the user who opened them, continuous queries' ``global_temp`` views to the user
who created the query.

A TCLIService handle is a GUID and a secret; a call whose handle does not match both,
or names another user's session or operation, gets the same "invalid handle" error as
an unknown one (:func:`same_handle`, :func:`caller_owns`), so a handle says nothing
about sessions that are not the caller's.

STOP STREAMING QUERY checks its query's owner itself (:mod:`dfsql.continuous`); a
statement that would drop, alter or replace the ``global_temp`` view of another user's
continuous query is refused on its plan (:mod:`dfsql.server.judge`). Reading such a view
stays allowed: INTO TABLE is documented as readable from every session. How many
continuous queries a user may hold is :func:`streaming_slot`'s.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from dfsql.continuous import owners
from dfsql.language.continuous import ContinuousStatement
from dfsql.language.scan import Source
from dfsql.server.limits import LimitError
from dfsql.server.tcli import ttypes as tt


def same_handle(got: tt.THandleIdentifier | None, real: tt.THandleIdentifier) -> bool:
    """Whether a client's handle identifier is ``real``'s: GUID and secret (the secret
    compared in constant time, as a password)."""
    return (got is not None and isinstance(got.guid, bytes)
            and isinstance(got.secret, bytes) and got.guid == real.guid
            and hmac.compare_digest(got.secret, real.secret))


def caller_owns(local, session_user: str, session_key: bytes) -> bool:
    """Whether the calling client (``local``: the service's thread-local) may use a
    session of ``session_user``: an authenticated caller (SASL's user on its connection,
    an HTTP request's Basic credentials) only its own user's sessions; a binary
    connection without a user (NOSASL) only the sessions it opened; an HTTP request
    without credentials (NONE, NOSASL) any whose whole handle it holds (nothing else
    names it)."""
    user = getattr(local, "user", None)
    if user:
        return session_user == user
    sessions = getattr(local, "sessions", None)
    return sessions is None or session_key in sessions


#: one lock per user, held while that user's CREATE STREAMING QUERY counts and starts:
#: two at once cannot both take the last slot (another user's wait on nothing)
_CREATING: dict[str, threading.Lock] = {}
_CREATING_LOCK = threading.Lock()


@contextmanager
def streaming_slot(stmt: object, text: str, user: str, cap: int) -> Iterator[None]:
    """While a client's statement runs: a CREATE STREAMING QUERY of ``user``, who already
    has ``cap`` continuous queries (running, or kept but failed: each holds its state and
    its name until STOP), is refused at its name (0: no limit). Only the endpoint's
    clients are counted; Python and the shell are the operator's own."""
    if cap <= 0 or not isinstance(stmt, ContinuousStatement) or stmt.kind != "create":
        yield
        return
    with _CREATING_LOCK:
        lock = _CREATING.setdefault(user, threading.Lock())
    with lock:
        # its own name aside: CREATE refuses a running or failed one of that name itself
        held = sorted(n for n, o in owners().items() if o == user and n != stmt.name)
        if len(held) >= cap:
            shown = ", ".join(held[:5]) + (", …" if len(held) > 5 else "")
            raise Source(text).error(
                LimitError, f"user {user[:64]!r} already runs {len(held)} continuous "
                f"queries ({shown}), the limit (dfsql serve --max-streaming-queries-per-user)",
                stmt.name_offset, f"STOP STREAMING QUERY {held[0]} (or another of yours: "
                "SHOW STREAMING QUERIES lists them) frees a slot")
        yield
