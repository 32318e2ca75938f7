"""Statements that start, list and stop continuous queries (windowed queries over a
stream), so that every interface — ``dfsql.sql``, the Thrift endpoint, the shell — can
run them as SQL::

    CREATE STREAMING QUERY name
        [INTO TABLE [NAME.schema.table] | INTO CHANGELOG NAME.schema.table
         | INTO DIRECTORY 'path']
        [CHECKPOINT 'path']
        [BACKFILL FROM <bounded table or (query)>]
        AS <windowed query over a streaming source>
    SHOW STREAMING QUERIES
    STOP STREAMING QUERY name
    START STREAMING QUERY name
    ALTER STREAMING QUERY name AS <windowed query over the same stream>
    EXPLAIN FIRINGS FOR STREAMING QUERY name [WHERE <predicate on the events>]

The options come before AS: the windowed query ends in the extension clauses, which
could not tell a trailing INTO from a mistake. ``INTO TABLE`` (the default) keeps the
current row of every live window, retractions applied, in the global temp view
``global_temp.<name>``, readable from every session; ``INTO DIRECTORY`` writes Spark's
parquet file sink there (exactly once). The query keeps running until STOP.
``BACKFILL FROM`` names the stream's history (:class:`Backfill`): what arrived before
the stream's first row, replayed first (:mod:`dfsql.spark.stream.backfill`).
``START STREAMING QUERY`` starts a kept query that failed to start again (its cause
fixed) from its checkpoint. ``EXPLAIN FIRINGS FOR STREAMING QUERY`` tells every live window of a running query now,
read from its state (:mod:`dfsql.spark.explain.live`).

This module only parses (and :func:`parse_any` tells them from the other statements);
:mod:`dfsql.api` runs them. The query after AS keeps its
offsets (the head is blanked), so its errors name the line and column the user wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import NamedTuple

from dfsql.errors import DfsqlError, DfsqlSyntaxError
from dfsql.language.scan import Scanned, Source, Token, scan_text, splice
from dfsql.language.statement import Statement, parse_statement
from dfsql.language.statement_facts import StatementFacts, with_history

SYNOPSIS = ("CREATE STREAMING QUERY name [INTO TABLE [NAME.schema.table] | "
            "INTO CHANGELOG NAME.schema.table | INTO DIRECTORY 'path'] "
            "[CHECKPOINT 'path'] [BACKFILL FROM <table or (query)>] AS <windowed query>")

#: what Spark is given to read a backfill's relation (see :attr:`Backfill.sql`)
_READ = "SELECT * FROM"


@dataclass(frozen=True)
class Backfill:
    """A continuous query's history (``BACKFILL FROM``, docs/guides/streams.md#continuous-queries-as-statements): a bounded
    relation with the stream's columns holding what arrived before the stream's first
    row. ``sql`` reads it, with the relation at the offsets the user wrote it (the rest
    of the statement blanked), so Spark's errors about it are placed where it was
    written; from Python it may instead be a bounded DataFrame (``frame``)."""

    sql: str | None = None
    #: where the relation starts in ``sql`` (-1: a DataFrame)
    offset: int = -1
    frame: object | None = field(default=None, compare=False)
    #: the text ``sql``'s offsets are positions in (the user's statement)
    written: str = ""
    #: ALTER: the stream's files the history already holds (what the query read before
    #: it changed); the stream goes on without them
    skip: tuple[str, ...] = ()
    #: ALTER of a query into an appending sink: the history's panes were the old
    #: query's, so the new one restates its windows' current rows instead (§8c)
    restate: bool = False
    #: a kept query's history named, not read (``sql`` and the ``skip`` files stand for
    #: it: :func:`dfsql.spark.stream.alter.unread_history`)
    unread: bool = False

    @classmethod
    def of_span(cls, text: str, start: int, end: int) -> Backfill:
        """The relation written at ``text[start:end]`` (a table name or a parenthesised
        query), read where it stands."""
        return cls(splice(text, [(0, start, _READ + " "), (end, len(text), "")]), start,
                   written=text)

    @classmethod
    def of(cls, history: object) -> Backfill:
        """From Python: a table's name, or a bounded DataFrame."""
        if isinstance(history, Backfill):
            return history
        if isinstance(history, str):
            return cls(f"{_READ} {history}", len(_READ) + 1, written=f"{_READ} {history}")
        return cls(frame=history)

    @property
    def source(self) -> Source:
        """The text positions refer to."""
        return Source(self.written or self.sql or "")


