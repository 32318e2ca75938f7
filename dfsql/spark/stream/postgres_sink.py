"""A live stream's results in a PostgreSQL table, applied exactly once
(docs/guides/databases.md): :class:`PostgresTable` keeps the current row of every window
(a pane replaces its window's row, a retraction without a successor deletes it, a closed
window's last row stays), as :class:`~dfsql.spark.stream.table_sink.TableSink` does in
Spark.

Each micro-batch is one database transaction: its changes go in bulk (``COPY`` into a
staging table, then one ``DELETE`` and one ``INSERT`` over it, set-based, no row at a
time) together with the query's progress row (query, table, batch id). A batch that
Spark replays after a crash finds its id already in the progress row and changes
nothing; a process killed before the commit left nothing, and the replay applies the
batch once; a reader sees a batch whole or not at all. A database that is lost is tried
again with back-off (bounded), from a new connection."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from dfsql.connections import Connection, said
from dfsql.errors import DatabaseError
from dfsql.spark.postgres_tables import columns, pg_type, quoted, read_table
from dfsql.spark.stream.checkpoint import last_committed
from dfsql.spark.stream.restate import kept_retractions, retractions_kept
from dfsql.spark.stream.sink import Restated, Restatement

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter
    from pyspark.sql.types import StructType

#: the table of every query's progress, in the target's schema (one row per query and table)
PROGRESS = "dfsql_progress"
#: tries of one batch's transaction against a lost database, and the first pause (doubled)
TRIES, PAUSE = 6, 0.5


class _PostgresSink:
    """What both database sinks share: the table checked or created at ``open``, each
    batch one transaction with the progress row (see the module doc)."""

    changelog_order = True

    def __init__(self, connection: Connection, schema: str, table: str,
                 query: str | None = None, base: int = 0, first: Any = None) -> None:
        self.connection = connection
        self.schema = schema
        self.table = table
        #: the progress row's query name (the query's name when ``open`` is given one)
        self.query = query
        #: a changed version's first progress id (its batch ``i`` is ``base + i``: the
        #: versions before numbered theirs from 0), and the retractions of its
        #: restatement, written with its first batch (pandas rows; None: none)
        self.base = base
        self.first = first
        self.columns: list[tuple[str, str]] = []
        self.key: list[str] = []
        self.last_batch = -1
        #: while a lost database is tried again: the try and the database's last error,
        #: as SHOW STREAMING QUERIES shows them (None: the last commit went through)
        self.retrying: str | None = None
        self._conn: Any = None

    def native(self, visible: DataFrame, name: str | None) -> DataStreamWriter | None:
        return None

    def open(self, spark: SparkSession, schema: StructType, row_key: tuple[str, ...],
             name: str | None) -> None:
        """Check or create the table and the progress table; read the last batch id."""
        self.query = self.query or name or f"{self.schema}.{self.table}"
        self.columns, self.key = self._layout(schema, row_key)
        try:
            with self._transaction() as cur:
                self._check_or_create(cur)
                self.last_batch = self._committed(cur, lock=False)
        except _refused() as e:  # a privilege, a name the database will not take
            raise DatabaseError(
                f"{self.connection.name}.{self.schema}.{self.table}: the database refused "
                f"it: {_primary(e, self.connection)}",
                hint=f"the connection's user needs CREATE on schema {self.schema} (and "
                "INSERT, DELETE on the table), or name a table it may write") from None

    def commit(self, batch: DataFrame, batch_id: int) -> None:
        """Apply one micro-batch's changes and its progress in one transaction, once
        (a changed version's first batch: its restatement's retractions, then its rows)."""
        entry = self.base + batch_id
        if batch_id == 0 and self.first is not None and len(self.first):
            batch = batch.sparkSession.createDataFrame(
                self.first[batch.columns], batch.schema).union(batch)
        data = _csv(batch, entry if self._with_batch_id else None, self._not_null)
        for attempt in range(TRIES):
            try:
                self._apply(data, entry)
                self.retrying = None
                return
            except (*_lost(), DatabaseError) as e:  # DatabaseError: no new connection
                self._drop_connection()
                lost = said(e, self.connection)
                if attempt == TRIES - 1:
                    self.retrying = None
                    raise DatabaseError(f"{self.query}: the database was lost at batch "
                                        f"{entry}: {lost}") from None
                pause = PAUSE * 2 ** attempt
                self.retrying = (f"batch {entry}, try {attempt + 2} of {TRIES} in "
                                 f"{pause:g} s: {lost}")
                time.sleep(pause)

    @classmethod
    def resumed(cls, connection: Connection, schema: str, table: str, query: str,
                base: int | None, place: str | None) -> _PostgresSink:
        """The sink of a query's version at its start or restart: a changed version's
        (``base``: its first progress id, as the keeper recorded it) with its
        restatement's retractions while its first batch has not committed (kept in
        ``place``: it restates again)."""
        first = None if base is None else retractions_kept(place)
        return cls(connection, schema, table, query=query, base=base or 0, first=first)

    def restated(self, how: Restatement) -> Restated:
        """The changed version's sink over the same table (docs/guides/databases.md): its
        progress ids go on from the last one committed, its first batch retracts the old
        query's current rows of the windows it holds and writes the new query's, in one
        transaction. Refused (the old query runs on) when the old query stopped between
        its database commit and Spark's: its state is a batch behind the table."""
        for attempt in range(2):  # the held connection may have died with a restart of
            try:  # the database since the last batch (which a batch's retry would renew)
                with self._transaction() as cur:
                    committed = self._committed(cur, lock=False)
                break
            except _lost():
                self._drop_connection()
                if attempt:
                    raise
        if committed - self.base > last_committed(how.spark, how.checkpoint):
            raise how.refuse(f"{how.name} stopped between committing a micro-batch to "
                             f"{self.connection.name}.{self.schema}.{self.table} and "
                             "recording it, so its state is a batch behind the table; it "
                             "runs on unchanged", "run the ALTER again")
        return Restated(type(self)(self.connection, self.schema, self.table, self.query,
                                   committed + 1, kept_retractions(how)), committed + 1)

    def _apply(self, data: bytes, batch_id: int) -> None:
        with self._transaction() as cur:
            committed = self._committed(cur, lock=True)
            if committed >= batch_id:  # committed before a crash
                self.last_batch = committed
                return
            self._write(cur, data)
            cur.execute(f"INSERT INTO {self._progress} (query, target, batch_id) VALUES "
                        "(%s, %s, %s) ON CONFLICT (query, target) DO UPDATE SET batch_id "
                        "= EXCLUDED.batch_id", (self.query, self.table, batch_id))
        self.last_batch = batch_id

    def _committed(self, cur: Any, lock: bool) -> int:
        """The last batch id the progress row holds (-1: none); ``lock``: the row held
        until the transaction ends, so two writers of one query cannot both apply."""
        cur.execute(f"SELECT batch_id FROM {self._progress} WHERE query = %s AND "
                    f"target = %s{' FOR UPDATE' if lock else ''}", (self.query, self.table))
        row = cur.fetchone()
        return row[0] if row else -1

    _with_batch_id = False

    @property
    def _not_null(self) -> list[str]:
        """The columns a batch's rows must fill (a primary key's): a NULL there is a
        :class:`DatabaseError` before the batch's transaction starts."""
        return []

    def _layout(self, schema: StructType, row_key: tuple[str, ...]
                ) -> tuple[list[tuple[str, str]], list[str]]:
        raise NotImplementedError

    def _write(self, cur: Any, data: bytes) -> None:
        raise NotImplementedError

    def _check_or_create(self, cur: Any) -> None:
        found = columns(cur, self.schema, self.table)
        where = f"{self.connection.name}.{self.schema}.{self.table}"
        if found:
            cur.execute("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON "
                        "a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE "
                        "i.indrelid = %s::regclass AND i.indisprimary", (self._target,))
            key = sorted(r[0] for r in cur.fetchall())
            if found != self.columns or key != sorted(self.key):
                raise DatabaseError(
                    f"{where} has other columns or another primary key than the query's "
                    "results", hint="want " + ", ".join(f"{c} {t}" for c, t in self.columns)
                    + f"; primary key ({', '.join(self.key)})")
        else:  # no key: a query of one GLOBAL window and no GROUP BY has one row
            key = f", PRIMARY KEY ({_names(self.key)})" if self.key else ""
            cur.execute(f"CREATE TABLE {self._target} ({_typed(self.columns)}{key})")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {self._progress} (query text, target "
                    "text, batch_id bigint NOT NULL, PRIMARY KEY (query, target))")

    @property
    def _target(self) -> str:
        return f"{quoted(self.schema)}.{quoted(self.table)}"

    @property
    def _progress(self) -> str:
        return f"{quoted(self.schema)}.{PROGRESS}"

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A transaction on the sink's connection (a new one after a loss): committed
        when the block ends, rolled back when it raises."""
        if self._conn is None or self._conn.closed:
            self._conn = self.connection.connect()
        with self._conn.transaction(), self._conn.cursor() as cur:
            yield cur

    def _drop_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # already gone with the database
                pass
        self._conn = None

    def close(self) -> None:
        self._drop_connection()


class PostgresTable(_PostgresSink):
    """The current row of every window of a query, in ``schema.table`` of ``connection``
    (see the module doc). The table is created when missing, its primary key the group
    keys and the window; an existing table whose columns or key differ is refused before
    anything is written."""

    #: one row per window's key (the query's group keys must all be selected)
    keeps_current_rows = True

    def _layout(self, schema: StructType, row_key: tuple[str, ...]
                ) -> tuple[list[tuple[str, str]], list[str]]:
        return ([(f.name, pg_type(f.dataType)) for f in schema.fields
                 if f.name != "is_retraction"], list(row_key))

    @property
    def _not_null(self) -> list[str]:
        return self.key  # PostgreSQL's primary key holds no NULL

    @staticmethod
    def as_changelog(spark: SparkSession, connection: Connection, schema: str,
                     table: str) -> DataFrame:
        """The table's rows as a changelog of current rows (ALTER's restatement reads
        it): each row a pane, none a retraction."""
        from pyspark.sql import functions as F  # noqa: N812

        rows = read_table(spark, connection, schema, table)
        assert rows is not None  # opened by the running query
        return rows.withColumn("is_retraction", F.lit(False))

    def _write(self, cur: Any, data: bytes) -> None:
        """The batch staged, then each window it touches deleted and its last change
        inserted unless that change is a retraction (the last change decides the row)."""
        cur.execute(f"CREATE TEMP TABLE dfsql_stage ({_typed(self.columns)}, is_retraction "
                    "boolean, dfsql_seq bigint) ON COMMIT DROP")
        names = _names(c for c, _ in self.columns)
        with cur.copy(f"COPY dfsql_stage ({names}, is_retraction, dfsql_seq) FROM "
                      "STDIN (FORMAT csv, HEADER true)") as copy:
            copy.write(data)
        cur.execute("ANALYZE dfsql_stage")  # its size, so the DELETE joins by hash
        if not self.key:  # one row at most: the batch's last change decides it
            cur.execute(f"DELETE FROM {self._target} WHERE EXISTS (SELECT FROM dfsql_stage)")
            cur.execute(f"INSERT INTO {self._target} ({names}) SELECT {names} FROM (SELECT * "
                        "FROM dfsql_stage ORDER BY dfsql_seq DESC LIMIT 1) last WHERE NOT "
                        "last.is_retraction")
            return
        ident = _names(self.key)
        # `=`, which a hash join can use (IS NOT DISTINCT FROM cannot: 100k changed
        # windows took minutes, measured): primary-key columns are never NULL
        same = " AND ".join(f"t.{quoted(c)} = s.{quoted(c)}" for c in self.key)
        cur.execute(f"DELETE FROM {self._target} t USING (SELECT DISTINCT {ident} FROM "
                    f"dfsql_stage) s WHERE {same}")
        cur.execute(f"INSERT INTO {self._target} ({names}) SELECT {names} FROM (SELECT "
                    f"DISTINCT ON ({ident}) * FROM dfsql_stage ORDER BY {ident}, dfsql_seq "
                    "DESC) last WHERE NOT last.is_retraction")


class PostgresChangelog(_PostgresSink):
    """Every result row of a query appended to ``schema.table`` of ``connection``, pane
    columns and ``is_retraction`` included, with its ``batch_id`` and ``batch_row``, its
    place in the batch's changelog order (docs/reference.md#output-columns): a reader
    orders by the two. Primary key (batch_id, batch_row)."""

    _with_batch_id = True

    def _layout(self, schema: StructType, row_key: tuple[str, ...]
                ) -> tuple[list[tuple[str, str]], list[str]]:
        rows = [(f.name, pg_type(f.dataType)) for f in schema.fields
                if f.name != "is_retraction"]
        return ([*rows, ("is_retraction", "boolean"), ("batch_row", "bigint"),
                 ("batch_id", "bigint")], ["batch_id", "batch_row"])

    @staticmethod
    def as_changelog(spark: SparkSession, connection: Connection, schema: str,
                     table: str) -> DataFrame:
        """The table's rows, a changelog (ALTER's restatement reads it)."""
        rows = read_table(spark, connection, schema, table)
        assert rows is not None  # opened by the running query
        return rows.drop("batch_row", "batch_id")

    def _write(self, cur: Any, data: bytes) -> None:
        names = _names(c for c, _ in self.columns)
        with cur.copy(f"COPY {self._target} ({names}) FROM STDIN (FORMAT csv, HEADER "
                      "true)") as copy:
            copy.write(data)


def _lost() -> tuple[type[BaseException], ...]:
    """The errors that mean the connection or the server went away (tried again)."""
    import psycopg

    return (psycopg.OperationalError, psycopg.errors.AdminShutdown,
            psycopg.errors.CannotConnectNow)


def _refused() -> tuple[type[BaseException], ...]:
    """The database's refusals of what a sink asks at its start (not a loss)."""
    import psycopg

    return (psycopg.errors.InsufficientPrivilege, psycopg.ProgrammingError,
            psycopg.DataError, psycopg.IntegrityError)


