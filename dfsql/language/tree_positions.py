"""Where in the user's text a node of a block's tree was written.

sqlglot's parser keeps, on identifiers, literals and function calls, the offsets of the
token it read them from (``node.meta``: ``start``, ``end``); a block's ``select`` tree
was parsed from the block's own text, whose offsets are the statement's from the block's
start on (ON's and PROCESSING TIME's trees from their clause's start). So an error Spark
reports on a generated stage is placed by finding, in those trees, the node the error is
about (the expression Spark quotes as its fragment, or the column or function named in
its parameters), never by searching the text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dfsql.language.stages import with_views


def start_of(node: exp.Expression) -> int | None:
    """The smallest offset a token of ``node`` (or of a node under it) was read at."""
    starts = [n.meta["start"] for n in node.walk() if n.meta and "start" in n.meta]
    return min(starts) if starts else None


def _tree(sql: str, renamed: Mapping[str, str]) -> exp.Expression | None:
    """``sql`` (a piece of a generated stage) as a tree, with the executor's view names
    read back as the block's placeholders; None when sqlglot cannot read it alone."""
    try:
        return with_views(sqlglot.parse_one(sql, read="spark"), renamed)
    except (SqlglotError, ValueError):
        return None


def _names(name: str) -> list[str]:
    """The parts of a possibly backquoted, qualified name Spark put in an error."""
    try:
        node = sqlglot.parse_one(name, read="spark", into=exp.Column)
    except (SqlglotError, ValueError):
        return []
    return [p.name for p in node.parts] if isinstance(node, exp.Column) else []


def written_at(trees: Sequence[tuple[exp.Expression, int]], fragment: str | None,
               names: Iterable[str], renamed: Mapping[str, str]) -> int | None:
    """The statement offset of the node an error is about, or None.

    ``trees``: each tree the block was parsed into (its SELECT, its ON and PROCESSING
    TIME) with the statement offset its text starts at; ``fragment``: the stage's text
    Spark quotes (its query context); ``names``: the names in the error's parameters (an
    unknown column, a function); ``renamed``: the executor's view names → the block's
    placeholders."""
    wanted = _tree(fragment, renamed) if fragment else None
    if wanted is not None:
        for tree, base in trees:
            for node in tree.walk():
                if node == wanted and (at := start_of(node)) is not None:
                    return base + at
    for name in names:
        parts = _names(name)
        if not parts or parts[-1].startswith("__"):
            continue  # a name dfsql generated: the user never wrote it
        last = parts[-1].lower()
        for tree, base in trees:
            for node in tree.walk():
                if isinstance(node, exp.Column | exp.Anonymous | exp.Func) and \
                        _called(node).lower() == last and (at := start_of(node)) is not None:
                    return base + at
    return None


def _called(node: exp.Expression) -> str:
    """A column's name, or the name a function is called by."""
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Anonymous):
        return str(node.this)
    return node.sql_name() if isinstance(node, exp.Func) else ""
