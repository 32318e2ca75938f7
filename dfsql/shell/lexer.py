"""Highlighting and completion for the shell.

Highlighting is pygments' SQL lexer with dfsql's clause words (docs/reference.md (durations, window, processing-time, trigger, emit)), the
continuous-query statements and the shell's backslash commands added. Completion offers,
for the word under the cursor: backslash commands at the start of a line; table names
after FROM, JOIN, INTO, TABLE and the commands that take one; otherwise keywords (Spark
SQL's and dfsql's, in the case the user is typing), Spark's functions, the tables, and
the columns of the tables the statement names. The catalog is read once and again only
after a statement ran (it may have created or dropped a view), never per key press.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from pygments.lexer import inherit, words
from pygments.lexers.sql import SqlLexer
from pygments.token import Keyword, Name

from dfsql.language.names import PANE_COLUMNS
from dfsql.language.vocabulary import CLAUSE_FOLLOWERS, UNIT_WORDS
from dfsql.language.vocabulary import KEYWORDS as ALL_KEYWORDS

#: dfsql's words beyond the clause keywords: units, continuous queries
# (a one-letter unit, S or H, is more often a table alias: not highlighted)
DFSQL_WORDS = sorted(ALL_KEYWORDS | {w for w in UNIT_WORDS if len(w) > 1} | {
    "STREAMING", "QUERY", "QUERIES", "STOP", "START", "SHOW", "CHECKPOINT", "DIRECTORY",
    "BACKFILL", "EXPLAIN", "TRY"})

#: the shell's commands and a line of help each
COMMANDS: dict[str, str] = {
    "\\d": "list tables and views; \\d NAME shows one's columns",
    "\\load": "\\load NAME PATH [STREAM] [EVENT TIME col] [PROCESSING TIME col] "
              "[WATERMARK ...]: register a CSV, JSON or Parquet file (or a directory)",
    "\\explain": "\\explain QUERY: how dfsql runs it (clauses, trigger tree, stages); "
                "\\explain firings QUERY: every window's events (then \\plot draws them); "
                "\\explain firings NAME: a running query's windows now",
    "\\watch": "\\watch QUERY: the live panes of a windowed query over a stream, "
               "retractions applied, until Ctrl-C",
    "\\plot": "\\plot [FILE.png]: draw the last windowed result as the paper draws its "
              "figures (after EXPLAIN WATERMARK: late fraction against latency)",
    "\\connection": "\\connection NAME postgresql://USER@HOST[:PORT]/DB: name a database "
                   "for NAME.schema.table (the password is asked for); alone: list them",
    "\\timing": "show or hide each statement's elapsed time",
    "\\maxrows": "\\maxrows N: fetch and show at most N rows of a result",
    "\\pager": "\\pager on|off: page results taller than the screen",
    "\\help": "this list; \\help TOPIC: that section of the language reference "
              "(\\help WINDOW, \\help TRIGGER, ...)",
    "\\q": "leave the shell (or Ctrl-D)",
}

#: the grammar's only words after a clause word (dfsql/grammar/dfsql.lark): no Spark
#: keyword such as SESSION is offered where only SESSIONS fits. Not after WATERMARK (a
#: column may follow: Spark's ``WATERMARK ts DELAY OF``) nor TRIGGER (a parenthesis may)
_NEXT_WORDS = {word: sorted(after) for word, after in CLAUSE_FOLLOWERS.items()
               if all(w.isalpha() for w in after) and word != "WATERMARK"}

#: words after which a table name comes
_TABLE_CONTEXT = {"FROM", "JOIN", "INTO", "TABLE", "VIEW", "\\D", "DESCRIBE", "UPDATE"}


class DfsqlLexer(SqlLexer):
    """Spark SQL with dfsql's clause words and the shell's backslash commands."""

    name = "dfsql"
    aliases = ["dfsql"]
    tokens = {
        "root": [
            (r"^\s*\\[a-z]+", Name.Builtin),
            (words(DFSQL_WORDS, prefix=r"(?i)\b", suffix=r"\b"), Keyword),
            inherit,
        ],
    }


def spark_keywords() -> list[str]:
    """Spark SQL's single-word keywords, as sqlglot's Spark dialect knows them."""
    from sqlglot.dialects.spark import Spark

    return sorted(k for k in Spark.Tokenizer.KEYWORDS if k.isalpha())


class Catalog:
    """Table, column and function names of a Spark session, read lazily and cached until
    :meth:`invalidate` (the shell calls it after every statement)."""

    def __init__(self, spark_getter: Callable[[], object | None]) -> None:
        self._spark = spark_getter
        self._lock = threading.Lock()
        self._names: dict[tuple[str, ...], list[str]] = {}

    def invalidate(self) -> None:
        """Forget tables and columns (a statement may have changed them); functions stay."""
        with self._lock:
            self._names = {k: v for k, v in self._names.items() if k == ("functions",)}

    def _read(self, key: tuple[str, ...], read: Callable[[Any], list[str]]) -> list[str]:
        with self._lock:
            if key not in self._names:
                spark = self._spark()
                if spark is None:  # Spark still starting: nothing to offer yet
                    return []
                self._names[key] = read(spark)
            return self._names[key]

    def tables(self) -> list[str]:
        # SHOW TABLES: names, without resolving each table as catalog.listTables does
        return self._read(("tables",), lambda spark: sorted(
            {r.tableName for r in spark.sql("SHOW TABLES").collect()}))

    def columns(self, table: str) -> list[str]:
        from pyspark.errors import PySparkException

        def read(spark) -> list[str]:
            try:
                return list(spark.table(table).columns)
            except PySparkException:
                return []

        return self._read(("columns", table), read)

    def functions(self) -> list[str]:
        return self._read(("functions",), lambda spark: sorted(
            {f.name for f in spark.catalog.listFunctions() if f.name.isidentifier()}))


_WORD = re.compile(r"[\w.\\]+$")
_IDENT = re.compile(r"[A-Za-z_][\w]*")


class ShellCompleter(Completer):
    """Completion by context; see the module doc."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.keywords = sorted(set(spark_keywords()) | set(DFSQL_WORDS))

    def get_completions(self, document: Document,
                        complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        m = _WORD.search(before)
        word = m.group(0) if m else ""
        head = before[: len(before) - len(word)]
        if word.startswith("\\") and not head.strip():
            for cmd, help_text in COMMANDS.items():
                if cmd.startswith(word.lower()):
                    yield Completion(cmd, -len(word), display_meta=help_text[:60])
            return
        if not word:
            return
        previous = head.split()[-1].upper() if head.split() else ""
        upper = word.isupper() or not word.islower()
        if previous in _NEXT_WORDS:
            yield from _matching(word, [k if upper else k.lower() for k in _NEXT_WORDS[previous]],
                                 "keyword")
            return
        tables = self.catalog.tables()
        if previous in _TABLE_CONTEXT or (previous == "\\LOAD"):
            yield from _matching(word, tables, "table")
            return
        named = {t for t in _IDENT.findall(document.text) if t in tables}
        columns = sorted({c for t in named for c in self.catalog.columns(t)}
                         | set(PANE_COLUMNS))
        yield from _matching(word, columns, "column")
        yield from _matching(word, tables, "table")
        kws = [k if upper else k.lower() for k in self.keywords]
        yield from _matching(word, kws, "keyword")
        yield from _matching(word, self.catalog.functions(), "function")


def _matching(word: str, names: Iterable[str], meta: str) -> Iterable[Completion]:
    low = word.lower()
    for n in names:
        if n.lower().startswith(low) and n != word:
            yield Completion(n, -len(word), display_meta=meta)