@dataclass(frozen=True)
class ContinuousStatement:
    kind: str  # create | show | stop | start | explain | alter
    name: str | None = None
    name_offset: int = 0
    sink: str = "table"  # table | directory | database | changelog
    path: str | None = None
    #: INTO TABLE NAME.schema.table: (connection, schema, table), the names unquoted
    #: (docs/guides/databases.md); None: not a database
    target: tuple[str, str, str] | None = None
    #: where the target's connection name starts
    target_offset: int = -1
    checkpoint: str | None = None
    #: the statement's text with everything before the query blanked (CREATE only)
    query: str = ""
    query_offset: int = 0
    #: the statement as written, scanned (once)
    scanned: Scanned | None = field(default=None, repr=False, compare=False)
    #: where INTO DIRECTORY's and CHECKPOINT's quoted paths start (their quote; -1: none)
    path_offset: int = -1
    checkpoint_offset: int = -1
    #: the query after AS, parsed once from the statement's own tokens
    #: (:func:`parse_any`; None: not parsed, or it does not parse, and then its error
    #: is raised when the query starts)
    statement: Statement | None = field(default=None, repr=False, compare=False)
    #: BACKFILL FROM's relation (None: no history)
    backfill: Backfill | None = None
    #: EXPLAIN FIRINGS FOR STREAMING QUERY's WHERE on the events: (offset of the
    #: predicate, its text)
    where: tuple[int, str] | None = None

    @property
    def written(self) -> str:
        """The statement's text as the user wrote it."""
        return self.scanned.source.text if self.scanned is not None else ""

    @property
    def query_scanned(self) -> Scanned | None:
        """The query after AS as scanned, without scanning it again: the statement's
        tokens from the query on, the text's head blanked (offsets and lines kept)."""
        if self.scanned is None or self.kind not in ("create", "alter"):
            return None
        body, cleaned = self.query_offset, self.scanned.cleaned
        return Scanned(Source(self.query),
                       [t for t in self.scanned.tokens if t.start >= body],
                       splice(cleaned, [(0, body, "")]))

    @cached_property
    def facts(self) -> StatementFacts:
        """The tables it reads: its query's (parsed here if it was not parsed with the
        statement; none if it does not parse) and its history's."""
        query = self.statement
        if query is None and self.kind in ("create", "alter"):
            try:
                query = parse_statement(self.query, self.query_scanned)
            except DfsqlError:  # its error is raised when it starts
                query = None
        found = query.facts if query is not None else StatementFacts()
        return with_history(found, self.backfill.sql if self.backfill is not None else None)

    @property
    def query_statement(self) -> Statement | str:
        """What starts the query: its parsed statement, else its text."""
        return self.statement if self.statement is not None else self.query


def _string(tok: Token) -> str:
    body = tok.text[1:-1]
    return body.replace("\\'", "'").replace('\\"', '"')


def string_literal(value: str) -> str:
    """``value`` as a quoted string this parser reads back as ``value`` (the inverse of
    how it reads a path's literal)."""
    return "'" + value.replace("'", "\\'") + "'"


def parse_any(text: str, scanned: Scanned | None = None) -> ContinuousStatement | Statement:
    """``text`` scanned once and parsed: a continuous-query statement (CREATE / SHOW /
    STOP STREAMING QUERY, CREATE's query parsed with it from the same tokens), else a
    plain or windowed statement (:func:`~dfsql.language.statement.parse_statement`).
    ``scanned``: ``text`` already scanned."""
    scanned = scanned or scan_text(text)
    continuous = parse_continuous(text, scanned)
    if continuous is None:
        return parse_statement(text, scanned)
    query = continuous.query_scanned
    if query is None:
        return continuous
    try:  # a query that does not parse: its error is raised when it starts, as before
        return replace(continuous, statement=parse_statement(continuous.query, query))
    except DfsqlError:
        return continuous


