"""The endpoint's counts for its metrics (docs/guides/watching.md#metrics): statements
by how they ended and failed logins, counted as they happen, for the process (every
server of it); a server adds its sessions and running operations at a scrape
(:meth:`dfsql.server.service.Service.figures`). Imports nothing: ``dfsql passwd``'s
import of the logins loads no Thrift."""

from __future__ import annotations

import threading
from collections import Counter

_LOCK = threading.Lock()
_STATEMENTS: Counter[str] = Counter()
_LOGIN_FAILURES = [0]
#: how a statement can end
OUTCOMES = ("finished", "error", "cancelled")


def statement_ended(outcome: str) -> None:
    """A client's statement ended: finished, error or cancelled (a timeout too)."""
    with _LOCK:
        _STATEMENTS[outcome] += 1


def login_failed() -> None:
    """A login was refused: a wrong password, or the user or address locked."""
    with _LOCK:
        _LOGIN_FAILURES[0] += 1


def counts() -> tuple[dict[str, int], int]:
    """(statements by outcome, failed logins) so far."""
    with _LOCK:
        return dict(_STATEMENTS), _LOGIN_FAILURES[0]
