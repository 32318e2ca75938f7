"""Spark's parsed plan of a statement as a Python value, so that what dfsql decides about
a statement it decides on the tree Spark will run, not on its text: the endpoint's
judgement (:mod:`dfsql.server.judge`), the tables a persistent view reads
(:mod:`dfsql.spark.catalog.views`).

Spark's own parser (the session's ``sqlParser``: its settings, its variable
substitution) parses the text; a small Java class, compiled once per JVM with the
Janino compiler that Spark ships for its code generation, walks the tree inside the JVM
and hands back one JSON document: a record per tree node (its class, its parent, the
field of the parent that holds it, its position in the text) and the node's own values
(strings, numbers, option maps, nested case classes) by field path. One py4j call for the
whole tree instead of one per field: judging a statement costs about a millisecond.

The walk is generic (every field of every case class), so a node class it has never
seen is still read to its leaves; it is bounded in depth and in size, and a tree beyond
either is refused rather than half read.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: the walk's bounds: values read, and nesting (a statement's parentheses are capped far
#: below this before Spark parses it; a long chain like 1+1+...+1 nests too)
MAX_VALUES, MAX_DEPTH = 200_000, 3_000

_JAVA = r'''
import java.util.IdentityHashMap;
import scala.Option;
import scala.Product;
import org.apache.spark.sql.catalyst.trees.TreeNode;
import org.apache.spark.sql.catalyst.trees.Origin;

public class DfsqlPlanWalk implements java.util.function.Function {
    private final StringBuilder out = new StringBuilder();
    private final IdentityHashMap seen = new IdentityHashMap();
    private int nodes = 0;
    private int values = 0;
    private final int maxValues;
    private final int maxDepth;

    public DfsqlPlanWalk() { this(MAX_VALUES, MAX_DEPTH); }
    public DfsqlPlanWalk(int maxValues, int maxDepth) { this.maxValues = maxValues; this.maxDepth = maxDepth; }

    public Object apply(Object root) {
        DfsqlPlanWalk w = new DfsqlPlanWalk(maxValues, maxDepth);
        w.out.append('[');
        w.node((TreeNode) root, -1, "", 0);
        w.out.append(']');
        return w.out.toString();
    }

    private static void str(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') { b.append('\\').append(c); }
            else if (c < 0x20 || c == 0x2028 || c == 0x2029) {
                String h = Integer.toHexString(c);
                b.append("\\u");
                for (int k = h.length(); k < 4; k++) b.append('0');
                b.append(h);
            } else { b.append(c); }
        }
        b.append('"');
    }

    private static int opt(Option o) {
        return o.isDefined() ? ((Integer) o.get()).intValue() : -1;
    }

    private int node(TreeNode n, int parent, String path, int depth) {
        if (depth > maxDepth) throw new IllegalStateException("dfsql: plan too deep");
        int id = nodes++;
        if (id > 0) out.append(',');
        Origin o = n.origin();
        out.append("{\"i\":").append(id).append(",\"p\":").append(parent).append(",\"f\":");
        str(out, path);
        out.append(",\"c\":");
        str(out, n.getClass().getName());
        out.append(",\"o\":[").append(opt(o.line())).append(',').append(opt(o.startPosition()))
           .append(',').append(opt(o.startIndex())).append(',').append(opt(o.stopIndex())).append("]}");
        StringBuilder mine = new StringBuilder();
        fields(n, id, "", mine, depth);
        if (mine.length() > 0) {
            out.append(",{\"v\":").append(id).append(",\"x\":[").append(mine).append("]}");
        }
        return id;
    }

    private void leaf(StringBuilder mine, String path, String value) {
        if (++values > maxValues) throw new IllegalStateException("dfsql: plan too large");
        if (mine.length() > 0) mine.append(',');
        mine.append('[');
        str(mine, path);
        mine.append(',');
        str(mine, value);
        mine.append(']');
    }

    private void fields(Product p, int id, String prefix, StringBuilder mine, int depth) {
        int n = p.productArity();
        for (int i = 0; i < n; i++) {
            String name;
            try { name = p.productElementName(i); } catch (Exception e) { name = "_" + (i + 1); }
            value(p.productElement(i), id, prefix.length() == 0 ? name : prefix + "." + name, mine, depth + 1);
        }
    }

    private void value(Object v, int id, String path, StringBuilder mine, int depth) {
        if (v == null) return;
        if (depth > maxDepth) throw new IllegalStateException("dfsql: plan too deep");
        if (v instanceof TreeNode) { node((TreeNode) v, id, path, depth + 1); return; }
        if (v instanceof String) { leaf(mine, path, (String) v); return; }
        if (v instanceof Option) {
            Option o = (Option) v;
            if (o.isDefined()) value(o.get(), id, path, mine, depth + 1);
            return;
        }
        if (v instanceof scala.collection.Map) {
            scala.collection.Iterator it = ((scala.collection.Map) v).iterator();
            while (it.hasNext()) {
                scala.Tuple2 t = (scala.Tuple2) it.next();
                value(t._2(), id, path + "[" + String.valueOf(t._1()) + "]", mine, depth + 1);
            }
            return;
        }
        if (v instanceof java.util.Map) {
            java.util.Iterator it = ((java.util.Map) v).entrySet().iterator();
            while (it.hasNext()) {
                java.util.Map.Entry e = (java.util.Map.Entry) it.next();
                value(e.getValue(), id, path + "[" + String.valueOf(e.getKey()) + "]", mine, depth + 1);
            }
            return;
        }
        if (v instanceof scala.collection.Iterable) {
            scala.collection.Iterator it = ((scala.collection.Iterable) v).iterator();
            int k = 0;
            while (it.hasNext()) { value(it.next(), id, path + "." + k, mine, depth + 1); k++; }
            return;
        }
        if (v instanceof java.lang.Iterable) {
            java.util.Iterator it = ((java.lang.Iterable) v).iterator();
            int k = 0;
            while (it.hasNext()) { value(it.next(), id, path + "." + k, mine, depth + 1); k++; }
            return;
        }
        if (v instanceof Product && ((Product) v).productArity() > 0 && !seen.containsKey(v)) {
            seen.put(v, v);
            fields((Product) v, id, path, mine, depth);
            return;
        }
        if (v instanceof Object[]) {
            Object[] a = (Object[]) v;
            for (int k = 0; k < a.length; k++) value(a[k], id, path + "." + k, mine, depth + 1);
            return;
        }
        leaf(mine, path, v.toString());
    }
}
'''

_lock = threading.Lock()
_walkers: dict[int, Any] = {}  # id of the JVM gateway -> the compiled walker


class PlanTooLarge(Exception):
    """A tree deeper or larger than the walk's bounds."""