def parse_continuous(text: str, scanned: Scanned | None = None,
                     ) -> ContinuousStatement | None:
    """The continuous-query statement ``text`` is, or None if it is none of them.
    ``scanned``: ``text`` already scanned (:func:`~dfsql.language.scan.scan_text`)."""
    scanned = scanned or scan_text(text)
    words = [t for t in scanned.tokens if t.kind != "punct" or t.text != ";"]
    if len(words) > 2 and words[0].is_word("EXPLAIN") and words[1].is_word("FIRINGS") and \
            words[2].is_word("FOR"):
        found: ContinuousStatement | None = _explain(text, scanned.source, words)
    else:
        found = _parse(text, scanned.source, words)
    return replace(found, scanned=scanned) if found is not None else None


def _parse(text: str, src: Source, words: list[Token]) -> ContinuousStatement | None:
    if len(words) < 2 or not words[1].is_word("STREAMING"):
        return None
    head = words[0]
    if head.is_word("SHOW"):
        if len(words) == 3 and words[2].is_word("QUERIES"):
            return ContinuousStatement("show")
        at = words[2].start if len(words) > 2 else words[1].end
        raise src.error(DfsqlSyntaxError, "expected SHOW STREAMING QUERIES", at,
                        "SHOW STREAMING QUERIES lists the running continuous queries")
    if not head.is_word("CREATE", "STOP", "START", "ALTER"):
        return None
    kind = head.upper.lower()
    name_tok = _name(src, words, kind)
    name = name_tok.text.strip("`")
    if kind == "alter":
        return _alter(text, src, words, name_tok)
    if kind in ("stop", "start"):
        if len(words) > 4:
            raise src.error(DfsqlSyntaxError, f"unexpected {words[4].text!r} after the name",
                            words[4].start, _SYNOPSES[kind])
        return ContinuousStatement(kind, name, name_tok.start)
    sink, path, checkpoint, backfill = "table", None, None, None
    path_at = checkpoint_at = target_at = -1
    target = None
    i = 4
    seen: set[str] = set()
    while i < len(words) and not words[i].is_word("AS"):
        t = words[i]
        if t.is_word("INTO") and "INTO" not in seen:
            seen.add("INTO")
            into = _into(src, words, i)
            sink, path, path_at, target, target_at, i = into
            continue
        if t.is_word("CHECKPOINT") and "CHECKPOINT" not in seen:
            seen.add("CHECKPOINT")
            arg = words[i + 1] if i + 1 < len(words) else None
            if arg is None or arg.kind != "string":
                raise src.error(DfsqlSyntaxError, "CHECKPOINT needs a quoted path",
                                arg.start if arg else t.end, "e.g. CHECKPOINT '/data/ck/q1'")
            checkpoint, checkpoint_at, i = _string(arg), arg.start, i + 2
            continue
        if t.is_word("BACKFILL") and "BACKFILL" not in seen:
            seen.add("BACKFILL")
            end = _backfill_end(src, words, i)
            backfill = Backfill.of_span(text, words[i + 2].start, words[end - 1].end)
            i = end
            continue
        raise src.error(DfsqlSyntaxError, f"unexpected {t.text!r} in CREATE STREAMING QUERY",
                        t.start, SYNOPSIS)
    if i >= len(words) or i + 1 >= len(words):
        at = words[i] if i < len(words) else words[-1]
        raise src.error(DfsqlSyntaxError, "CREATE STREAMING QUERY needs AS <windowed query>",
                        at.end, SYNOPSIS)
    body = words[i + 1].start
    return ContinuousStatement("create", name, name_tok.start, sink, path,
                               checkpoint=checkpoint, query=splice(text, [(0, body, "")]),
                               query_offset=body, target=target, target_offset=target_at,
                               path_offset=path_at, checkpoint_offset=checkpoint_at,
                               backfill=backfill)


class _Into(NamedTuple):
    sink: str
    path: str | None
    path_at: int
    target: tuple[str, str, str] | None
    target_at: int
    after: int


