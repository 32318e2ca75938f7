"""Bounded reads and writes of PostgreSQL tables named ``NAME.schema.table``
(docs/guides/databases.md#bounded-reads-and-writes), ``NAME`` a connection of this process.

A read is the table's rows as a bounded DataFrame (:func:`~dfsql.spark.postgres_tables.
read_table`), registered under a generated temp view that the statement's text is
rewritten to read (:func:`~dfsql.spark.catalog.views.expand` does the rewriting, with
the windowed views', so a mistake after it is still placed where the user wrote it). A
write (``CREATE TABLE NAME.s.t AS q``, ``INSERT INTO NAME.s.t q``) gives the database
the rows Spark's table would get — a windowed query's whole changelog, ``is_retraction``
included — in one transaction, by ``COPY``.

A three-part name whose first part is no connection stays Spark's when it names a
Spark catalog (``spark_catalog.db.t``, a configured ``spark.sql.catalog.X``); otherwise
it is an unknown connection, refused at its place."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsql.connections import CONNECTIONS, Connection, said
from dfsql.errors import DatabaseError
from dfsql.language.scan import Source, Token, name_end, splice
from dfsql.session import spark_context
from dfsql.spark import door
from dfsql.spark.errors import spark_errors
from dfsql.spark.postgres_tables import read_table, write_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dfsql.language.statement import Statement

#: the generated views' prefix: no name a user writes starts so (and each is unique)
VIEW_PREFIX = "__dfsql_database_"
_numbers = itertools.count()


@dataclass(frozen=True)
class Named:
    """A database table as a statement names it: its connection and where it stands."""

    connection: Connection
    schema: str
    table: str
    #: the name's span in the statement's text
    start: int
    end: int

    @property
    def shown(self) -> str:
        """The name as an error shows it (the connection's name, never its URL)."""
        return f"{self.connection.name}.{self.schema}.{self.table}"


def name_parts(text: str) -> list[str]:
    """A qualified name's parts, a backticked part unquoted (``a.`b.c`.d``: a, b.c, d)."""
    parts, part, quoted, i = [], [], False, 0
    while i < len(text):
        ch = text[i]
        if ch == "`":
            if quoted and text[i + 1:i + 2] == "`":
                part.append("`")
                i += 2
                continue
            quoted = not quoted
        elif ch == "." and not quoted:
            parts.append("".join(part))
            part = []
        elif quoted or not ch.isspace():
            part.append(ch)
        i += 1
    return [*parts, "".join(part)]


def _spark_catalog(spark: SparkSession, name: str) -> bool:
    """Whether ``name`` is one of Spark's catalogs (the session's, or a configured one)."""
    if name.lower() == "spark_catalog":
        return True
    return spark.conf.get(f"spark.sql.catalog.{name}", None) is not None


def named(text: str, start: int, end: int, spark: SparkSession | None) -> Named | None:
    """The database table ``text[start:end]`` names, or None for Spark's own name (not
    three parts, or a Spark catalog's); an unknown connection is a positioned error."""
    parts = name_parts(text[start:end])
    if len(parts) != 3 or not all(parts):
        return None
    conn = CONNECTIONS.get(parts[0])
    if conn is None:
        if spark is None or _spark_catalog(spark, parts[0]):
            return None
        p = Source(text).pos(start)
        CONNECTIONS.named(parts[0], p.line, p.column)  # raises: no such connection
    assert conn is not None
    return Named(conn, parts[1], parts[2], start, end)


def read_view(spark: SparkSession, text: str, table: Named) -> str:
    """The table's rows registered as a new temp view; its name. A table the database
    does not have is an error at its name in ``text``."""
    rows = _database(text, table, lambda: read_table(spark, table.connection, table.schema,
                                                     table.table))
    if rows is None:
        raise _at(text, table, f"{table.shown} is not a table of connection "
                  f"{table.connection.name}",
                  f"connection {table.connection.name} has no table "
                  f"{table.schema}.{table.table} (PostgreSQL's names are compared as "
                  "written: a table created unquoted is in lower case)")
    view = f"{VIEW_PREFIX}{next(_numbers)}"
    rows.createOrReplaceTempView(view)
    return view


def drop_views(spark: SparkSession, views: tuple[str, ...]) -> None:
    """The generated views of a planned statement dropped (classic Spark analysed its
    DataFrames over them already; Spark Connect names them in the plan it sends, so
    they stay there)."""
    if views and spark_context(spark) is not None:
        for view in views:
            spark.catalog.dropTempView(view)


# --------------------------------------------------------------------------- writing


def write_target(stmt: Statement, spark: SparkSession) -> Named | None:
    """The database table a write statement (``stmt.kind == "write"``) writes, or None
    (a Spark table). Only ``CREATE TABLE NAME.s.t AS q`` and ``INSERT INTO NAME.s.t q``
    write one; any other head over a database table is refused at its first word."""
    tokens = stmt.scanned.tokens if stmt.scanned is not None else []
    top = [t for t in tokens if t.depth == 0 and t.start < stmt.body_start]
    at = next((k for k, t in enumerate(top) if t.is_word("TABLE", "INTO")), None)
    if at is None or at + 1 >= len(top):
        return None
    k = at + 1
    if top[at].is_word("INTO") and top[k].is_word("TABLE"):
        k += 1
    if [t.upper for t in top[k:k + 3]] == ["IF", "NOT", "EXISTS"]:
        k += 3  # refused below, at the statement's first word
    end = name_end(top, k)
    if end == k:
        return None
    found = named(stmt.text, top[k].start, top[end - 1].end, spark)
    if found is None:
        return None
    _refuse_other_heads(stmt, top, at, end, found)
    return found


def _refuse_other_heads(stmt: Statement, top: list[Token], at: int, end: int,
                        found: Named) -> None:
    words = [t.upper for t in top[:at + 1]]
    create = words == ["CREATE", "TABLE"] and end < len(top) and top[end].is_word("AS") \
        and end + 1 == len(top)
    insert = words == ["INSERT", "INTO"] and end == len(top)
    if not (create or insert):
        p = stmt.source.pos(top[0].start)
        raise DatabaseError(
            f"a database table ({found.shown}) is written only by CREATE TABLE "
            f"{found.shown} AS <query> or INSERT INTO {found.shown} <query>", p.line,
            p.column, "no OR REPLACE, IF NOT EXISTS, OVERWRITE, column list, USING or "
                      "OPTIONS: drop or change the table in PostgreSQL itself")


def write(stmt: Statement, text: str, spark: SparkSession, target: Named) -> DataFrame:
    """Run the write ``text`` (the statement over its windowed blocks' views, offsets
    kept) into ``target``: the query's rows, in one transaction. An empty result."""

    with spark_errors(stmt.source):
        rows = door.sql(spark, splice(text, [(0, stmt.body_start, "")]))
        rows.schema  # noqa: B018 (analysed here: Spark's mistakes are the user's)
    create = stmt.text[:stmt.body_start].lstrip().upper().startswith("CREATE")
    refused = _database(stmt.text, target, lambda: write_rows(
        target.connection, target.schema, target.table, rows, create))
    if refused is not None:
        what, hint = refused
        raise _at(stmt.text, target, what, hint)
    return door.sql(spark, "SELECT 1 AS ok WHERE false").drop("ok")


def _database(text: str, table: Named, work):
    """``work()`` against the database; what the database said, if it refused, as an
    error at the table's name (never the password)."""
    try:
        import psycopg
        refused: tuple[type[BaseException], ...] = (psycopg.Error,)
    except ImportError:  # the connection says what to install
        refused = ()
    try:
        return work()
    except DatabaseError as e:  # a refused login, a server down: at the table's name
        if e.line is not None:
            raise
        raise _at(text, table, e.message, e.hint) from None
    except refused as e:
        raise _at(text, table, f"{table.shown}: the database said: "
                  f"{said(e, table.connection)}", None) from None


def _at(text: str, table: Named, message: str, hint: str | None) -> DatabaseError:
    p = Source(text).pos(table.start)
    return DatabaseError(message, p.line, p.column, hint)
