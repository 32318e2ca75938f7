"""A persistent catalog for the sessions dfsql creates: the warehouse directory is it.

Spark's own catalog (without Hive) lives in the driver's memory: a table made with
``CREATE TABLE t AS ...`` is gone when the process ends while its files stay in the
warehouse, so making it again fails with ``LOCATION_ALREADY_EXISTS``. Hive's embedded
Derby metastore would keep it, but Derby lets one process at a time open it: the shell
and ``dfsql serve`` could not run side by side. So dfsql keeps the catalog in the
warehouse itself, where any number of processes can read it:

* every table directory holds ``.dfsql-table.sql``, its ``SHOW CREATE TABLE`` (a file
  name starting with a dot, which Spark's file listing skips), written right after the
  statement that made or altered it;
* a session dfsql creates registers every table directory it finds (``CREATE TABLE …
  LOCATION``, and databases as ``name.db`` directories), then makes the table *managed*
  again, so that ``DROP TABLE`` deletes its files as it does for a table made here;
* before and after each statement, :func:`sync` compares the warehouse with what it saw
  (one directory listing and a stat per table): a table another process made, altered,
  filled or dropped is registered, re-registered, refreshed or forgotten.

A directory without the file (written by Spark outside dfsql) is registered when it holds
Parquet or ORC files, whose schema is in the data. Persistent views (plain ones, and the
windowed views of :mod:`dfsql.spark.catalog.views`) have no directory: each one's ``SHOW CREATE
TABLE`` is kept in ``.dfsql-views/<db>.<view>.sql`` in the warehouse, written after the
statement that made, altered or dropped it, and made again (or dropped) by every other
process at its next statement. An external table (``CREATE TABLE … LOCATION`` outside
the warehouse, with columns or as CTAS) has its directory elsewhere: its ``SHOW CREATE
TABLE``, LOCATION included, is kept in ``.dfsql-external/<db>.<table>.sql`` the same way,
and DROP TABLE forgets it everywhere but leaves its files. Sessions dfsql did not create
are never touched; over Spark Connect the server owns the catalog.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from dfsql.errors import DfsqlError
from dfsql.language.scan import Token, name_end, scan_text, splice
from dfsql.language.scan import quoted_name as _q
from dfsql.setting import setting_while

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dfsql.language.statement import Statement

#: the table's definition, inside its directory (hidden from Spark's file listing)
DEFINITION = ".dfsql-table.sql"
#: the persistent views' definitions, in the warehouse
VIEWS = ".dfsql-views"
#: the external tables' definitions, in the warehouse
EXTERNAL = ".dfsql-external"
#: the first words of the statements after which table definitions are written again
_DDL = ("CREATE", "REPLACE", "ALTER", "DROP", "TRUNCATE", "MSCK", "RENAME")
#: data files whose schema Spark reads from the files themselves
_SELF_DESCRIBING = {".parquet": "parquet", ".orc": "orc"}


def warehouse_dir(warehouse: str | os.PathLike | None = None) -> Path:
    """The warehouse: the argument, else ``DFSQL_WAREHOUSE``, else Spark's default
    ``spark-warehouse`` in the current directory (absolute, so it does not move)."""
    chosen = warehouse or os.environ.get("DFSQL_WAREHOUSE") or "spark-warehouse"
    return Path(chosen).expanduser().resolve()


@dataclass
class _Seen:
    """A registered table as last seen: its directory's and definition's mtimes."""

    db: str
    table: str
    dir_mtime: int
    def_mtime: int

    @property
    def name(self) -> str:
        """`db`.`table`"""
        return f"{_q(self.db)}.{_q(self.table)}"


@dataclass
class Catalog:
    """The warehouse of the process's dfsql-created Spark (one per SparkContext)."""

    spark: SparkSession
    warehouse: Path
    seen: dict[Path, _Seen] = field(default_factory=dict)
    databases: set[str] = field(default_factory=set)
    #: each view definition file as last read or written: its mtime
    views_seen: dict[str, int] = field(default_factory=dict)
    #: each external table's definition file as last read or written: its mtime
    external_seen: dict[str, int] = field(default_factory=dict)
    #: the endpoint's sessions are threads of one process sharing this object: one sync at
    #: a time, or two of them forget the same dropped table (a KeyError) or register it twice
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    # ------------------------------------------------------------------ the warehouse
    def _table_dirs(self) -> dict[Path, tuple[str, str]]:
        """Every table directory: {path: (database, table)}."""
        out: dict[Path, tuple[str, str]] = {}
        for db, base in [("default", self.warehouse), *self._database_dirs()]:
            try:
                entries = list(os.scandir(base))
            except OSError:
                continue
            for e in entries:
                if e.is_dir() and not e.name.startswith((".", "_")) and \
                        not (db == "default" and e.name.endswith(".db")):
                    out[Path(e.path)] = (db, e.name)
        return out

    def _database_dirs(self) -> list[tuple[str, Path]]:
        try:
            return [(e.name[:-3], Path(e.path)) for e in os.scandir(self.warehouse)
                    if e.is_dir() and e.name.endswith(".db")]
        except OSError:
            return []

    # ------------------------------------------------------------------ the JVM side
    def _jcatalog(self):
        return self.spark._jsparkSession.sessionState().catalog()

    def _ident(self, db: str, table: str):
        jvm = self.spark._jvm
        return jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply(
            table, jvm.scala.Some(db))

    def _exists(self, db: str, table: str) -> bool:
        return bool(self._jcatalog().tableExists(self._ident(db, table)))

    def _set_type(self, db: str, table: str, kind: str) -> None:
        """Make the table MANAGED (DROP TABLE deletes its files) or EXTERNAL (it does
        not). Spark has no statement for it; the catalog's own alterTable does it."""
        jc = self._jcatalog()
        meta = jc.getTableMetadata(self._ident(db, table))
        # a case class: copy() takes every field, and copy$default$i is field i's value
        args = [getattr(meta, f"copy$default${i}")() for i in range(1, meta.productArity() + 1)]
        types = self.spark._jvm.org.apache.spark.sql.catalyst.catalog.CatalogTableType
        args[1] = getattr(types, kind)()  # CatalogTable(identifier, tableType, ...)
        jc.alterTable(meta.copy(*args))

    # ------------------------------------------------------------------ sync
    def sync(self, statement: Statement | str | None = None) -> None:
        """Bring the session's catalog and the warehouse's definitions in line (see the
        module doc); after a DDL ``statement``, write this process's tables' definitions."""
        with self.lock:
            self._sync(statement)

    def _sync(self, statement: Statement | str | None) -> None:
        dirs = self._table_dirs()
        dbs = {db for db, _ in self._database_dirs()}
        for db in dbs - self.databases:
            self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {_q(db)}")
        self.databases = dbs
        for path in [p for p in self.seen if p not in dirs]:  # dropped (here or elsewhere)
            self._forget(path)
        ddl = statement is not None and _is_ddl(statement)
        for path, (db, table) in dirs.items():
            seen = self.seen.get(path)
            defn = path / DEFINITION
            def_mtime = _mtime(defn)
            if seen is not None and def_mtime != seen.def_mtime and not ddl:
                self._forget(path)  # made again or altered elsewhere: read it again
                seen = None
            if seen is None:
                if self._exists(db, table):  # made by this process
                    self._define(path, db, table)
                elif not self._register(path, db, table):
                    continue
            elif ddl and self._exists(db, table):
                self._define(path, db, table)
            elif _mtime(path) != seen.dir_mtime:  # new files (INSERT here or elsewhere)
                self.spark.sql(f"REFRESH TABLE {seen.name}")
            self.seen[path] = _Seen(db, table, _mtime(path), _mtime(defn))
        if ddl:
            self._write_external()
            self._write_views()
        else:
            self._read_external()
            self._read_views()

    # ------------------------------------------------------------------ views
    def _read_views(self) -> None:
        """Make (again) the views another process defined or changed; drop those it
        dropped. A view over a table not registered yet is tried again next time."""
        from pyspark.errors import PySparkException

        folder = self.warehouse / VIEWS
        files = {p.name: p for p in folder.glob("*.sql")} if folder.is_dir() else {}
        for fname, path in files.items():
            mtime = _mtime(path)
            if self.views_seen.get(fname) == mtime:
                continue
            try:
                with _verbatim(self.spark):
                    self.spark.sql(_or_replace(path.read_text()))
            except (OSError, DfsqlError, PySparkException):
                continue
            self.views_seen[fname] = mtime
        for fname in [f for f in self.views_seen if f not in files]:
            del self.views_seen[fname]
            self.spark.sql(f"DROP VIEW IF EXISTS {_view_name(fname)}")

    def _write_views(self) -> None:
        """After DDL here: every persistent view's definition written (when changed), and
        the file of a view seen before and gone now removed."""
        folder = self.warehouse / VIEWS
        here: set[str] = set()
        for db in {"default", *self.databases}:
            # SHOW VIEWS, not catalog.listTables: the names only, without resolving every
            # table of the database (listTables fails on any table it cannot resolve)
            for view in self.spark.sql(f"SHOW VIEWS IN {_q(db)}").collect():
                if not view.isTemporary:
                    fname = _view_file(db, view.viewName)
                    here.add(fname)
                    text = self.spark.sql(
                        f"SHOW CREATE TABLE {_q(db)}.{_q(view.viewName)}").collect()[0][0]
                    self.views_seen[fname] = _write_if_changed(folder, fname, text)
        for fname in [f for f in self.views_seen if f not in here]:
            del self.views_seen[fname]
            (folder / fname).unlink(missing_ok=True)

    # ------------------------------------------------------------------ external tables
    def _write_external(self) -> None:
        """After DDL here: the definition of every external table outside the warehouse
        written (when changed), and the file of one seen before and gone now removed."""
        folder = self.warehouse / EXTERNAL
        inside = {(t.db, t.table) for t in self.seen.values()}
        here: set[str] = set()
        jc = self._jcatalog()
        for db in {"default", *self.databases}:
            for row in self.spark.sql(f"SHOW TABLES IN {_q(db)}").collect():
                if row.isTemporary or (db, row.tableName) in inside:
                    continue
                meta = jc.getTableMetadata(self._ident(db, row.tableName))
                if meta.tableType().name() != "EXTERNAL":
                    continue
                fname = _view_file(db, row.tableName)
                here.add(fname)
                text = self.spark.sql(
                    f"SHOW CREATE TABLE {_q(db)}.{_q(row.tableName)}").collect()[0][0]
                self.external_seen[fname] = _write_if_changed(folder, fname, text)
        for fname in [f for f in self.external_seen if f not in here]:
            del self.external_seen[fname]
            (folder / fname).unlink(missing_ok=True)

    def _read_external(self) -> None:
        """Register (again) the external tables another process (or an earlier run)
        defined or changed; forget, files kept, those it dropped."""
        from pyspark.errors import PySparkException

        folder = self.warehouse / EXTERNAL
        files = {p.name: p for p in folder.glob("*.sql")} if folder.is_dir() else {}
        for fname, path in files.items():
            mtime = _mtime(path)
            if self.external_seen.get(fname) == mtime:
                continue
            name = _view_name(fname)
            try:
                text = path.read_text()
                tokens = scan_text(text).tokens
                if fname in self.external_seen:  # changed elsewhere: read it again
                    self.spark.sql(f"DROP TABLE IF EXISTS {name}")
                with _verbatim(self.spark):
                    self.spark.sql(_if_not_exists(text, tokens, name))
                if _partitioned(tokens):
                    self.spark.sql(f"ALTER TABLE {name} RECOVER PARTITIONS")
            except (OSError, DfsqlError, PySparkException):  # its database not made yet,
                continue  # or being written: tried again next time
            self.external_seen[fname] = mtime
        for fname in [f for f in self.external_seen if f not in files]:
            del self.external_seen[fname]
            self.spark.sql(f"DROP TABLE IF EXISTS {_view_name(fname)}")  # external: files stay

    def _define(self, path: Path, db: str, table: str) -> None:
        """Write the table's definition next to its files."""
        text = self.spark.sql(f"SHOW CREATE TABLE {_q(db)}.{_q(table)}").collect()[0][0]
        _write_if_changed(path, DEFINITION, text)

    def _register(self, path: Path, db: str, table: str) -> bool:
        """Register a directory another process (or an earlier run) made; False when it
        holds no table dfsql can read back."""
        name = f"{_q(db)}.{_q(table)}"
        location = str(path).replace("\\", "\\\\").replace("'", "\\'")
        try:
            text = (path / DEFINITION).read_text()
        except OSError:
            fmt = _format_of(path)
            if fmt is None:
                return False
            text = f"CREATE TABLE {name} USING {fmt}"
        from pyspark.errors import PySparkException

        try:
            # SHOW CREATE TABLE's text, made IF NOT EXISTS and placed at the directory
            tokens = scan_text(text).tokens
            text = _if_not_exists(text, tokens, name)
            with _verbatim(self.spark):
                self.spark.sql(f"{text}\nLOCATION '{location}'")
            if _partitioned(tokens):
                self.spark.sql(f"ALTER TABLE {name} RECOVER PARTITIONS")
            self._set_type(db, table, "MANAGED")
        except (DfsqlError, PySparkException):  # unreadable (being written, or not a
            return False  # table): skip it
        return True

    def _forget(self, path: Path) -> None:
        """Drop a table from this session's catalog but not its files (gone already, or
        about to be registered again)."""
        seen = self.seen.pop(path)
        if self._exists(seen.db, seen.table):
            self._set_type(seen.db, seen.table, "EXTERNAL")
            self.spark.sql(f"DROP TABLE IF EXISTS {seen.name}")