def _into(src: Source, words: list[Token], i: int) -> _Into:
    """``INTO TABLE [NAME.schema.table]``, ``INTO CHANGELOG NAME.schema.table`` or ``INTO
    DIRECTORY 'path'`` at ``words[i]`` (the INTO), and the index after it."""
    t = words[i]
    nxt = words[i + 1] if i + 1 < len(words) else None
    if nxt is not None and nxt.is_word("TABLE"):
        i += 2
        if i < len(words) and not any(words[i].is_word(w)
                                      for w in ("AS", "CHECKPOINT", "BACKFILL")):
            target, after = _database_table(src, words, i)
            return _Into("database", None, -1, target, words[i].start, after)
        return _Into("table", None, -1, None, -1, i)
    if nxt is not None and nxt.is_word("CHANGELOG"):
        if i + 2 >= len(words):
            raise src.error(DfsqlSyntaxError, "INTO CHANGELOG needs a database table",
                            nxt.end, "e.g. INTO CHANGELOG warehouse.public.changes")
        target, after = _database_table(src, words, i + 2)
        return _Into("changelog", None, -1, target, words[i + 2].start, after)
    if nxt is not None and nxt.is_word("DIRECTORY"):
        arg = words[i + 2] if i + 2 < len(words) else None
        if arg is None or arg.kind != "string":
            raise src.error(DfsqlSyntaxError, "INTO DIRECTORY needs a quoted path",
                            (arg or nxt).start if arg else nxt.end,
                            "e.g. INTO DIRECTORY '/data/panes'")
        return _Into("directory", _string(arg), arg.start, None, -1, i + 3)
    raise src.error(DfsqlSyntaxError, "expected TABLE, CHANGELOG or DIRECTORY 'path' after "
                    "INTO", (nxt or t).start if nxt else t.end, SYNOPSIS)


def _database_table(src: Source, words: list[Token], i: int) -> tuple[tuple[str, str, str], int]:
    """``NAME.schema.table`` or ``NAME.table`` (schema ``public``) at ``words[i]``, each
    part a name or a quoted name; and the index after it."""
    names: list[Token] = []
    j = i
    while j < len(words) and words[j].kind in ("word", "quoted") and len(names) < 3:
        names.append(words[j])
        if j + 1 < len(words) and words[j + 1].kind == "punct" and words[j + 1].text == ".":
            j += 2
            continue
        j += 1
        break
    else:
        names = []
    if len(names) < 2 or (j < len(words) and words[j].kind == "punct"
                          and words[j].text == "."):
        raise src.error(DfsqlSyntaxError, "a database table is NAME.schema.table or "
                        "NAME.table", words[i].start, "NAME is a connection "
                        "(dfsql.connection, --connection), e.g. INTO TABLE "
                        "warehouse.public.user_sessions")
    parts = [t.text[1:-1].replace("``", "`") if t.kind == "quoted" else t.text
             for t in names]
    if len(parts) == 2:
        parts.insert(1, "public")
    return (parts[0], parts[1], parts[2]), j


ALTER_SYNOPSIS = "ALTER STREAMING QUERY name AS <windowed query>"
_SYNOPSES = {"create": SYNOPSIS, "stop": "STOP STREAMING QUERY name",
             "start": "START STREAMING QUERY name", "alter": ALTER_SYNOPSIS}


def _name(src: Source, words: list[Token], kind: str) -> Token:
    """The query's name in ``<CREATE | STOP | START | ALTER> STREAMING QUERY name``."""
    if len(words) < 3 or not words[2].is_word("QUERY"):
        at = words[2] if len(words) > 2 else words[1]
        raise src.error(DfsqlSyntaxError, f"expected {kind.upper()} STREAMING QUERY name",
                        at.start if len(words) > 2 else at.end, _SYNOPSES[kind])
    if len(words) < 4 or words[3].kind not in ("word", "quoted"):
        raise src.error(DfsqlSyntaxError, "a continuous query needs a name",
                        words[3].start if len(words) > 3 else words[-1].end,
                        "e.g. " + _SYNOPSES[kind].replace(" name", " sessions_live"))
    return words[3]


