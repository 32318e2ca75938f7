"""The judge's rule for objects with owners: every table, view, global temp view and
database a client creates through the endpoint is its creator's
(:mod:`dfsql.server.object_owners`), and a continuous query's ``global_temp`` view its
query's owner's. Only the owner, or an admin (``dfsql serve --admin``), may drop,
replace, alter, rename, truncate, repair, insert into, or (a database) drop or alter
it; an object no client created is an admin's to change. Reading another user's
object is allowed, unless the server was started with ``--private-objects``.

The targets are read from Spark's parsed tree as Spark will resolve them: the name
nodes of each command (``UnresolvedIdentifier``, ``UnresolvedTable``, …, the table an
``INSERT`` writes, marked by Spark's own write-privilege option), the views
``CreateViewCommand`` and ``CreateTempViewUsing`` create, a root
``IDENTIFIER('…')`` builder unfolded first (:func:`built`); a bare name is the
session's temp view if it has one (its own), else a table of the session's current
database; ``spark_catalog.``, case and quoting as Spark reads them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dfsql.continuous import owners as query_owners
from dfsql.continuous_actors import Actor, NotOwnerError, actor, not_owner
from dfsql.language.continuous import ContinuousStatement
from dfsql.language.scan import Source, quoted_name
from dfsql.server.judge_text import Refusal, locate
from dfsql.server.object_owners import Registry, database_key, table_key
from dfsql.server.owner_rows import described, tables_shown
from dfsql.spark.parsed_plan import Node, Tree, _as_active, walk

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_NAMES = frozenset({"UnresolvedIdentifier", "UnresolvedTable", "UnresolvedTableOrView",
                    "UnresolvedView", "UnresolvedRelation", "UnresolvedNamespace"})
_VIEWS = frozenset({"CreateViewCommand", "CreateTempViewUsing"})
#: commands that only read the object they name (anything else naming one changes it)
_READING = re.compile(r"Describe|Show|Refresh|Analyze|CacheTable$|UncacheTable$|"
                      r"SetCatalogAndNamespace$")
_CREATES = {"CreateTable": "table", "CreateTableAsSelect": "table", "CreateView": "view",
            "CreateTableLike": "table"}
_REPLACES = frozenset({"ReplaceTable", "ReplaceTableAsSelect"})
_GLOBAL = "global temporary view"
#: where a name dfsql's own parse placed stands (not a node of Spark's tree)
_NOWHERE = Node(-1, -1, "", "", (-1, -1, -1, -1))
ADMIN = "dfsql serve --admin"


def built_tree(spark: SparkSession, plan: Any) -> Tree:
    """The tree of a parsed plan, a root ``IDENTIFIER('…')`` builder unfolded
    (:func:`built`; one more walk only then)."""
    tree = walk(spark, plan)
    if tree.nodes and tree.nodes[0].name == "PlanWithUnresolvedIdentifier":
        return walk(spark, built(spark, plan))
    return tree


def built(spark: SparkSession, plan: Any) -> Any:
    """The plan an ``IDENTIFIER('literal')`` builder at the root stands for (``CREATE
    GLOBAL TEMP VIEW IDENTIFIER('v') …``, ``… USING … OPTIONS``: the view's type and
    options are inside the builder), built as Spark's analyzer will build it; the plan
    itself when it is no such builder or its name is no name (Spark refuses it)."""
    for _ in range(8):
        if plan.getClass().getSimpleName() != "PlanWithUnresolvedIdentifier":
            return plan
        expr = plan.identifierExpr()
        if expr.getClass().getSimpleName() != "Literal" or expr.value() is None:
            return plan
        text = str(expr.value())
        try:
            parts = _as_active(spark, lambda parser, t=text: parser.parseMultipartIdentifier(t))
            plan = plan.planBuilder().apply(parts, plan.children())
        except Exception:  # noqa: BLE001 (not a name, too many parts: Spark's error)
            return plan
    return plan


@dataclass(frozen=True)
class Target:
    """An object a node names: its database and name (a database: its name and ""),
    what the node does to it, and where its name is written."""

    db: str
    name: str
    kind: str
    how: str  # read | create | replace | change | drop | rename | drop_database
    node: Node
    written: str
    #: a rename's new (database, name); a DROP DATABASE's CASCADE
    renamed: tuple[str, str] = ("", "")
    cascade: bool = False

    @property
    def key(self) -> str:
        return database_key(self.db) if self.kind == "database" else \
            table_key(self.db, self.name)

    @property
    def shown(self) -> str:
        return self.db.lower() if self.kind == "database" else \
            f"{self.db.lower()}.{self.name.lower()}"


class OwnerRule:
    """The rule (one per judge): refusals, and what a statement's success records."""

    def __init__(self, private_objects: bool = False) -> None:
        self.registry = Registry()
        self.private_objects = private_objects
        self._local = threading.local()

    # ---------------------------------------------------------------- the statement
    @contextmanager
    def planning(self) -> Iterator[list[tuple]]:
        """While one ``spark.sql`` text is judged and run: what it will record."""
        before = getattr(self._local, "planned", None)
        self._local.planned = planned = []
        try:
            yield planned
        finally:
            self._local.planned = before

    def continuous_view(self, spark: SparkSession, text: str, stmt: ContinuousStatement,
                        global_temp: str) -> None:
        """CREATE STREAMING QUERY q makes ``global_temp.q`` (on the server's own session,
        which is not judged): refused, at the name, when that view is another user's (or
        no client's); else, once it succeeds, the view is the creator's, also after a
        STOP leaves it behind."""
        who = actor()
        if stmt.kind != "create" or stmt.name is None or who.user is None:
            return
        t = Target(global_temp, stmt.name, _GLOBAL, "replace", _NOWHERE, stmt.name)
        owner, known = self._owner(t)
        if not (_query_of(t) is not None or _exists(spark, t)):  # a stale entry's, too
            self._plan("record", t.key, who.user, _GLOBAL, t.shown)
            return
        if who.admin or owner == who.user:
            self._plan("record", t.key, who.user if owner is None else owner, _GLOBAL,
                       t.shown)
            return
        found = self._refused(stmt.name, t, owner, "change")
        raise Source(text).error(found.error, found.message, max(stmt.name_offset, 0),
                                 found.hint)

    def _plan(self, *effect: object) -> None:
        planned = getattr(self._local, "planned", None)
        if planned is not None:
            planned.append(effect)

    def done(self, spark: SparkSession | None, planned: list[tuple],
             df: DataFrame | None) -> DataFrame | None:
        """The statement succeeded: record its creations, drops and renames; DESCRIBE
        … EXTENDED and SHOW TABLES gain the owner (``df``: its result, if Spark's)."""
        for effect in planned:
            what = effect[0]
            if what == "record":
                self.registry.record(*effect[1:])
            elif what == "forget":
                self.registry.forget(*effect[1:])
            elif what == "move":
                self.registry.move(*effect[1:])
            elif df is None:
                continue
            elif what == "describe":
                df = described(spark, df, self._owner(effect[1])[0])
            elif what == "show_tables":
                df = tables_shown(df, self.registry.owners_of_tables())
        return df

    # ---------------------------------------------------------------- the tree
    def refusal(self, spark: SparkSession, text: str, tree: Tree, node: Node,
                global_temp: str) -> Refusal | None:
        """Why ``node`` may not do what it does to another user's object, or None
        (EXPLAIN runs nothing: it changes, reads and records nothing)."""
        if tree.nodes[0].name == "ExplainCommand":
            return None
        if node.name == "DescribeRelation" and node.value("isExtended") == "true":
            rel = tree.child(node, "relation")
            target = None if rel is None else self._target(spark, tree, rel, global_temp,
                                                           describing=True)
            if target is not None:
                self._plan("describe", target)
        elif node.name == "ShowTables":
            self._plan("show_tables")
        if node.name not in _NAMES and node.name not in _VIEWS:
            return None
        who = actor()
        if who.user is None:  # the process itself
            return None
        target = self._target(spark, tree, node, global_temp)
        return None if target is None else self._judge(spark, text, target, who)

    def _judge(self, spark: SparkSession, text: str, t: Target,
               who: Actor) -> Refusal | None:
        owner, known = self._owner(t)
        mine = who.admin or (owner is not None and owner == who.user)
        if t.how == "read":
            if not self.private_objects or owner is None or mine:
                return None
            return self._refused(text, t, owner, "read")
        if t.how in ("create", "replace"):
            if not _exists(spark, t):  # new (a stale entry of a name now free: replaced)
                self._plan("record", t.key, who.user, t.kind, t.shown)
                return None
            if t.how == "create":  # Spark refuses it, or IF NOT EXISTS does nothing
                return None
        elif not mine and owner is None and not known and not _exists(spark, t):
            return None  # no such object: Spark says so
        if not mine:
            return self._refused(text, t, owner, "change")
        if t.how == "drop":
            self._plan("forget", t.key)
        elif t.how == "rename":
            db, name = t.renamed
            self._plan("move", t.key, table_key(db, name), f"{db.lower()}.{name.lower()}")
        elif t.how == "drop_database":
            return self._drop_database(spark, text, t, who)
        return None

    def _drop_database(self, spark: SparkSession, text: str, t: Target,
                       who: Actor) -> Refusal | None:
        """DROP DATABASE … CASCADE drops every table in it: the dropper's to drop, each."""
        db = t.db
        inside = self.registry.under(db)
        if t.cascade and not who.admin:
            for key, entry in sorted(inside.items()):
                if entry.get("owner") != who.user:
                    name = entry.get("shown", key).split(".", 1)[-1]
                    return self._refused(text, Target(db, name, entry.get("kind", "table"),
                                                      "change", t.node, t.written),
                                         entry.get("owner"), "change")
            for name in _tables_in(spark, db):
                if table_key(db, name) not in inside:
                    return self._refused(text, Target(db, name, "table", "change", t.node,
                                                      t.written), None, "change")
        self._plan("forget", t.key, *inside)
        return None

    def _owner(self, t: Target) -> tuple[str | None, bool]:
        """(owner, known): a continuous query's view is its query's (known even without
        an owner: made by the process); else the registry's."""
        if t.kind == _GLOBAL:
            for query, owner in query_owners().items():
                if query.lower() == t.name.lower():
                    return owner, True
        owner = self.registry.owner(t.key)
        return owner, owner is not None

    def _refused(self, text: str, t: Target, owner: str | None, doing: str) -> Refusal:
        at = locate(text, t.node, t.written)
        query = _query_of(t) if t.kind == _GLOBAL else None
        if query is not None and owner is not None and doing == "change":
            return Refusal(NotOwnerError, not_owner(query, owner, f"its view {t.shown}"),
                           f"reading {t.shown} is allowed; changing it is not", at,
                           t.written)
        if owner is None:
            return Refusal(NotOwnerError, f"the {t.kind} {t.shown} was not created by a "
                           f"client of this server: it is an admin's to change ({ADMIN})",
                           "reading it is allowed; CREATE one of your own", at, t.written)
        flag = ADMIN if doing == "change" else "dfsql serve --private-objects"
        hint = ("reading it is allowed; CREATE one of your own" if doing == "change" else
                "ask its owner for a copy, or an admin")
        return Refusal(NotOwnerError, f"the {t.kind} {t.shown} belongs to user {owner!r}: "
                       f"it is theirs or an admin's to {doing} ({flag})", hint, at, t.written)

    # ---------------------------------------------------------------- names
    def _target(self, spark: SparkSession, tree: Tree, node: Node, global_temp: str,
                describing: bool = False) -> Target | None:
        """The object ``node`` names and what its command does to it (None: none, a
        session's own temp view, a CTE, another catalog's)."""
        if node.name in _VIEWS:
            return _view_target(spark, node, global_temp)
        parent = tree.nodes[node.parent] if node.parent >= 0 else None
        pname = parent.name if parent is not None else ""
        if node.name == "UnresolvedNamespace":
            return _database_target(node, pname, parent)
        parts = node.values_under("nameParts") or node.values_under("multipartIdentifier")
        how, kind = _how(node, parent)
        if how == "read" and not (self.private_objects or describing):
            return None
        if node.name == "UnresolvedRelation" and how == "read" and _cte(tree, node, parts):
            return None
        where = _resolve(spark, parts, temp_ok=how not in ("create", "replace"))
        if where is None:
            return None
        db, name = where
        if db.lower() == global_temp:
            kind = _GLOBAL
        renamed = ("", "")
        if how == "rename" and parent is not None:
            new = parent.values_under("newName") or [name]
            renamed = (new[-2] if len(new) > 1 else db, new[-1])
        return Target(db, name, kind, how, node, parts[-1], renamed)


