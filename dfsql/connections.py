"""Database connections, named once by whoever runs dfsql (docs/guides/databases.md).

A statement names a database table only as ``NAME.schema.table``: the host, the port,
the user and the password belong to the one who runs dfsql (``dfsql.connection`` in
Python, ``--connection`` for ``dfsql serve``), so no statement, error, SHOW, EXPLAIN, log
or state file carries a credential. The URL is ``postgresql://USER@HOST[:PORT]/DB``
(libpq's form without the password; a host that starts with ``%2F`` is a socket
directory); the password is given apart, or libpq finds it (``PGPASSWORD``, ``.pgpass``).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from dfsql.errors import DatabaseError

#: a connection's name: an identifier, compared without case as SQL compares names
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True)
class Connection:
    """One named database: where it is and who logs in; the password is never shown."""

    name: str
    user: str
    host: str
    port: int | None
    database: str
    password: str | None = field(default=None, repr=False, compare=False)

    @property
    def url(self) -> str:
        """The URL as it may be shown: it never holds the password."""
        port = f":{self.port}" if self.port is not None else ""
        host = self.host.replace("/", "%2F")
        return f"postgresql://{self.user}@{host}{port}/{self.database}"

    def connect(self) -> Any:
        """A new psycopg connection (a transaction opens with the first statement).
        A refused login or a server that is down is a :class:`DatabaseError` naming the
        connection and what the database said, never the password."""
        try:
            import psycopg
        except ImportError:
            raise DatabaseError(
                f"connection {self.name} needs the PostgreSQL driver",
                hint="pip install 'dfsql-spark[postgres]'") from None
        params: dict[str, Any] = {"host": self.host, "user": self.user,
                                  "dbname": self.database, "connect_timeout": 10}
        if self.port is not None:
            params["port"] = self.port
        if self.password is not None:
            params["password"] = self.password
        try:
            return psycopg.connect(**params)
        except psycopg.Error as e:
            raise DatabaseError(f"connection {self.name} ({self.url}) failed: "
                                f"{said(e, self)}") from None


def said(error: BaseException | str, conn: Connection | None = None) -> str:
    """What the database said, on one line, with any password it echoed blanked."""
    text = " ".join(str(error).split()) or type(error).__name__
    if conn is not None and conn.password:
        text = text.replace(conn.password, "***")
    return text


def parse(name: str, url: str, password: str | None = None) -> Connection:
    """``name`` and ``url`` read as a :class:`Connection`, or a :class:`DatabaseError`
    saying what is wrong (without repeating a password the URL holds)."""
    if not NAME.match(name or ""):
        raise DatabaseError(f"{name!r} is not a connection name",
                            hint="a name is letters, digits and _, starting with a letter")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise DatabaseError(f"connection {name}: the URL is not postgresql://USER@HOST"
                            "[:PORT]/DB") from None
    if parts.password is not None:
        raise DatabaseError(f"connection {name}: the URL holds a password",
                            hint="give it apart (password=, --connection-password-file) "
                                 "or through PGPASSWORD / .pgpass")
    database = parts.path[1:]
    if (parts.scheme not in SCHEMES or not parts.username or not parts.hostname
            or not database or "/" in database or parts.query or parts.fragment):
        raise DatabaseError(f"connection {name}: the URL is not postgresql://USER@HOST"
                            "[:PORT]/DB", hint=f"got {_without_password(url)}")
    host = unquote(parts.netloc.rsplit("@", 1)[1])
    if port is not None:
        host = host.rsplit(":", 1)[0]
    if host.startswith("[") and host.endswith("]"):  # an IPv6 address, as URLs write it
        host = host[1:-1]
    return Connection(name.lower(), unquote(parts.username), host, port, unquote(database),
                      password)


def _without_password(url: str) -> str:
    return re.sub(r"(//[^/@:]*):[^/@]*@", r"\1:***@", url)


class Connections:
    """The connections of this process, by name: one owner, one lock (the endpoint's
    client sessions and the shell read it from several threads)."""

    def __init__(self) -> None:
        self._named: dict[str, Connection] = {}
        self._lock = threading.Lock()

    def add(self, name: str, url: str, password: str | None = None) -> Connection:
        conn = parse(name, url, password)
        with self._lock:
            self._named[conn.name] = conn
        return conn

    def remove(self, name: str) -> None:
        with self._lock:
            self._named.pop(name.lower(), None)

    def names(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(sorted(self._named))

    def get(self, name: str) -> Connection | None:
        with self._lock:
            return self._named.get(name.lower())

    def named(self, name: str, line: int | None = None,
              column: int | None = None) -> Connection:
        """The connection ``name``, or a positioned :class:`DatabaseError`."""
        conn = self.get(name)
        if conn is None:
            known = ", ".join(self.names()) or "none yet"
            raise DatabaseError(f"{name} is not a connection", line, column,
                                hint=f"connections: {known} (dfsql.connection, "
                                     "--connection, \\connection)")
        return conn


#: this process's connections
CONNECTIONS = Connections()


def connection(name: str, url: str, password: str | None = None) -> Connection:
    """Name a database for the statements of this process: ``NAME.schema.table``."""
    return CONNECTIONS.add(name, url, password)


def from_flags(named: list[str], password_files: list[str]) -> list[Connection]:
    """``dfsql serve --connection NAME=URL`` (repeatable) with ``--connection-password-file
    NAME=FILE``: each connection named in this process. A password file holds the
    password on its first line; a file for a name not given is a mistake."""
    passwords: dict[str, str] = {}
    for flag in password_files:
        name, sep, path = flag.partition("=")
        if not sep or not path:
            raise DatabaseError(f"--connection-password-file {flag}: expected NAME=FILE")
        try:
            with open(path) as f:
                passwords[name.lower()] = f.readline().rstrip("\r\n")
        except OSError as e:
            raise DatabaseError(f"--connection-password-file {name}: cannot read {path}: "
                                f"{e.strerror}") from None
    added = []
    for flag in named:
        name, sep, url = flag.partition("=")
        if not sep:
            raise DatabaseError(f"--connection {_without_password(flag)}: expected NAME=URL",
                                hint="e.g. --connection warehouse=postgresql://ada@db:5432/sales")
        added.append(CONNECTIONS.add(name, url, passwords.pop(name.lower(), None)))
    if passwords:
        raise DatabaseError(f"--connection-password-file {', '.join(sorted(passwords))}: "
                            "no --connection of that name")
    return added
