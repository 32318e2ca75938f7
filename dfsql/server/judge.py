"""The endpoint judges every statement a client's session hands to Spark on the plan
Spark will run, not on its text. Each text dfsql runs for a client — the statement
itself, and every query dfsql builds from a windowed statement — and each relation it
opens by name (``WATERMARK FROM t``: as ``SELECT * FROM t``) passes through the
session's door (:mod:`dfsql.spark.door`, :mod:`dfsql.server.judge_door`) and is parsed
first by the session's own parser (:mod:`dfsql.spark.parsed_plan`), and the tree is read before anything runs. A
string that Spark would parse later (``EXECUTE IMMEDIATE '…'``) is parsed and judged
the same way; a name or statement that exists only when the statement runs
(``IDENTIFIER(variable)``, ``EXECUTE IMMEDIATE variable``) cannot be judged, so it is
refused. What is refused, each with SQLSTATE 42501 at the place it was written:

* code on the server (lifted by ``--allow-jvm-functions``): script transforms
  (``TRANSFORM`` / ``MAP`` / ``REDUCE … USING``), function creation, ``reflect``,
  ``java_method`` and ``try_reflect``, ``ADD JAR|FILE|ARCHIVE``, data sources other
  than parquet, orc, csv, json and text (JDBC runs a driver's code), and ``SET`` of a
  setting other than a session's own (:mod:`dfsql.server.settings`);
* files outside the data roots (lifted by ``--allow-any-path``): every path the plan
  names — ``format.`path``` tables, ``path``/``paths`` options, table, partition and
  database ``LOCATION``\\ s, insert and load targets — as Hadoop will read it
  (:mod:`dfsql.server.paths`).

And with SQLSTATE 54000 what would cost more than a bound lets it: Spark's own
``window()`` over ``--max-windows-per-row`` (:mod:`dfsql.server.judge_windows`).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsql.errors import DfsqlError
from dfsql.language.continuous import ContinuousStatement
from dfsql.language.scan import Source
from dfsql.language.statement import Statement
from dfsql.server.guard import HINT, JVM_FUNCTIONS, JvmNotAllowedError, NotAllowedError
from dfsql.server.judge_door import HEAD, JudgedDoor
from dfsql.server.judge_owners import OwnerRule, built_tree
from dfsql.server.judge_scans import FILE_CLASSES, scan_refusal, scans, trusted_views
from dfsql.server.judge_system import name_refusal, system_refusal
from dfsql.server.judge_text import (
    Refusal,
    code_refusal,
    jvm_call,
    literal_child,
    locate,
    option_field,
    path_values,
    placed,
    start_of,
    unjudged,
)
from dfsql.server.judge_windows import window_refusal
from dfsql.server.options import option_refusal, reads_files
from dfsql.server.paths import ROOT_HINT, PathNotAllowedError, outside, roots_text
from dfsql.server.settings import setting_rule
from dfsql.spark import door
from dfsql.spark.parsed_plan import (
    Node,
    PlanTooLarge,
    Tree,
    parse_identifier,
    parse_plan,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the data sources a client may read and write
SOURCES = ("parquet", "orc", "csv", "json", "text")
#: how deep EXECUTE IMMEDIATE '…' may nest inside itself
MAX_NESTING = 4
_RESOURCES = {"AddJarsCommand": "JAR", "AddFilesCommand": "FILE", "AddArchivesCommand": "ARCHIVE"}
_PATH_FIELDS = frozenset({"location", "locationuri", "path", "paths"})


@dataclass(frozen=True)
class Policy:
    """What a client may do: None roots (``--allow-any-path``) is any path."""

    data_roots: tuple[str, ...] | None = ()
    allow_code: bool = False
    #: another user's objects may not even be read (``--private-objects``)
    private_objects: bool = False

    @property
    def judges(self) -> bool:
        return self.data_roots is not None or not self.allow_code


class Judge:
    """Judges texts for one server's clients (thread-safe: sessions share it)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._sources: dict[str, str | None] = {}  # a source's name -> its class, or None
        self._allowed_classes: frozenset[str] | None = None
        self._cwd: str | None = None
        #: the database of Spark's global temp views (a static setting)
        self._global_temp = "global_temp"
        self._local = threading.local()
        self._lock = threading.Lock()
        #: who owns the objects clients create, and the rule on them
        self.owners = OwnerRule(policy.private_objects)

    # ---------------------------------------------------------------- the session
    def guard(self, spark: SparkSession) -> None:
        """From now on every text and every relation dfsql reads for this (client's)
        session passes the judgement first: its door (:mod:`dfsql.spark.door`) is this
        judge's (dfsql's catalog bookkeeping runs on the server's own session)."""
        if self.policy.judges:
            door.keep(spark, JudgedDoor(self, trusted_views(spark)))

    def check_scans(self, spark: SparkSession, df: DataFrame, trusted: object) -> None:
        """Raise a refusal when Spark's analysed plan of ``df`` (about to run) scans a
        file outside the roots or with a data source a client may not use
        (:mod:`dfsql.server.judge_scans`): the second line behind :meth:`check`, while
        a client's statement is planned (not in a stream's micro-batches, or a kept
        query's restart: their texts are dfsql's, made from a statement judged whole)."""
        shown = getattr(self._local, "statement", None)
        if shown is None:
            return
        roots, cwd = self.policy.data_roots, self._working_dir()

        def allowed(kind: str, cls: str) -> bool:
            if self.policy.allow_code:
                return True
            if kind == "stream":
                return self._class_of(spark, cls) in self._allowed(spark)
            return cls in FILE_CLASSES

        found = scan_refusal(scans(spark, df, trusted), allowed, None if roots is None
                             else lambda path: outside(path, roots, cwd))
        if found is None:
            return
        error, hint = (JvmNotAllowedError, HINT) if found[1] else \
            (PathNotAllowedError, ROOT_HINT)
        raise Source(shown.written).error(
            error, f"this server reads and writes files only under its data roots "
            f"({roots_text(roots)}) and with its data sources ({', '.join(SOURCES)}): "
            f"{found[0]}" if roots is not None else found[0], 0, hint)

    @contextmanager
    def statement(self, stmt: Statement | ContinuousStatement) -> Iterator[None]:
        """While a client's statement runs: refusals in texts dfsql builds from it are
        placed where their fragment starts a token of it (:func:`placed`)."""
        self._local.statement = stmt
        try:
            with self.owners.planning() as planned:  # a windowed CREATE VIEW's, CREATE
                yield                                # STREAMING QUERY's: not spark.sql's
                self.owners.done(None, planned, None)
        finally:
            self._local.statement = None

    def check_statement(self, spark: SparkSession,
                        stmt: Statement | ContinuousStatement) -> None:
        """Judge a client's whole statement, as dfsql parsed it (once, for this and for
        ``dfsql.sql``), before dfsql plans it: a windowed one as the Spark SQL its
        blocks are made of (:meth:`Statement.spark_sql`, offsets kept), so that nothing
        of it — an aggregate's argument, a source in a subquery — waits for dfsql's
        planning to be seen; a continuous query's paths and its query too (the query
        parsed with the statement: :attr:`ContinuousStatement.statement`). A plain
        statement is judged as dfsql hands it to Spark, at its door (:meth:`guard`); a query dfsql
        cannot parse is dfsql's to report, and runs nothing."""
        if not self.policy.judges:
            return
        text = stmt.written
        if isinstance(stmt, ContinuousStatement):
            if stmt.kind == "explain":  # its WHERE runs over the query's events
                self._check_events_where(spark, text, stmt.where)
            if stmt.kind not in ("create", "alter"):  # ALTER's query runs as CREATE's
                return
            self.check_continuous(text, stmt)
            self.owners.continuous_view(spark, text, stmt, self._global_temp)
            if stmt.backfill is not None and stmt.backfill.sql is not None:
                # BACKFILL FROM's relation, as Spark will read it, at the offsets written
                self.check(spark, stmt.backfill.sql, exact=True)
            if stmt.statement is None:  # its error is raised when it starts
                return
            stmt = stmt.statement
        if not stmt.windowed and stmt.kind not in ("explain_firings", "explain_watermark"):
            return
        self.check(spark, stmt.spark_sql(), exact=True)
        for name, at in stmt.facts.named:  # WATERMARK FROM t, TRY FROM t
            self.check_name(spark, name, (stmt.written, at))
        # its WHERE, blanked in the query's text
        self._check_events_where(spark, text, stmt.firings_where)

    def _check_events_where(self, spark: SparkSession, text: str,
                            where: tuple[int, str] | None) -> None:
        """EXPLAIN FIRINGS' WHERE on the events (offset in ``text``, predicate)."""
        head = "SELECT 1 WHERE "
        found = None if where is None else self.refusal(spark, head + where[1])
        if found is not None and where is not None:
            at = where[0]
            raise Source(text).error(found.error, found.message,
                                     at + max(found.offset - len(head), 0), found.hint)

    def check(self, spark: SparkSession, text: str, exact: bool = False) -> None:
        """Raise the positioned refusal of ``text``, if any (``exact``: its offsets are
        the client's statement's)."""
        found = self.refusal(spark, text)
        if found is None:
            return
        where, offset = text, found.offset
        shown: Statement | ContinuousStatement | None = getattr(self._local, "statement",
                                                                None)
        if shown is not None and shown.written != text and not exact:
            where, offset = shown.written, placed(shown, found.fragment)
        raise Source(where).error(found.error, found.message, offset, found.hint)

    def check_name(self, spark: SparkSession, name: str,
                   written: tuple[str, int] | None = None) -> None:
        """Raise the refusal of reading the relation ``name`` as ``spark.table`` does:
        judged as ``SELECT * FROM <name>``, placed in the client's statement (``written``:
        its text and the name's offset in it; else where the name starts a token)."""
        found = self.refusal(spark, HEAD + name)
        if found is None:
            return
        inner = max(found.offset - len(HEAD), 0)
        shown = getattr(self._local, "statement", None)
        if written is None and shown is not None:
            written = (shown.written, placed(shown, name))
        if written is None or written[1] < 0:
            where, offset = HEAD + name, found.offset
        else:
            where, offset = written[0], written[1] + (
                inner if written[0].startswith(name, written[1]) else 0)
        raise Source(where).error(found.error, found.message, offset, found.hint)

    # ---------------------------------------------------------------- the tree
    def refusal(self, spark: SparkSession, text: str, nesting: int = 0) -> Refusal | None:
        """The first thing ``text`` may not do, or None. Spark's ParseException when
        Spark cannot parse it (as ``spark.sql`` would raise it: nothing runs)."""
        try:
            tree = built_tree(spark, parse_plan(spark, text))
        except PlanTooLarge as e:
            return Refusal(NotAllowedError, f"the statement's plan is {e}: this server "
                           "judges a statement before it runs and cannot read this one",
                           "write it in smaller steps", 0)
        for node in tree.nodes:
            found = self._node(spark, text, tree, node, nesting)
            if found is not None:
                return found
        return None

    def _node(self, spark: SparkSession, text: str, tree: Tree, node: Node,
              nesting: int) -> Refusal | None:
        code, paths = not self.policy.allow_code, self.policy.data_roots is not None
        name = node.name
        if code and name == "ScriptTransformation":
            return code_refusal(text, node, "TRANSFORM, MAP and REDUCE … USING run a program on "
                         "the server: this server does not run them")
        if code and re.match(r"Create\w*Function", name):
            return code_refusal(text, node, "CREATE FUNCTION defines code for the server to run "
                         "(a JVM class or a SQL body): this server does not allow it")
        if code and name in _RESOURCES:  # allowed, its ``paths`` are checked below
            return code_refusal(text, node, f"ADD {_RESOURCES[name]} loads code or files into "
                         "the server's JVM: this server does not allow it")
        if code and name == "UnresolvedFunction":
            parts = node.values_under("nameParts")
            if parts and parts[-1].lower() in JVM_FUNCTIONS:
                return jvm_call(text, node, parts[-1])
        if name in ("UnresolvedFunction", "ExpressionWithUnresolvedIdentifier"):
            found = window_refusal(spark, text, tree, node)  # Spark's window(): its cost
            if found is not None:
                return found
        if name in ("ExpressionWithUnresolvedIdentifier", "PlanWithUnresolvedIdentifier"):
            found = self._identifier(spark, text, tree, node)
            if found is not None:
                return found
        if name == "UnresolvedExecuteImmediate":
            found = self._execute_immediate(spark, text, tree, node, nesting)
            if found is not None:
                return found
        if code and name in ("SetCommand", "ResetCommand"):
            refused = setting_rule(node)
            if refused is not None:
                return Refusal(JvmNotAllowedError, refused[0], HINT,
                               locate(text, node, refused[1]), refused[1])
        found = system_refusal(text, node) or self.owners.refusal(spark, text, tree, node,
                                                                  self._global_temp)
        if found is None and paths:  # option keys: lifted with the roots
            found = option_refusal(text, tree, node, lambda n: self._file_source(spark, n),
                                   lambda literal: parse_identifier(spark, literal))
        if found is not None:
            return found
        if name == "UnresolvedRelation":
            found = self._relation(spark, text, node, node.values_under("multipartIdentifier"))
            if found is not None:
                return found
        for path, value in node.values:
            field = option_field(path)
            if code and field == "provider":
                found = self._source(spark, text, node, value)
            elif paths and field in _PATH_FIELDS:
                found = self._paths(text, node, path_values(field, value))
            else:
                found = None
            if found is not None:
                return found
        if paths and name == "OptionList":  # ('path' '…') options left as expressions
            for path, key in node.values:
                if path.endswith("._1") and key.lower() in ("path", "paths"):
                    lit = tree.child(node, path[:-2] + "._2")
                    value = lit.value("value") if lit is not None else None
                    if value is not None:
                        found = self._paths(text, node, path_values(key.lower(), value))
                        if found is not None:
                            return found
        return None

    # ---------------------------------------------------------------- rules
    def _identifier(self, spark: SparkSession, text: str, tree: Tree,
                    node: Node) -> Refusal | None:
        """``IDENTIFIER('name')`` is read as Spark will read it; ``IDENTIFIER(expr)`` is a
        name known only when the statement runs."""
        arg, literal = literal_child(tree, node, "identifierExpr")
        if literal is None:
            return unjudged(text, node, "IDENTIFIER(…) of an expression names a table or "
                             "function only when the statement runs, and this server "
                             "judges a statement before it runs", "write the name itself, "
                             "or IDENTIFIER('name') with a literal")
        try:
            parts = parse_identifier(spark, literal)
        except Exception:  # noqa: BLE001 (not a name: Spark refuses it when it runs)
            return None
        if node.name == "ExpressionWithUnresolvedIdentifier":
            if not self.policy.allow_code and parts[-1].lower() in JVM_FUNCTIONS:
                return jvm_call(text, node, f"IDENTIFIER('{literal}')")
            return None
        for namespace in (False, True):  # a table in system, or the database itself
            found = name_refusal(text, node, parts, namespace, built=True)
            if found is not None:
                return found
        return self._relation(spark, text, node, parts)

    def _execute_immediate(self, spark: SparkSession, text: str, tree: Tree, node: Node,
                           nesting: int) -> Refusal | None:
        """The statement an ``EXECUTE IMMEDIATE`` runs, judged as a statement."""
        arg, inner = literal_child(tree, node, "sqlStmtStr")
        if inner is None:
            return unjudged(text, node, "EXECUTE IMMEDIATE of a statement built when it "
                             "runs (a variable or an expression) cannot be judged before "
                             "it runs: this server does not run it", "write the statement "
                             "itself, or EXECUTE IMMEDIATE '…' with a literal")
        if nesting >= MAX_NESTING:
            return unjudged(text, node, f"EXECUTE IMMEDIATE nested more than {MAX_NESTING} "
                             "deep", "write the statement itself")
        from pyspark.errors import ParseException

        try:
            found = self.refusal(spark, inner, nesting + 1)
        except ParseException:  # not a statement: Spark refuses it when it runs
            return None
        if found is None:
            return None
        at = start_of(arg) + 1 + max(0, found.offset) if arg is not None else start_of(node)
        return Refusal(found.error, found.message, found.hint, at, found.fragment)

    def _relation(self, spark: SparkSession, text: str, node: Node,
                  parts: Sequence[str]) -> Refusal | None:
        """``format.`path``` reads files (Spark's ResolveSQLOnFile: two parts, the first
        a data source); any other name is a table. Judged on Spark's own parse, not on
        the text-level answer (:mod:`dfsql.language.facts`): a security check must see
        the relations Spark will run, as Spark reads them."""
        if len(parts) != 2 or self._class_of(spark, parts[0]) is None:
            return None
        if not self.policy.allow_code:
            found = self._source(spark, text, node, parts[0])
            if found is not None:
                return found
        if self.policy.data_roots is None:
            return None
        return self._paths(text, node, [parts[1]])

    def _source(self, spark: SparkSession, text: str, node: Node,
                name: str) -> Refusal | None:
        cls = self._class_of(spark, name)
        if cls is not None and cls in self._allowed(spark):
            return None
        return Refusal(JvmNotAllowedError, f"the data source {name} is not one this server "
                       f"reads or writes ({', '.join(SOURCES)}): others run code of their "
                       "own on the server (JDBC drivers above all)", HINT,
                       locate(text, node, name), name)

    def _paths(self, text: str, node: Node, paths: Sequence[str]) -> Refusal | None:
        roots = self.policy.data_roots
        if roots is None:
            return None
        for path in paths:
            why = outside(path, roots, self._working_dir())
            if why is not None:
                return Refusal(PathNotAllowedError, f"this server reads and writes files "
                               f"only under its data roots ({roots_text(roots)}): {path!r} "
                               f"is {why}", ROOT_HINT, locate(text, node, path), path)
        return None

    # ---------------------------------------------------------------- Spark's facts
    def _class_of(self, spark: SparkSession, name: str) -> str | None:
        """The class Spark loads for data source ``name`` (None: not a data source)."""
        key = name.lower()
        with self._lock:
            if key in self._sources:
                return self._sources[key]
        jvm = spark.sparkContext._jvm
        try:
            cls = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
                name, spark._jsparkSession.sessionState().conf()).getName()
        except Exception:  # noqa: BLE001 (no such source)
            cls = None
        with self._lock:
            self._sources[key] = cls
        return cls

    def _file_source(self, spark: SparkSession, name: str) -> str | None:
        """Which of SOURCES ``name`` is (:data:`dfsql.server.options.Sources`)."""
        cls = self._class_of(spark, name)
        known = None if cls is None else next(
            (s for s in SOURCES if self._class_of(spark, s) == cls), None)
        return known if known or cls is None or reads_files(spark, cls) else ""

    def _working_dir(self) -> str:
        """What a relative path is relative to: the JVM's working directory (Hadoop's
        local one), learnt at :meth:`prepare`; this process's before that."""
        return self._cwd or os.getcwd()

    def _allowed(self, spark: SparkSession) -> frozenset[str]:
        if self._allowed_classes is None:
            self._allowed_classes = frozenset(
                c for c in (self._class_of(spark, s) for s in SOURCES) if c is not None)
        return self._allowed_classes

    def prepare(self, spark: SparkSession) -> None:
        """Compile the tree walker and learn the JVM's facts once, at start-up. Over
        Spark Connect there is no parser here to ask, so no promise can be kept."""
        if not self.policy.judges:
            return
        if getattr(spark, "_jsparkSession", None) is None:
            raise DfsqlError("over Spark Connect this server cannot read Spark's plan of a "
                             "statement before it runs, so it cannot keep clients to its "
                             "data roots or away from the JVM", hint="serve a classic Spark "
                             "session (--master), or trust every client: --allow-any-path "
                             "--allow-jvm-functions")
        self._global_temp = spark.conf.get("spark.sql.globalTempDatabase",
                                           "global_temp").lower()
        self._cwd = spark.sparkContext._jvm.java.lang.System.getProperty("user.dir")
        self._allowed(spark)
        self.refusal(spark, "SELECT 1")

    # ---------------------------------------------------------------- dfsql's own
    def check_continuous(self, text: str, stmt: ContinuousStatement) -> None:
        """A continuous query's ``INTO DIRECTORY`` and ``CHECKPOINT`` (dfsql's own
        clauses, read from dfsql's parse of the statement) must lie under a root."""
        roots = self.policy.data_roots
        if roots is None or stmt.kind != "create":
            return
        for path, at in ((stmt.path, stmt.path_offset),
                         (stmt.checkpoint, stmt.checkpoint_offset)):
            why = None if path is None else outside(path, roots, self._working_dir())
            if why is not None:  # at its quoted path's token (dfsql's parse placed it)
                raise Source(text).error(
                    PathNotAllowedError, f"this server reads and writes files only under "
                    f"its data roots ({roots_text(roots)}): {path!r} is {why}",
                    max(at, 0), ROOT_HINT)