def _how(node: Node, pnode: Node | None) -> tuple[str, str]:
    """What the command ``pnode`` does to the table or view ``node`` names."""
    parent = pnode.name if pnode is not None else ""
    if node.name == "UnresolvedRelation":
        writes = any(p.startswith("options[__required_write_privileges__") for p, _ in
                     node.values)
        return ("change" if writes else "read"), "table"
    if parent in _CREATES and node.field in ("name", "child"):
        replace = pnode is not None and pnode.value("replace") == "true"
        return ("replace" if replace else "create"), _CREATES[parent]
    if parent in _REPLACES:
        return "replace", "table"
    if parent in ("DropTable", "DropView"):
        return "drop", "table"
    if parent == "RenameTable":
        return "rename", "table"
    if _READING.match(parent) or parent == "CreateTableLike":
        return "read", "table"
    return "change", "table"


def _view_target(spark: SparkSession, node: Node, global_temp: str) -> Target | None:
    """The view a CreateViewCommand or CreateTempViewUsing creates (a session's own temp
    view: none)."""
    how = "replace" if node.value("replace") == "true" else "create"
    if node.name == "CreateTempViewUsing":
        if node.value("global") != "true":
            return None
        name = node.value("tableIdent.table") or ""
        return Target(global_temp, name, _GLOBAL, how, node, name)
    name = node.value("name.table") or ""
    kind = node.value("viewType")
    if kind == "GlobalTempView":
        return Target(global_temp, name, _GLOBAL, how, node, name)
    if kind == "PersistedView":
        return Target(node.value("name.database") or _current(spark), name, "view", how,
                      node, name)
    return None


