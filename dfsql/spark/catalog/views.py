"""Persistent windowed views: kept in Spark's catalog, read by dfsql as their query.

``CREATE VIEW v AS <windowed query>`` (no TEMP, docs/reference.md#writing-results) stores in the catalog a
view with the result's columns and types, whose own body raises an error naming dfsql,
and the windowed query's text in the view's properties. So ``DESCRIBE``, ``SHOW TABLES``
and the endpoint's metadata calls show dfsql's columns, plain Spark reading it gets a
clear error and never wrong rows, and every dfsql session reads it as the windowed query,
re-planned on each read (it sees the current input): before a statement is parsed, each
table it reads (after FROM or JOIN) that is such a view is replaced by its query as a
subquery (:func:`expand`), so the statement's windowed blocks include the view's.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dfsql.errors import AnalysisError, DfsqlError
from dfsql.language.scan import Token, name_end, scan_text, splice
from dfsql.language.vocabulary import CLAUSE_WORDS
from dfsql.spark import door
from dfsql.spark.catalog import database_tables
from dfsql.spark.errors import spark_errors
from dfsql.spark.parsed_plan import relations_read

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from dfsql.language.statement import Statement

#: the view's query is kept in properties ``dfsql.query.0`` … (a metastore caps one
#: property's length), their number in ``dfsql.query.parts``
PARTS = "dfsql.query.parts"
_CHUNK = 2000
#: words after a table name that are not its alias
_NOT_ALIAS = {
    "WHERE", "GROUP", "ORDER", "HAVING", "LIMIT", "OFFSET", "JOIN", "LEFT", "RIGHT", "FULL",
    "INNER", "CROSS", "OUTER", "NATURAL", "SEMI", "ANTI", "ON", "USING", "UNION", "INTERSECT",
    "EXCEPT", "MINUS", "LATERAL", "PIVOT", "UNPIVOT", "TABLESAMPLE", "CLUSTER", "DISTRIBUTE",
    "SORT", "SELECT", "INSERT", "FOR", "VERSION", "TIMESTAMP",
} | CLAUSE_WORDS  # WINDOW, WATERMARK, … (the grammar's)
_MAX_DEPTH = 16


def definition(spark: SparkSession, name: str) -> str | None:
    """The windowed query of the persistent view ``name`` (as written in SQL), or None
    when ``name`` is not one (a table, a temp view, a plain view, nothing)."""
    if not _is_persistent_view(spark, name):
        return None
    props = {r[0]: r[1] for r in door.sql(spark, f"SHOW TBLPROPERTIES {name}").collect()}
    parts = props.get(PARTS)
    if parts is None or not parts.isdigit():
        return None
    return "".join(props.get(f"dfsql.query.{i}", "") for i in range(int(parts)))


def _is_persistent_view(spark: SparkSession, name: str) -> bool:
    """Whether ``name`` is a view of the catalog (not a temp view). On classic Spark the
    JVM's catalog is asked directly: a name that is no table (a CTE's, a function's) is
    answered without an exception, which PySpark converts at a cost of tens of ms (on
    a small query, planning is most of dfsql's time)."""
    from pyspark.errors import AnalysisException

    jspark = getattr(spark, "_jsparkSession", None)
    try:
        if jspark is not None:
            catalog = jspark.catalog()
            if not catalog.tableExists(name):
                return False
            table = catalog.getTable(name)
            return not table.isTemporary() and table.tableType() == "VIEW"
        entry = spark.catalog.getTable(name)
    except (AnalysisException, ValueError):
        return False
    return not entry.isTemporary and entry.tableType == "VIEW"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def create(stmt: Statement, spark: SparkSession, body: str, schema: StructType) -> DataFrame:
    """``CREATE [OR REPLACE] VIEW [IF NOT EXISTS] v AS body`` for a windowed ``body``: the
    catalog's view has ``schema``'s columns and a body that raises an error naming dfsql;
    ``body`` (as the user wrote it) is kept in its properties."""
    name = stmt.text[stmt.view_name_offset:stmt.view_name_end]
    chunks = [body[i:i + _CHUNK] for i in range(0, len(body), _CHUNK)] or [""]
    props = [f"'{PARTS}' = '{len(chunks)}'"] + [
        f"'dfsql.query.{i}' = {_literal(c)}" for i, c in enumerate(chunks)]
    columns = ", ".join(f"CAST(NULL AS {f.dataType.simpleString()}) AS `{f.name.replace('`', '``')}`"
                        for f in schema.fields)
    refusal = _literal(f"{name} is a dfsql view (a windowed query that dfsql computes): read "
                       "it through dfsql (dfsql.sql, dfsql serve or the dfsql shell)")
    head = "CREATE OR REPLACE VIEW" if stmt.view_replace else "CREATE VIEW"
    exists = " IF NOT EXISTS" if stmt.view_if_not_exists else ""
    ddl = (f"{head}{exists} {name} TBLPROPERTIES ({', '.join(props)}) AS SELECT {columns} "
           f"FROM range(1) WHERE raise_error({refusal}) IS NULL")
    with spark_errors(stmt.source, lambda k: stmt.view_name_offset):
        return door.sql(spark, ddl)


def show_create(stmt: Statement, spark: SparkSession) -> DataFrame | None:
    """``SHOW CREATE TABLE v [AS SERDE]`` of a windowed view: the statement that makes it,
    with its clauses (Spark would show the body that refuses plain reads). Read from the
    statement's top-level tokens."""
    tokens = stmt.scanned.tokens if stmt.scanned is not None else scan_text(stmt.text).tokens
    top = [t for t in tokens if t.depth == 0]
    while top and top[-1].text == ";":
        top.pop()
    if len(top) < 4 or [t.upper for t in top[:3]] != ["SHOW", "CREATE", "TABLE"]:
        return None
    end = name_end(top, 3)
    rest = [t.upper for t in top[end:]]
    if end == 3 or rest not in ([], ["AS", "SERDE"]):
        return None
    name = stmt.text[top[3].start:top[end - 1].end]
    body = definition(spark, name)
    if body is None:
        return None
    return spark.createDataFrame([(f"CREATE VIEW {name} AS\n{body}",)], "createtab_stmt string")


# ---------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Expanded:
    """A statement with its windowed views replaced by their queries: the new text, and
    where each replacement stands in the old and new texts (to put errors back)."""

    text: str
    original: str
    #: (start, end in the original, start, end in the new text, view name), in order
    spans: tuple[tuple[int, int, int, int, str], ...] = ()
    #: every windowed view read, directly or through another (lower case, unquoted)
    reached: frozenset[str] = frozenset()
    #: the temp views of the database tables read (:mod:`.database_tables`), to drop
    made: tuple[str, ...] = ()

    @property
    def views(self) -> tuple[str, ...]:
        return tuple(s[4] for s in self.spans if s[4])

    def _offset(self, new: int) -> tuple[int, str | None]:
        shift = 0
        for o0, o1, n0, n1, name in self.spans:
            if new < n0:
                break
            if new < n1:
                return o0, name
            shift = o1 - n1
        return new + shift, None

    def remap(self, err: DfsqlError) -> DfsqlError:
        """``err`` (positioned in the new text) positioned in the statement as written;
        a mistake inside a view's query points at the view's name."""
        if not self.spans or err.line is None:
            return err
        starts = [0] + [i + 1 for i, ch in enumerate(self.text) if ch == "\n"]
        new = starts[min(err.line, len(starts)) - 1] + (err.column or 1) - 1
        old, view = self._offset(new)
        o_starts = [0] + [i + 1 for i, ch in enumerate(self.original) if ch == "\n"]
        line = bisect.bisect_right(o_starts, old)
        message = f"in the view {view}: {err.message}" if view else err.message
        out = type(err).__new__(type(err))
        DfsqlError.__init__(out, message, line, old - o_starts[line - 1] + 1, err.hint)
        return out


def _name_at(tokens: list[Token], i: int) -> int:
    """The index after a (possibly qualified) name starting at ``tokens[i]``, or ``i``."""
    k = i
    while k < len(tokens) and tokens[k].kind in ("word", "quoted"):
        k += 1
        if k + 1 < len(tokens) and tokens[k].text == "." and tokens[k].start == tokens[k - 1].end:
            k += 1
            continue
        break
    return k


def _cte_names(tokens: list[Token]) -> set[str]:
    """Names the statement's WITH clauses define (they shadow the catalog's)."""
    return {t.text.strip("`").lower() for i, t in enumerate(tokens[:-2])
            if t.kind in ("word", "quoted") and tokens[i + 1].is_word("AS")
            and tokens[i + 2].text == "(" and i > 0
            and (tokens[i - 1].is_word("WITH", "RECURSIVE") or tokens[i - 1].text == ",")}


def _table_refs(tokens: list[Token]) -> list[tuple[int, int, bool, Token]]:
    """The table names a statement (its ``tokens``) reads: (start, end, followed by an
    alias, the name's last part).

    Not the statement's facts (:mod:`dfsql.language.statement_facts`), for three
    reasons. Expansion comes before the statement is parsed (its windowed blocks
    include the views'), so there is no Statement yet, and the text still holds the
    windowed clauses, which the facts' Spark parse cannot read. The splice needs each
    name's span and whether an alias follows, which the facts do not record. And the
    two differ on a CTE's name: here it is no table anywhere in the statement, there
    only in its scope, so in ``WITH a AS (SELECT * FROM v), v AS (SELECT 1) SELECT *
    FROM a`` a windowed view ``v`` is not expanded here (Spark's error for reading it
    as a plain view stands) but would be by the facts: a refusal that would change."""
    ctes = _cte_names(tokens)
    refs: list[tuple[int, int, bool, int, Token]] = []  # … the token index after the alias
    for i, t in enumerate(tokens):
        if not (t.is_word("FROM", "JOIN") or (t.text == "," and refs and refs[-1][3] == i)):
            continue
        if i > 0 and tokens[i - 1].is_word("WATERMARK", "DELETE"):
            continue
        j = i + 1
        k = _name_at(tokens, j)
        if k == j or (k < len(tokens) and tokens[k].text in ("(", ".")) or \
                tokens[j].is_word("SELECT", "VALUES", "LATERAL", "TABLE", "WITH") or \
                (k == j + 1 and tokens[j].text.strip("`").lower() in ctes):
            continue
        after = tokens[k] if k < len(tokens) else None
        aliased = after is not None and (after.is_word("AS") or (
            after.kind in ("word", "quoted") and after.upper not in _NOT_ALIAS))
        end = _name_at(tokens, k + 1) if aliased and after.is_word("AS") else (
            k + 1 if aliased else k)
        refs.append((tokens[j].start, tokens[k - 1].end, aliased, end, tokens[k - 1]))
    return [(r[0], r[1], r[2], r[4]) for r in refs]


def expand(text: str, spark: SparkSession, tokens: list[Token] | None = None, depth: int = 0,
           seen: tuple[str, ...] = (), windowed: bool = True,
           system: Callable[[SparkSession, list[str]], str | None] | None = None) -> Expanded:
    """``text`` with every windowed view it reads replaced by ``(<its query>) AS name``
    (nested views too), and every database table ``NAME.schema.table`` and system table
    (``system.streaming_progress``: ``system`` reads one, :func:`dfsql.system_tables.view_of`;
    the pipeline above passes it) by the temp view of its rows
    (:mod:`.database_tables`); a view that reads itself is an error.
    ``tokens``: ``text`` already scanned; not ``windowed``: the database tables alone
    (a BACKFILL's relation, which Spark reads as written)."""
    edits, spans, shift, reached, made = [], [], 0, set(), []
    tokens = scan_text(text).tokens if tokens is None else tokens
    for start, end, aliased, last in _table_refs(tokens):
        name = text[start:end]
        read = None if system is None else system(spark, database_tables.name_parts(name))
        table = database_tables.named(text, start, end, spark) if read is None else None
        if read is not None or table is not None:  # its rows' view, under its last part
            made.append(read if read is not None else
                        database_tables.read_view(spark, text, table))
            piece = made[-1] + ("" if aliased else f" AS {last.text}")
            edits.append((start, end, piece))
            spans.append((start, end, start + shift, start + shift + len(piece), ""))
            shift += len(piece) - (end - start)
            continue
        body = definition(spark, name) if windowed else None
        if body is None:
            continue
        key = name.replace("`", "").lower()
        if key in seen or depth >= _MAX_DEPTH:
            raise AnalysisError(f"the view {name} reads itself", None, None,
                                "a view's query cannot read the view it defines")
        inner_expanded = expand(body, spark, None, depth + 1, (*seen, key), system=system)
        reached |= {key, *inner_expanded.reached}
        made += inner_expanded.made
        alias = "" if aliased else f" AS {last.text}"
        piece = f"(\n{inner_expanded.text}\n){alias}"
        edits.append((start, end, piece))
        spans.append((start, end, start + shift, start + shift + len(piece), name))
        shift += len(piece) - (end - start)
    if not spans:
        return Expanded(text, text)
    return Expanded(splice(text, edits, keep_offsets=False), text, tuple(spans),
                    frozenset(reached), tuple(made))


def create_with(stmt: Statement, expanded: Expanded, spark: SparkSession,
                plan_body: Callable[[str], DataFrame]) -> DataFrame:
    """Make the persistent view ``stmt`` defines: its columns from the planned body."""
    body = expanded.original[stmt.body_start:].rstrip().rstrip(";").rstrip()
    name = stmt.text[stmt.view_name_offset:stmt.view_name_end]
    if stmt.view_name.lower() in {r.split(".")[-1] for r in expanded.reached}:
        p = stmt.source.pos(stmt.view_name_offset)
        raise AnalysisError(f"the view {name} would read itself", p.line, p.column,
                            "a view's query cannot read the view it defines, directly or "
                            "through another view")
    _refuse_temporary_inputs(stmt, spark, name)
    # the view's head comes before anything expanded: body_start is the same in both
    # texts; the head blanked, so a mistake in the body is at the user's line and column
    schema = plan_body(splice(expanded.text, [(0, stmt.body_start, "")])).schema
    return create(stmt, spark, body, schema)


def _refuse_temporary_inputs(stmt: Statement, spark: SparkSession, name: str) -> None:
    """A persistent view outlives the session, so it may not read a temporary view (a
    registered source is one), as Spark refuses for its own views: the tables its query
    reads (Spark's parse of the query, its clauses blanked) and those its clauses name
    (``WATERMARK FROM t``). Checked at CREATE, where the user can act, not in the next
    process, where the view would no longer plan."""
    body = splice(stmt.spark_sql(), [(0, stmt.body_start, "")])  # the head blanked
    try:
        read = relations_read(spark, body)
    except Exception:  # noqa: BLE001 (Spark cannot parse it: planning the body says why)
        return
    for b in stmt.blocks:
        table = getattr(b.clauses.watermark, "table", "")
        if table:
            at = b.clauses.watermark.pos
            read.append((table, max(at.offset, 0) if at else 0))
    for table, at in read:
        if _is_temporary(spark, table):
            p = stmt.source.pos(at)
            raise AnalysisError(
                f"the persistent view {name} would read {table.replace('`', '')}, a "
                "temporary view: it would outlive what it reads", p.line, p.column,
                f"make {name} a TEMP VIEW, or read a table (CREATE TABLE … AS SELECT * "
                f"FROM {table.replace('`', '')})")


def _is_temporary(spark: SparkSession, table: str) -> bool:
    from pyspark.errors import AnalysisException

    try:
        return bool(spark.catalog.getTable(table).isTemporary)
    except (AnalysisException, ValueError):
        return False
