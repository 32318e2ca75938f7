"""An error Spark reports on a generated stage is placed at the node of the user's tree it
is about (dfsql.language.tree_positions), never by searching the text."""

from __future__ import annotations

import sqlglot

from dfsql.language.tree_positions import written_at

TEXT = "SELECT k, 'x' AS s, sum( x ) FILTER (WHERE x > 0) AS t FROM __dfsql_w0 GROUP BY k"


def _select():
    return sqlglot.parse_one(TEXT, read="spark")


def test_a_fragment_is_found_as_a_tree_whatever_its_spelling() -> None:
    # Spark quotes its own rendering: upper case, no spaces
    at = written_at([(_select(), 100)], "SUM(x)", [], {})
    assert at == 100 + TEXT.index("sum(")


def test_a_name_is_a_column_of_the_tree_not_a_string_or_a_generated_name() -> None:
    # 'x' the string comes first in the text; the column x inside sum( x ) is the one
    assert written_at([(_select(), 0)], None, ["`x`"], {}) == TEXT.index("sum( x") + 5
    assert written_at([(_select(), 0)], None, ["`__k0`"], {}) is None
    # a name in no tree: not placed (the caller falls back to the block's start)
    assert written_at([(_select(), 0)], None, ["`nope`"], {}) is None


def test_a_clause_tree_is_placed_from_its_own_offset() -> None:
    on = sqlglot.parse_one("to_timestamp(et)", read="spark")
    assert written_at([(_select(), 0), (on, 500)], None, ["`et`"], {}) == 500 + 13