def _primary(error: BaseException, conn: Connection) -> str:
    """The database's own sentence, without the statement it quotes."""
    primary = getattr(getattr(error, "diag", None), "message_primary", None)
    return said(primary or error, conn)


def _names(names: Iterable[str]) -> str:
    return ", ".join(quoted(n) for n in names)


def _typed(columns: list[tuple[str, str]]) -> str:
    return ", ".join(f"{quoted(n)} {t}" for n, t in columns)


def _csv(batch: DataFrame, batch_id: int | None = None, not_null: list[str] = ()) -> bytes:
    """The batch as CSV for ``COPY``, in changelog order, with its row's place in it
    (and ``batch_id`` on every row, when given); a NULL in a ``not_null`` column is
    refused."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = batch.toArrow()
    for name in not_null:
        if table.column(name).null_count:
            raise DatabaseError(
                f"a row whose {name} is NULL cannot be in the table: {name} is part of "
                "its primary key (the group keys and the window), which PostgreSQL holds "
                "without NULLs", hint=f"COALESCE({name}, …) in the SELECT and the GROUP "
                f"BY, or WHERE {name} IS NOT NULL")
    table = table.append_column("dfsql_seq", pa.array(np.arange(table.num_rows)))
    others = [c for c in table.column_names if c not in ("is_retraction", "dfsql_seq")]
    table = table.select([*others, "is_retraction", "dfsql_seq"])
    if batch_id is not None:
        table = table.append_column("batch_id", pa.array(
            np.full(table.num_rows, batch_id, dtype=np.int64)))
    out = io.BytesIO()
    pacsv.write_csv(table, out)
    return out.getvalue()