#: Spark's substitution of ``${…}`` in a statement's text
_SUBSTITUTE = "spark.sql.variable.substitute"


@contextmanager
def _verbatim(spark: SparkSession) -> Iterator[None]:
    """No ``${…}`` substitution while the catalog runs the definitions it keeps: each is
    Spark's ``SHOW CREATE TABLE`` of an object, substituted already (or not: an endpoint
    client's text) when it was made; run on this process's session, whose substitution
    is on, a client's ``${env:…}`` would become the server's environment."""
    with setting_while(spark, _SUBSTITUTE, "false"):
        yield


def _is_ddl(statement: Statement | str) -> bool:
    """Whether the statement's first word makes, alters or drops a table or view (read
    from its tokens: a leading comment is no word)."""
    try:
        tokens = scan_text(statement).tokens if isinstance(statement, str) else (
            statement.scanned or scan_text(statement.text)).tokens
    except DfsqlError:  # not a statement Spark runs either
        return False
    return bool(tokens) and tokens[0].is_word(*_DDL)


def _or_replace(text: str) -> str:
    """``CREATE VIEW …`` (a definition file) as ``CREATE OR REPLACE VIEW …``."""
    tokens = scan_text(text).tokens
    if len(tokens) > 1 and tokens[0].is_word("CREATE") and tokens[1].is_word("VIEW"):
        return splice(text, [(tokens[0].start, tokens[1].end, "CREATE OR REPLACE VIEW")],
                      keep_offsets=False)
    return text


