"""What belongs to whom on the endpoint: handles to the client that holds their secret
and to the user who opened them, continuous queries' ``global_temp`` views to the user
who created the query.

A TCLIService handle is a GUID and a secret; a call whose handle does not match both,
or names another user's session or operation, gets the same "invalid handle" error as
an unknown one (:func:`same_handle`, :func:`caller_owns`), so a handle says nothing
about sessions that are not the caller's.

STOP STREAMING QUERY checks its query's owner itself (:mod:`dfsql.continuous`); a
statement that would drop, alter or replace the ``global_temp`` view of another user's
continuous query is refused here, before Spark sees it (:func:`check_views`). Reading
such a view stays allowed: INTO TABLE is documented as readable from every session.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator

from dfsql.continuous import NotOwnerError, not_owner, owners
from dfsql.language.scan import Source, Token, scan_text
from dfsql.server.tcli import ttypes as tt

#: the database of Spark's global temp views (spark.sql.globalTempDatabase's default)
GLOBAL_TEMP = "global_temp"
#: the statements that change a view, by their first word
CHANGING = ("DROP", "ALTER", "CREATE", "REPLACE")
#: how deep EXECUTE IMMEDIATE strings are looked into (a string holding a string ...)
MAX_DEPTH = 4


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


def check_views(statement: str, user: str, admin: bool) -> None:
    """Refuse (42501, positioned) a statement that drops, alters or replaces the
    ``global_temp`` view of a continuous query another user owns, also inside an
    EXECUTE IMMEDIATE string; ``admin`` (``dfsql serve --admin``) may."""
    if admin:
        return
    theirs = {name.lower(): (name, owner) for name, owner in owners().items()
              if owner is not None and owner != user}
    if not theirs:
        return
    src = Source(statement)
    for at, name in _changed_views(statement, 0, 0):
        if name.lower() in theirs:
            real, owner = theirs[name.lower()]
            raise src.error(NotOwnerError, not_owner(real, owner, f"its view {GLOBAL_TEMP}."
                                                     f"{real}"), at,
                            f"reading {GLOBAL_TEMP}.{real} is allowed; changing it is not")


def _changed_views(text: str, base: int, depth: int) -> Iterator[tuple[int, str]]:
    """(offset, name) of each global temp view a statement in ``text`` may change: a
    ``global_temp.name`` anywhere in a statement that starts with one of CHANGING, or
    the name after ``GLOBAL TEMP[ORARY] VIEW``; strings are looked into as statements
    (EXECUTE IMMEDIATE), ``base`` shifting their offsets to the outer text's."""
    try:
        tokens = [t for t in scan_text(text).tokens if not _is(t, ";")]
    except Exception:  # noqa: BLE001 (what does not scan is Spark's to refuse)
        return
    changing = bool(tokens) and tokens[0].upper in CHANGING
    for i, t in enumerate(tokens):
        if t.kind == "string" and depth < MAX_DEPTH:
            yield from _changed_views(t.text[1:-1], base + t.start + 1, depth + 1)
        elif changing and _name(t) == GLOBAL_TEMP and i + 2 < len(tokens) \
                and _is(tokens[i + 1], "."):
            yield base + tokens[i + 2].start, _name(tokens[i + 2])
        elif changing and t.is_word("GLOBAL") and i + 3 < len(tokens) \
                and tokens[i + 1].is_word("TEMP", "TEMPORARY") \
                and tokens[i + 2].is_word("VIEW") and _name(tokens[i + 3]) != GLOBAL_TEMP:
            nxt = tokens[i + 3]
            if nxt.is_word("IF"):  # CREATE GLOBAL TEMP VIEW IF NOT EXISTS name
                nxt = tokens[i + 6] if i + 6 < len(tokens) else nxt
            yield base + nxt.start, _name(nxt)


def _is(t: Token, punct: str) -> bool:
    return t.kind == "punct" and t.text == punct


def _name(t: Token) -> str:
    """A word's or a back-quoted name's text, lower case."""
    return t.text.strip("`").lower() if t.kind in ("word", "quoted") else ""
