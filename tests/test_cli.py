"""The CLI's statement splitting and its demo over the paper's examples."""

from __future__ import annotations

from pathlib import Path

from dfsql.cli import _statements

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "paper"


def test_semicolons_in_comments_and_strings_do_not_split(tmp_path: Path) -> None:
    f = tmp_path / "q.sql"
    f.write_text("-- a comment; with a semicolon\nSELECT 'a;b' AS x;\n"
                 "/* block; comment */ SELECT 2;\n-- trailing comment only\n")
    assert _statements(f) == ["-- a comment; with a semicolon\nSELECT 'a;b' AS x",
                              "/* block; comment */ SELECT 2"]


def test_every_example_is_one_statement() -> None:
    for path in sorted(EXAMPLES.glob("*.sql")):
        assert len(_statements(path)) == 1, path.name
