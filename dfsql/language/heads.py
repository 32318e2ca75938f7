"""What a statement is — a query, an EXPLAIN, a CREATE VIEW, a write, or other Spark SQL —
and where its query starts, read from its top-level tokens; a CREATE VIEW's head (name,
OR REPLACE, TEMP, IF NOT EXISTS, a column list) and what a windowed view may not have."""

from __future__ import annotations

from dataclasses import dataclass

from dfsql.errors import AnalysisError, DfsqlSyntaxError, NotSupportedError
from dfsql.language.scan import Source, Token


@dataclass
class ViewHead:
    """``CREATE [OR REPLACE] [GLOBAL] [TEMP|TEMPORARY] VIEW [IF NOT EXISTS] name [(cols)]
    … AS``, read from the statement's depth-0 tokens."""

    name: str | None = None
    parts: tuple[Token, ...] = ()  # the name's parts as written (several: a qualified name)
    temporary: bool = False
    replace: bool = False
    if_not_exists: bool = False
    is_global: bool = False
    view_word: Token | None = None
    columns: Token | None = None  # the "(" of a column list
    body_start: int = 0
    as_word: Token | None = None

    def fields(self) -> dict:
        return {"view_name": self.name, "view_temporary": self.temporary,
                "view_replace": self.replace, "view_if_not_exists": self.if_not_exists,
                "view_global": self.is_global,
                "view_name_offset": self.parts[0].start if self.parts else -1,
                "view_name_end": self.parts[-1].end if self.parts else -1}


def _view_head(first: list[Token], end: int) -> ViewHead:
    head = ViewHead()
    vi = next(k for k, t in enumerate(first) if t.is_word("VIEW"))
    head.view_word = first[vi]
    head.temporary = any(t.is_word("TEMP", "TEMPORARY") for t in first[:vi])
    head.replace = any(t.is_word("REPLACE") for t in first[:vi])
    head.is_global = any(t.is_word("GLOBAL") for t in first[:vi])
    k = vi + 1
    if k + 2 < len(first) and first[k].is_word("IF") and first[k + 1].is_word("NOT") \
            and first[k + 2].is_word("EXISTS"):
        head.if_not_exists = True
        k += 3
    parts: list[Token] = []
    while k < len(first) and first[k].kind in ("word", "quoted") and not first[k].is_word("AS"):
        parts.append(first[k])
        k += 1
        if k < len(first) and first[k].text == ".":
            k += 1
            continue
        break
    head.parts = tuple(parts)
    head.name = parts[-1].text.strip("`") if parts else None
    if k < len(first) and first[k].text == "(":
        head.columns = first[k]
        k = next((m + 1 for m in range(k + 1, len(first)) if first[m].text == ")"), len(first))
    # AS follows the name (or column list), possibly after COMMENT / TBLPROPERTIES / ...
    ai = k if k < len(first) and first[k].is_word("AS") else None
    if ai is None and k < len(first) and first[k].is_word("COMMENT", "TBLPROPERTIES",
                                                           "PARTITIONED", "WITH"):
        ai = next((m for m in range(k, len(first)) if first[m].is_word("AS")), None)
    head.body_start = first[ai + 1].start if ai is not None and ai + 1 < len(first) else end
    head.as_word = first[ai] if ai is not None else None
    return head


def check_windowed_view(view: ViewHead, src: Source) -> None:
    """A windowed view names its query's own columns (no column list); a temp view's name
    has one part. (A persistent one is kept in the catalog: :mod:`dfsql.spark.catalog.views`.)"""
    text = src.text
    after_view = view.view_word.end if view.view_word is not None else 0
    if not view.parts:
        raise src.error(DfsqlSyntaxError, "expected the view's name after VIEW", after_view,
                        "e.g. CREATE TEMP VIEW v AS SELECT …")
    if view.as_word is None:
        raise src.error(DfsqlSyntaxError, "expected AS and the view's query after its name",
                        view.parts[-1].end, f"e.g. CREATE TEMP VIEW {view.parts[-1].text} AS "
                        "SELECT …")
    name = view.parts[-1].text
    if len(view.parts) > 1 and view.temporary:
        written = text[view.parts[0].start:view.parts[-1].end]
        kw = text[view.view_word.start:view.view_word.end] if view.view_word else "VIEW"
        temp = next((w for w in ("TEMPORARY", "TEMP") if w in text[:view.parts[0].start].upper()),
                    "TEMP")
        raise src.error(AnalysisError, f"the temp view name {written} cannot be qualified",
                        view.parts[0].start, f"write CREATE {temp} {kw} {name} AS … (a temp "
                        "view belongs to the Spark session, not to a catalog or database)")
    if view.columns is not None:
        raise src.error(NotSupportedError, "a windowed view takes no column list",
                        view.columns.start, "name the columns with aliases in the SELECT "
                        "instead, e.g. SELECT k AS key, COUNT(*) AS cnt …")