def _database_target(node: Node, parent: str, pnode: Node | None) -> Target | None:
    parts = node.values_under("multipartIdentifier")
    if len(parts) == 2 and parts[0].lower() == "spark_catalog":
        parts = parts[1:]
    if len(parts) != 1:
        return None
    if parent == "CreateNamespace":
        how = "create"
    elif parent == "DropNamespace":
        how = "drop_database"
    elif _READING.match(parent):
        return None
    else:
        how = "change"
    cascade = pnode is not None and pnode.value("cascade") == "true"
    name = parts[0]
    return Target(name, "", "database", how, node, name, cascade=cascade)


def _cte(tree: Tree, node: Node, parts: list[str]) -> bool:
    """Whether a one-part name read at ``node`` is a CTE's in scope there (a CTE's own
    definition sees only those before it, unless WITH RECURSIVE)."""
    if len(parts) != 1:
        return False
    name, child = parts[0].lower(), node
    while child.parent >= 0:
        up = tree.nodes[child.parent]
        if up.name == "UnresolvedWith":
            names = [v.lower() for p, v in up.values
                     if p.startswith("cteRelations.") and p.endswith("._1")]
            m = re.match(r"cteRelations\.(\d+)\._2", child.field)
            if m is not None:  # inside the definition of CTE number m
                upto = int(m.group(1)) + (up.value("allowRecursion") == "true")
                names = names[:upto]
            if name in names:
                return True
        child = up
    return False


