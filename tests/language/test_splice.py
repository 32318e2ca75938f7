"""The scanner's one splice of SQL text (dfsql.language.scan.splice) and its reading of
a qualified name from tokens: every module that cuts statement text calls these."""

from __future__ import annotations

import pytest

from dfsql.language.scan import name_end, scan_text, splice


def test_a_shorter_text_keeps_every_later_offset():
    text = "SELECT * FROM (SELECT k\n  FROM t) x WHERE nope"
    out = splice(text, [(15, text.index(")"), "SELECT * FROM v")])
    assert len(out) == len(text)
    assert out.index("nope") == text.index("nope")  # Spark's position is the user's
    assert out == "SELECT * FROM (SELECT * FROM v  ) x WHERE nope"  # its newline went


def test_the_span_blanked_keeps_its_later_newlines():
    text = "CACHE TABLE c\nAS\nSELECT 1"
    out = splice(text, [(0, 17, "")])
    assert out == " " * 13 + "\n  \nSELECT 1"
    assert out.count("\n") == text.count("\n")


def test_a_longer_text_takes_the_blanks_after_the_span():
    assert splice("REPLACE TABLE t", [(0, 8, "CREATE ")]) == "CREATE  TABLE t"
    assert splice("ab   cd", [(0, 2, "wxyz")]) == "wxyz cd"
    assert splice("ab cd", [(0, 2, "wxyz")]) == "wxyzcd"  # no more blanks: offsets move


def test_several_spans_in_any_order_and_without_keeping_offsets():
    text = "SELECT * FROM a JOIN b ON a.k = b.k"
    edits = [(21, 22, "(SELECT 2) AS b"), (14, 15, "(SELECT 1) AS a")]
    assert splice(text, edits, keep_offsets=False) == \
        "SELECT * FROM (SELECT 1) AS a JOIN (SELECT 2) AS b ON a.k = b.k"
    with pytest.raises(ValueError):
        splice(text, [(0, 10, "x"), (5, 12, "y")])


@pytest.mark.parametrize("text,name", [
    ("t AS", "t"),
    ("db.t (a INT)", "db.t"),
    ("`my db` . `a.b`", "`my db` . `a.b`"),
    ("spark_catalog.default.t\nUSING parquet", "spark_catalog.default.t"),
    ("db . (x)", "db"),  # a dot without a name after it ends the name
])
def test_a_qualified_name_read_from_tokens(text, name):
    tokens = scan_text(text).tokens
    end = name_end(tokens, 0)
    assert text[tokens[0].start:tokens[end - 1].end] == name
    assert name_end(scan_text("(x)").tokens, 0) == 0
