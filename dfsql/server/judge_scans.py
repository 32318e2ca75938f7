"""The second line behind the parsed-plan judgement: before a client's query runs, the
files Spark's *analysed* plan of it will scan — every file relation's root paths as
Hadoop qualified them (with the options the relation was made with: a ``fs.*`` option
that moves a path to another file system shows here as that file system's scheme) and
its format's class — must lie under the data roots and be one of the data sources a
client may read. The parsed plan is judged first (analysis itself lists files, to infer
a schema); this reads what analysis made of it, once per DataFrame dfsql hands back.

A view's body is read through, unless the view is one the operator's session setup made
before the session was handed to the client (its own files, e.g. ``--stream`` sources'),
a global temporary or a persistent one (made by dfsql, or judged when a client made it).
One small Java class, compiled once per JVM (as :mod:`dfsql.spark.parsed_plan`'s
walker), collects the scans in one py4j call: about 3 ms per DataFrame, 5 of them for
a windowed query of the paper's example (15–30 ms against its 4.5 s).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_JAVA = r'''
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.catalyst.catalog.TemporaryViewRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.datasources.v2.FileTable;
import org.apache.spark.sql.execution.streaming.runtime.StreamingRelation;

public class DfsqlScans {
    /** The session's temporary views now (the operator's), by identity. */
    public java.util.Set trusted(SessionCatalog catalog) {
        java.util.Set out = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap());
        scala.collection.Iterator it = catalog.getTempViewNames().iterator();
        while (it.hasNext()) {
            scala.Option raw = catalog.getRawTempView((String) it.next());
            if (raw.isDefined()) out.add(((TemporaryViewRelation) raw.get()).tableMeta());
        }
        return out;
    }

    /** "kind TAB class TAB path" per scanned root path. */
    public String scans(LogicalPlan plan, java.util.Set trusted) {
        StringBuilder out = new StringBuilder();
        visit(plan, trusted, out, 0);
        return out.toString();
    }

    private static void line(StringBuilder out, String kind, String cls, String path) {
        out.append(kind).append('\t').append(cls).append('\t').append(path).append('\n');
    }

    private void paths(StringBuilder out, String kind, String cls, scala.collection.Iterator it) {
        while (it.hasNext()) line(out, kind, cls, it.next().toString());
    }

    private void visit(LogicalPlan p, java.util.Set trusted, StringBuilder out, int depth) {
        if (depth > 3000) throw new IllegalStateException("dfsql: plan too deep");
        if (p instanceof View) {
            View v = (View) p;
            if (!v.isTempView() || v.desc().identifier().database().isDefined()
                    || trusted.contains(v.desc())) return;
        }
        if (p instanceof LogicalRelation) {
            Object r = ((LogicalRelation) p).relation();
            if (r instanceof HadoopFsRelation) {
                HadoopFsRelation h = (HadoopFsRelation) r;
                boolean table = ((LogicalRelation) p).catalogTable().isDefined();
                paths(out, table ? "table" : "file", h.fileFormat().getClass().getName(),
                      h.location().rootPaths().iterator());
            }
        } else if (p instanceof DataSourceV2Relation) {
            Object t = ((DataSourceV2Relation) p).table();
            if (t instanceof FileTable) {
                paths(out, "file", t.getClass().getName(), ((FileTable) t).fileIndex().rootPaths().iterator());
            }
        } else if (p instanceof StreamingRelation) {
            StreamingRelation s = (StreamingRelation) p;
            scala.Option path = s.dataSource().options().get("path");
            line(out, "stream", s.dataSource().className(), path.isDefined() ? (String) path.get() : "");
        }
        scala.collection.Iterator c = p.children().iterator();
        while (c.hasNext()) visit((LogicalPlan) c.next(), trusted, out, depth + 1);
        scala.collection.Iterator s = p.subqueries().iterator();
        while (s.hasNext()) visit((LogicalPlan) s.next(), trusted, out, depth + 1);
    }
}
'''
_KINDS = (("parquet", "Parquet"), ("orc", "Orc"), ("csv", "CSV"), ("json", "Json"),
          ("text", "Text"))
#: the classes of the data sources a client may read (judge.SOURCES) in a file relation:
#: their file formats, and their file tables when Spark reads them as V2
FILE_CLASSES = frozenset(
    [f"org.apache.spark.sql.execution.datasources.{s}.{t}FileFormat" for s, t in _KINDS] +
    [f"org.apache.spark.sql.execution.datasources.v2.{s}.{t}Table" for s, t in _KINDS])

_lock = threading.Lock()
_compiled: dict[int, Any] = {}  # id of the JVM gateway -> the compiled collector


def _collector(spark: SparkSession) -> Any:
    key = id(spark.sparkContext._gateway)
    with _lock:
        found = _compiled.get(key)
        if found is None:
            jvm = spark.sparkContext._jvm
            compiler = jvm.org.codehaus.janino.SimpleCompiler()
            compiler.setParentClassLoader(
                jvm.java.lang.Thread.currentThread().getContextClassLoader())
            compiler.cook(_JAVA)
            cls = compiler.getClassLoader().loadClass("DfsqlScans")
            found = _compiled[key] = cls.getDeclaredConstructor(None).newInstance(None)
        return found


def trusted_views(spark: SparkSession) -> Any:
    """The session's temporary views as they are now (the operator's, before a client
    has the session): their bodies are not read (a JVM set, by identity, so a client's
    view of the same name made later is read)."""
    return _collector(spark).trusted(spark._jsparkSession.sessionState().catalog())


def scans(spark: SparkSession, df: DataFrame, trusted: Any) -> list[tuple[str, str, str]]:
    """(kind, class, path) of every file scan of ``df``'s analysed plan: ``file`` (a
    file relation's root path, its format's class), ``table`` (the same of a catalog
    table's), ``stream`` (a streaming source's provider name and ``path`` option)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:  # Spark Connect: the judge refuses to serve it (Judge.prepare)
        return []
    text = _collector(spark).scans(jdf.queryExecution().analyzed(), trusted)
    return [tuple(line.split("\t", 2)) for line in text.splitlines()]  # type: ignore[misc]


def scan_refusal(found: list[tuple[str, str, str]], allowed: Callable[[str, str], bool],
                 outside: Callable[[str], str | None] | None) -> tuple[str, bool] | None:
    """(why, whether it is the data source's class) of the first scan refused: its
    class not ``allowed(kind, class)``, or its path ``outside`` the roots (None: any
    path). A catalog
    table's class and place were judged when it was made (a managed one is in the
    warehouse, not under a root): only its file system is checked here."""
    for kind, cls, path in found:
        if kind == "table":
            if outside is not None and path and not path.startswith("file:"):
                return f"Spark's plan of it reads the table at {path!r}, on another " \
                       "file system than this server's", False
            continue
        if not allowed(kind, cls):
            return f"Spark's plan of it reads files with {cls}, not a data source this " \
                   "server reads", True
        why = outside(path) if path and outside is not None else None
        if why is not None:
            return f"Spark's plan of it reads {path!r}, which is {why}", False
    return None