def _alter(text: str, src: Source, words: list[Token], name_tok: Token) -> ContinuousStatement:
    """``ALTER STREAMING QUERY name AS <windowed query>``: the sink, checkpoint and
    history are the query's own, so nothing else comes before AS."""
    if len(words) < 6 or not words[4].is_word("AS"):
        at = words[4].start if len(words) > 4 else name_tok.end
        raise src.error(DfsqlSyntaxError, "expected AS <windowed query> after the name "
                        "(a changed query keeps its sink, checkpoint and history)", at,
                        ALTER_SYNOPSIS)
    body = words[5].start
    return ContinuousStatement("alter", name_tok.text.strip("`"), name_tok.start,
                               query=splice(text, [(0, body, "")]), query_offset=body)


EXPLAIN_SYNOPSIS = "EXPLAIN FIRINGS FOR STREAMING QUERY name [WHERE <predicate>]"


def _explain(text: str, src: Source, words: list[Token]) -> ContinuousStatement:
    """``EXPLAIN FIRINGS FOR STREAMING QUERY name [WHERE p]`` (``words[2]`` is FOR)."""
    for i, word in ((3, "STREAMING"), (4, "QUERY")):
        if len(words) <= i or not words[i].is_word(word):
            at = words[i].start if len(words) > i else words[-1].end
            raise src.error(DfsqlSyntaxError, f"expected {word} after "
                            f"{' '.join(w.upper for w in words[:i])}", at, EXPLAIN_SYNOPSIS)
    if len(words) < 6 or words[5].kind not in ("word", "quoted"):
        at = words[5].start if len(words) > 5 else words[-1].end
        raise src.error(DfsqlSyntaxError, "EXPLAIN FIRINGS FOR STREAMING QUERY needs the "
                        "query's name", at, "SHOW STREAMING QUERIES lists them")
    name_tok = words[5]
    where = None
    if len(words) > 6:
        w = words[6]
        if not w.is_word("WHERE") or len(words) < 8:
            raise src.error(DfsqlSyntaxError, f"unexpected {w.text!r} after the name"
                            if not w.is_word("WHERE") else "WHERE needs a predicate",
                            w.start if not w.is_word("WHERE") else w.end, EXPLAIN_SYNOPSIS)
        end = len(text.rstrip().rstrip(";").rstrip())
        p = text[w.end:end]
        where = (w.end + len(p) - len(p.lstrip()), p.strip())
    return ContinuousStatement("explain", name_tok.text.strip("`"), name_tok.start,
                               where=where)


def _backfill_end(src: Source, words: list[Token], i: int) -> int:
    """Where ``BACKFILL FROM <relation>`` starting at ``words[i]`` ends (an index into
    ``words``): the relation is a name (dotted, quoted parts allowed) or a query in
    parentheses."""
    hint = "e.g. BACKFILL FROM events_history, or BACKFILL FROM (SELECT * FROM …)"
    nxt = words[i + 1] if i + 1 < len(words) else None
    if nxt is None or not nxt.is_word("FROM"):
        raise src.error(DfsqlSyntaxError, "expected FROM after BACKFILL",
                        nxt.start if nxt is not None else words[i].end, hint)
    first = words[i + 2] if i + 2 < len(words) else None
    if first is None or first.is_word("AS"):
        raise src.error(DfsqlSyntaxError, "BACKFILL FROM needs a table or a (query)",
                        first.start if first is not None else nxt.end, hint)
    if first.kind == "punct" and first.text == "(":
        for k in range(i + 3, len(words)):
            w = words[k]
            if w.kind == "punct" and w.text == ")" and w.depth == first.depth:
                return k + 1
        raise src.error(DfsqlSyntaxError, "BACKFILL FROM's query has no closing parenthesis",
                        first.start, hint)
    if first.kind not in ("word", "quoted"):
        raise src.error(DfsqlSyntaxError, "BACKFILL FROM needs a table or a (query)",
                        first.start, hint)
    k = i + 3
    while k + 1 < len(words) and words[k].kind == "punct" and words[k].text == "." and \
            words[k + 1].kind in ("word", "quoted"):
        k += 2
    return k