@dataclass(frozen=True)
class Node:
    """One node of the parsed plan (a logical plan or an expression)."""

    id: int
    parent: int
    #: the field of the parent that holds it, e.g. ``child``, ``projectList.0``
    field: str
    #: the Java class's full name
    cls: str
    #: (line, column in line, start offset, stop offset): -1 where Spark has none
    origin: tuple[int, int, int, int]
    #: the node's own leaf values by field path, e.g. ``("options[path]", "/x")``
    values: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        """The class's simple name (``UnresolvedRelation``)."""
        return self.cls.rsplit(".", 1)[-1].rsplit("$", 1)[-1]

    def value(self, path: str) -> str | None:
        return next((v for p, v in self.values if p == path), None)

    def values_under(self, prefix: str) -> list[str]:
        """The values at ``prefix.0``, ``prefix.1``, … in order (a Seq of strings)."""
        return [v for p, v in self.values if p.startswith(prefix + ".")
                and p[len(prefix) + 1:].isdigit()]


@dataclass(frozen=True)
class Tree:
    """A parsed plan, flattened: ``nodes[0]`` is the root."""

    nodes: tuple[Node, ...]
    children_of: dict[int, tuple[Node, ...]] = field(default_factory=dict)

    def children(self, node: Node) -> tuple[Node, ...]:
        return self.children_of.get(node.id, ())

    def child(self, node: Node, field_name: str) -> Node | None:
        return next((c for c in self.children(node) if c.field == field_name), None)