def statement_kind(tokens: list[Token], end: int) -> tuple[str, int, ViewHead]:
    """The statement's kind, where its query body starts, and its CREATE VIEW head."""
    kind, body_start, view = "query", 0, ViewHead()
    first = [t for t in tokens if t.depth == 0]
    if len(first) > 1 and first[0].is_word("EXPLAIN") and first[1].is_word("WATERMARK"):
        kind = "explain_watermark"
        body_start = first[2].start if len(first) > 2 else end
    elif len(first) > 1 and first[0].is_word("EXPLAIN") and first[1].is_word("FIRINGS"):
        kind = "explain_firings"  # docs/reference.md#explaining-time
        body_start = first[2].start if len(first) > 2 else end
    elif first and first[0].is_word("EXPLAIN"):
        kind = "explain"
        k = 1
        while k < len(first) and first[k].is_word("EXTENDED", "FORMATTED", "CODEGEN", "COST",
                                                   "LOGICAL"):
            k += 1
        body_start = first[k].start if k < len(first) else end
    elif first and first[0].is_word("CREATE") and any(t.is_word("VIEW") for t in first[:7]):
        kind = "create_view"
        view = _view_head(first, end)
        body_start = view.body_start
    elif len(first) > 2 and first[0].is_word("ALTER") and first[1].is_word("VIEW"):
        kind = "alter_view"
        body_start = next((first[k + 1].start for k in range(2, len(first) - 1)
                           if first[k].is_word("AS")), end)
    elif first and (write_at := _write_body(first, tokens)) is not None:
        kind, body_start = "write", write_at
    elif first and not first[0].is_word("SELECT", "WITH", "FROM", "VALUES", "TABLE") and \
            first[0].text != "(":
        kind = "other"
    return kind, body_start, view


def _write_body(first: list[Token], tokens: list[Token]) -> int | None:
    """Where the query of a statement that writes a query's rows starts (an offset), or
    None: ``CREATE [OR REPLACE] TABLE … AS q``,
    ``REPLACE TABLE … AS q``, ``INSERT INTO|OVERWRITE [TABLE] t … q``, ``CACHE [LAZY]
    TABLE t [OPTIONS (…)] [AS] q`` (docs/reference.md#writing-results: a windowed query stands there with
    the meaning it has alone)."""
    words = [t.upper if t.kind == "word" else t.text for t in first[:6]]
    if words[:1] == ["CREATE"] and "TABLE" in words or words[:2] == ["REPLACE", "TABLE"]:
        return next((first[k + 1].start for k in range(1, len(first) - 1)
                     if first[k].is_word("AS") and _starts_query(first[k + 1], tokens)), None)
    if words[:2] in (["INSERT", "INTO"], ["INSERT", "OVERWRITE"]) or \
            words[:2] == ["CACHE", "TABLE"] or words[:3] == ["CACHE", "LAZY", "TABLE"]:
        start = words.index("TABLE") + 2 if words[0] == "CACHE" else 3
        return next((t.start for t in first[start:] if _starts_query(t, tokens)), None)
    return None


def _starts_query(t: Token, tokens: list[Token]) -> bool:
    """``t`` starts a query: SELECT, WITH, FROM, VALUES, TABLE, or ``(`` before SELECT/WITH."""
    if t.text == "(":
        nxt = next((u for u in tokens if u.start >= t.end), None)
        return nxt is not None and nxt.is_word("SELECT", "WITH")
    return t.is_word("SELECT", "WITH", "FROM", "VALUES", "TABLE")