def _if_not_exists(text: str, tokens: list[Token], name: str) -> str:
    """``CREATE TABLE <any name> …`` (a definition) as ``CREATE TABLE IF NOT EXISTS name …``."""
    if len(tokens) > 2 and tokens[0].is_word("CREATE") and tokens[1].is_word("TABLE"):
        end = name_end(tokens, 2)
        if end > 2:
            return splice(text, [(tokens[0].start, tokens[end - 1].end,
                                  f"CREATE TABLE IF NOT EXISTS {name}")], keep_offsets=False)
    return text


def _partitioned(tokens: list[Token]) -> bool:
    """A definition with PARTITIONED BY (its partitions are recovered from the directory)."""
    return any(t.depth == 0 and t.is_word("PARTITIONED") and u.is_word("BY")
               for t, u in zip(tokens, tokens[1:], strict=False))


def _view_file(db: str, view: str) -> str:
    return quote(db, safe="").replace(".", "%2E") + "." + quote(view, safe="").replace(".", "%2E") + ".sql"


def _view_name(fname: str) -> str:
    db, view = fname[:-len(".sql")].split(".", 1)
    return f"{_q(unquote(db))}.{_q(unquote(view))}"


def _write_if_changed(folder: Path, fname: str, text: str) -> int:
    """Write ``text`` to ``folder/fname`` unless it is there already (other processes
    need not read it again); atomic (another process reads all or nothing), through a
    file whose name starts with a dot (Spark's file listing skips it). Returns the file's
    mtime."""
    path = folder / fname
    try:
        if path.read_text() == text:
            return _mtime(path)
    except OSError:
        folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{fname}.{os.getpid()}"
    tmp.write_text(text)
    tmp.replace(path)
    return _mtime(path)


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def _format_of(path: Path) -> str | None:
    """The format of a directory of self-describing data files (partitions included)."""
    for _, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]  # e.g. _temporary
        for f in files:
            if not f.startswith((".", "_")):
                for ext, fmt in _SELF_DESCRIBING.items():
                    if f.endswith(ext):
                        return fmt
    return None


#: the catalog of the session dfsql created in this process, if any
_CATALOG: Catalog | None = None


def attach(spark: SparkSession, warehouse: Path) -> Catalog:
    """Keep ``spark``'s catalog in ``warehouse`` (a session dfsql just created)."""
    global _CATALOG
    _CATALOG = Catalog(spark, warehouse)
    _CATALOG.sync()
    return _CATALOG


def sync(spark: SparkSession, statement: Statement | str | None = None) -> None:
    """:meth:`Catalog.sync` when ``spark`` shares the SparkContext of the session dfsql
    created (the endpoint's per-client sessions do); else nothing."""
    cat = _CATALOG
    if cat is None:
        return
    if _context(spark) is _context(cat.spark) is not None:
        cat.sync(statement)


def _context(spark: SparkSession):
    """The session's SparkContext; None over Spark Connect, which has none."""
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001 - PySparkAttributeError on Spark Connect
        return None
