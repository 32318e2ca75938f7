"""``\\connection NAME URL`` in the shell (docs/guides/shell.md, docs/guides/databases.md):
a database named for the shell's statements, its password asked for and never shown;
a mistake placed at the word that is wrong, and nothing named."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from dfsql.connections import CONNECTIONS
from dfsql.shell.commands import ShellError, name_connection


@pytest.fixture
def out():
    buffer = io.StringIO()
    yield Console(file=buffer, width=200), buffer
    for name in CONNECTIONS.names():
        if name.startswith("shell_"):
            CONNECTIONS.remove(name)


def test_a_connection_is_named_with_the_password_asked_for(out) -> None:
    console, buffer = out
    asked: list[str] = []
    line = "\\connection shell_wh postgresql://ada@db.example:5433/sales"
    at = len("\\connection ")
    name_connection(console, line[at:], at, lambda n: asked.append(n) or "s3cret!")
    assert asked == ["shell_wh"]
    conn = CONNECTIONS.named("SHELL_WH")
    assert (conn.user, conn.host, conn.port, conn.database, conn.password) == (
        "ada", "db.example", 5433, "sales", "s3cret!")
    name_connection(console, "", at - 1, lambda n: None)  # listed, as named
    shown = buffer.getvalue()
    assert shown.count("shell_wh: postgresql://ada@db.example:5433/sales") == 2
    assert "s3cret" not in shown


@pytest.mark.parametrize(("rest", "column", "says"), [
    ("shell-wh postgresql://ada@db/sales", 13, "is not a connection name"),
    ("shell_wh postgresql://ada:pw@db/sales", 22, "the URL holds a password"),
    ("shell_wh mysql://ada@db/sales", 22, "the URL is not postgresql://"),
    ("shell_wh", 13, "takes a name and a URL"),
    ("shell_wh postgresql://ada@db/sales extra", 13, "takes a name and a URL"),
])
def test_a_mistake_is_placed_and_names_nothing(out, rest, column, says) -> None:
    console, _ = out
    asked: list[str] = []
    with pytest.raises(ShellError) as info:
        name_connection(console, rest, len("\\connection "), asked.append)
    assert says in info.value.message
    assert (info.value.line, info.value.column) == (1, column)
    assert "pw@" not in str(info.value)
    assert asked == []  # no password asked for a command that names nothing
    assert CONNECTIONS.get("shell_wh") is None