def _walker(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm
    key = id(spark.sparkContext._gateway)
    with _lock:
        walker = _walkers.get(key)
        if walker is None:
            compiler = jvm.org.codehaus.janino.SimpleCompiler()
            compiler.setParentClassLoader(
                jvm.java.lang.Thread.currentThread().getContextClassLoader())
            compiler.cook(_JAVA.replace("MAX_VALUES", str(MAX_VALUES))
                          .replace("MAX_DEPTH", str(MAX_DEPTH)))
            cls = compiler.getClassLoader().loadClass("DfsqlPlanWalk")
            walker = cls.getDeclaredConstructor(None).newInstance(None)
            _walkers[key] = walker
        return walker


def parse_plan(spark: SparkSession, text: str) -> Any:
    """Spark's parsed (unresolved) plan of ``text``, by the session's own parser: what
    ``spark.sql(text)`` would analyse and run. Raises Spark's ParseException."""
    return _as_active(spark, lambda parser: parser.parsePlan(text))


def parse_identifier(spark: SparkSession, text: str) -> list[str]:
    """A multi-part name's parts as Spark reads ``IDENTIFIER('…')``'s string."""
    parts = _as_active(spark, lambda parser: parser.parseMultipartIdentifier(text))
    return str(parts.mkString("\u0000")).split("\u0000")


#: Spark's SparkSession class (its static methods), per JVM
_companions: dict[int, Any] = {}


def _as_active(spark: SparkSession, call: Any) -> Any:
    """``call(parser)`` on the session's parser with the session active in this thread,
    as ``spark.sql`` runs it: the parser reads its settings (``${…}`` substitution above
    all, off in an endpoint client's session) from the thread's active session, which
    is otherwise whichever session this JVM thread last ran, often the operator's."""
    jss = spark._jsparkSession
    jvm = spark.sparkContext._jvm
    companion = _companions.get(id(jvm))
    if companion is None:  # a py4j round trip per name of its package: looked up once
        companion = _companions[id(jvm)] = jvm.org.apache.spark.sql.classic.SparkSession
    before = companion.getActiveSession()
    companion.setActiveSession(jss)
    try:
        return call(jss.sessionState().sqlParser())
    finally:
        if before.isDefined():
            companion.setActiveSession(before.get())
        else:
            companion.clearActiveSession()


def walk(spark: SparkSession, plan: Any) -> Tree:
    """The tree of a parsed plan (a JVM object) as a :class:`Tree`."""
    try:
        text = _walker(spark).apply(plan)
    except Exception as e:  # noqa: BLE001 (py4j's error: the bound that was hit)
        if "dfsql: plan too" in str(e):
            raise PlanTooLarge(str(e).split("dfsql: ", 1)[1].splitlines()[0]) from None
        raise
    nodes: list[Node] = []
    values: dict[int, tuple[tuple[str, str], ...]] = {}
    for rec in json.loads(text):
        if "v" in rec:
            values[rec["v"]] = tuple((p, v) for p, v in rec["x"])
        else:
            nodes.append(Node(rec["i"], rec["p"], rec["f"], rec["c"], tuple(rec["o"])))
    nodes = [Node(n.id, n.parent, n.field, n.cls, n.origin, values.get(n.id, ()))
             for n in nodes]
    children: dict[int, list[Node]] = {}
    for n in nodes:
        children.setdefault(n.parent, []).append(n)
    return Tree(tuple(nodes), {k: tuple(v) for k, v in children.items()})


def relations_read(spark: SparkSession, text: str) -> list[tuple[str, int]]:
    """(name, offset) of every table or view the statement ``text`` reads by name, as
    Spark parses it (a CTE's own name is not one; ``format.`path``` tables are).
    Spark's answer, not the text-level one (:mod:`dfsql.language.facts`): the persistent
    view's check of temporary inputs must see what Spark will resolve when the view is
    next planned, by Spark's rules for names and CTEs."""
    tree = walk(spark, parse_plan(spark, text))
    ctes = {v.lower() for n in tree.nodes for p, v in n.values
            if n.name == "UnresolvedWith" and p.startswith("cteRelations.") and
            p.endswith("._1")}
    out = []
    for n in tree.nodes:
        if n.name == "UnresolvedRelation":
            parts = n.values_under("multipartIdentifier")
            if len(parts) == 1 and parts[0].lower() in ctes:
                continue
            out.append((".".join(f"`{p}`" for p in parts), max(n.origin[2], 0)))
    return out
