"""Database connections named once (docs/guides/databases.md): the URL's form, the
refusals, and that no password is ever shown."""

from __future__ import annotations

import pytest

import dfsql.connections as dc
from dfsql.errors import DatabaseError


@pytest.mark.parametrize(("url", "want"), [
    ("postgresql://ada@db.example:6543/sales", ("ada", "db.example", 6543, "sales")),
    ("postgres://ada@localhost/sales", ("ada", "localhost", None, "sales")),
    ("postgresql://ada@%2Ftmp%2Fpg/sales", ("ada", "/tmp/pg", None, "sales")),
    ("postgresql://a%40b@h:1/d%20b", ("a@b", "h", 1, "d b")),
    ("postgresql://ada@[::1]:5432/sales", ("ada", "::1", 5432, "sales")),
    ("postgresql://ada@[::1]/sales", ("ada", "::1", None, "sales")),
])
def test_a_url_read(url, want):
    conn = dc.parse("Sales", url)
    assert (conn.user, conn.host, conn.port, conn.database) == want
    assert conn.name == "sales"


@pytest.mark.parametrize(("name", "url", "says"), [
    ("db", "mysql://ada@h/d", "is not postgresql://USER@HOST[:PORT]/DB"),
    ("db", "postgresql://h/d", "is not postgresql://"),
    ("db", "postgresql://ada@h/", "is not postgresql://"),
    ("db", "postgresql://ada@h/d?sslmode=disable", "is not postgresql://"),
    ("db", "postgresql://ada@h:99999/d", "is not postgresql://"),
    ("1db", "postgresql://ada@h/d", "is not a connection name"),
    ("db.x", "postgresql://ada@h/d", "is not a connection name"),
])
def test_a_malformed_connection_is_refused(name, url, says):
    with pytest.raises(DatabaseError, match=None) as info:
        dc.parse(name, url)
    assert says in str(info.value)


def test_a_password_in_the_url_is_refused_and_not_repeated():
    with pytest.raises(DatabaseError) as info:
        dc.parse("db", "postgresql://ada:s3cret-pw@h/d")
    assert "holds a password" in str(info.value)
    assert "s3cret-pw" not in str(info.value)


def test_the_password_is_never_shown():
    conn = dc.parse("db", "postgresql://ada@h:5/d", password="s3cret-pw")
    assert "s3cret-pw" not in repr(conn) and "s3cret-pw" not in conn.url
    assert conn.url == "postgresql://ada@h:5/d"
    assert dc.said(RuntimeError("login s3cret-pw failed"), conn) == "login *** failed"


def test_an_unknown_name_is_positioned_with_the_names_known():
    conns = dc.Connections()
    conns.add("sales", "postgresql://ada@h/d")
    with pytest.raises(DatabaseError) as info:
        conns.named("slaes", line=2, column=15)
    err = info.value
    assert (err.line, err.column) == (2, 15)
    assert err.message == "slaes is not a connection"
    assert "connections: sales" in err.hint
    assert conns.named("SALES").name == "sales"
