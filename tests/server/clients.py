"""What the endpoint tests share: the figures' result columns, the rows of
a metadata call read through PyHive, and the beeline that ships with pyspark."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]




COLUMNS = ["key", "total", "window_start", "window_end", "pane_index", "pane_timing", "is_last",
           "emit_time", "is_retraction"]


def operation_rows(conn, resp) -> list[tuple]:
    """The rows of a metadata call's operation (``resp``), fetched through PyHive's
    cursor on ``conn``; the call must have succeeded."""
    from dfsql.server.tcli import ttypes as tt

    assert resp.status.statusCode == tt.TStatusCode.SUCCESS_STATUS, resp.status
    cur = conn.cursor()
    cur._operationHandle = resp.operationHandle
    cur._state = cur._STATE_RUNNING
    return cur.fetchall()


def _beeline() -> str:
    import pyspark

    path = Path(pyspark.__file__).parent / "bin" / "beeline"
    assert path.exists(), path
    return str(path)


def answers_select_1(conn) -> None:
    """The server still serves ``conn`` (another user's, after an attack): its
    ``SELECT 1`` answers 1; the connection is closed after."""
    try:
        cur = conn.cursor()
        cur.execute("SELECT 1 AS one")
        assert cur.fetchall() == [(1,)]
    finally:
        conn.close()
