"""Two or more PLAIN users on one endpoint: their password file, the paper's stream, a
PyHive connection as one of them, and what a statement returns or is refused with (shared
by tests/server/test_endpoint_isolation.py and test_endpoint_owners.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyhive import hive
from pyhive.exc import OperationalError

from dfsql.server import Server
from dfsql.server.auth import hash_line
from dfsql.server.streams import StreamView
from tests.conftest import register_paper_tables

PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "root": "root-pw", "carol": "carol-pw"}


ROOT = Path(__file__).resolve().parents[2]


FIG14 = next(f for f in json.loads((ROOT / "examples" / "paper" / "figures.json")
                                   .read_text())["figures"]
             if f["name"] == "fig14_sessions_retracting")


#: Figure 14's windowed query over the paper's scores as a stream
LIVE_QUERY = " ".join(FIG14["query"].replace("FROM scores", "FROM scores_live").split())


def _users(path: Path, iterations: int = 1000) -> str:
    # few iterations: the hash is not what is tested (the back-off test uses the real one)
    path.write_text("".join(hash_line(u, p, iterations) + "\n"
                            for u, p in PASSWORDS.items()))
    return str(path)


def _setup(stream: StreamView):
    """Every session's: the paper's tables (Figure 14 reads its watermarks) and the
    stream of its scores."""
    def setup(session) -> None:
        register_paper_tables(session)
        stream.register(session)

    return setup


def _connect(server: Server, user: str, password: str | None = None) -> hive.Connection:
    return hive.connect(host="127.0.0.1", port=server.port, username=user, auth="CUSTOM",
                        password=password or PASSWORDS[user])


def _run(conn: hive.Connection, statement: str) -> list[tuple]:
    cur = conn.cursor()
    cur.execute(statement)
    return cur.fetchall() if cur.description else []


def _refusal(conn: hive.Connection, statement: str) -> tuple[str, str]:
    """(SQLSTATE, message) of a statement the server refuses."""
    with pytest.raises(OperationalError) as info:
        conn.cursor().execute(statement)
    status = info.value.args[0].status
    return status.sqlState, status.errorMessage