def _resolve(spark: SparkSession, parts: list[str], temp_ok: bool) -> tuple[str, str] | None:
    """(database, name) a table name stands for, as Spark resolves it; None for a
    session's own temp view or another catalog's table."""
    p = list(parts)
    if len(p) == 3 and p[0].lower() == "spark_catalog":
        p = p[1:]
    if len(p) == 1:
        if temp_ok and _is_temp_view(spark, p[0]):
            return None
        return _current(spark), p[0]
    if len(p) == 2:
        return p[0], p[1]
    return None


def _query_of(t: Target) -> str | None:
    return next((q for q in query_owners() if q.lower() == t.name.lower()), None)


def _current(spark: SparkSession) -> str:
    return spark.catalog.currentDatabase()


def _is_temp_view(spark: SparkSession, name: str) -> bool:
    return bool(spark._jsparkSession.sessionState().catalog().getTempView(name).isDefined())


def _exists(spark: SparkSession, t: Target) -> bool:
    """Whether the object exists now (before the statement runs)."""
    try:
        if t.kind == "database":
            return bool(spark.catalog.databaseExists(quoted_name(t.db)))
        return bool(spark.catalog._jcatalog.tableExists(t.db, t.name))
    except Exception:  # noqa: BLE001 (a name Spark refuses: it refuses the statement)
        return False


def _tables_in(spark: SparkSession, db: str) -> list[str]:
    """The tables and views of database ``db`` (not the session's temp views)."""
    try:
        seq = spark._jsparkSession.sessionState().catalog().listTables(db, "*", False)
        return [str(seq.apply(i).table()).lower() for i in range(seq.size())]
    except Exception:  # noqa: BLE001 (no such database: Spark says so)
        return []
