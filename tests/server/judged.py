"""The judge's endpoint as an attacker meets it: a data root beside a directory with a
secret, a server judging every statement (PLAIN users mallory and walter), a client's
cursor, and a canary in the server's environment. Shared by the modules that attack it
(test_endpoint_judge.py, test_endpoint_doors.py); each module starts its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dfsql.server import Server
from dfsql.server.auth import set_password
from tests.conftest import register_paper_tables

SECRET = "TOP-SECRET-31"


#: in the server's environment (set at collection, before the test run's JVM starts):
#: Spark's ``${env:…}`` substitution would hand it to a client
CANARY = "s3cr3t-52-canary"
os.environ["DFSQL_TEST_CANARY"] = CANARY


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("judge")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "t1").mkdir()
    (root / "t1" / "a.txt").write_text("inside\n")
    (outside / "secret.txt").write_text(SECRET + "\n")
    (root / "link").symlink_to(outside)
    return {"root": root, "outside": outside, "marker": base / "ran"}


@pytest.fixture(scope="module")
def server(spark, places, tmp_path_factory):
    pw = tmp_path_factory.mktemp("users") / "users"
    set_password(pw, "mallory", "pw")  # `dfsql passwd` itself: test_thrift.py
    set_password(pw, "walter", "pw2")
    srv = Server(spark, port=0, auth="PLAIN", password_file=str(pw),
                 data_roots=[str(places["root"])], statement_timeout=60,
                 session_setup=register_paper_tables).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def cursor(server):
    from pyhive import hive

    conn = hive.connect(host="127.0.0.1", port=server.port, auth="CUSTOM",
                        username="mallory", password="pw")
    yield conn.cursor()
    conn.close()


ENV = "${env:DFSQL_TEST_CANARY}"


def _connect_as(server, user: str, password: str, **kwargs):
    from pyhive import hive

    return hive.connect(host="127.0.0.1", port=server.port, auth="CUSTOM", username=user,
                        password=password, **kwargs)


def _fill(text: str, places: dict[str, Path]) -> str:
    """A statement with the module's data root and the directory beside it filled in."""
    return text.format(root=places["root"], outside=places["outside"])


def _refused(cursor, statement: str):
    """The status of the error ``statement`` is refused with (it must be)."""
    from pyhive.exc import OperationalError

    with pytest.raises(OperationalError) as info:
        cursor.execute(statement)
        cursor.fetchall()
    return info.value.args[0].status
