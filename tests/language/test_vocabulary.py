"""One home per vocabulary (issue #53): the clause words, their order, what may follow
each, and the spellings of the time units come from the grammar
(``dfsql/grammar/dfsql.lark``, read by :mod:`dfsql.language.vocabulary`); a unit's length
is the model's (:data:`dfsql.model.clauses.UNIT_SHORT`). A second literal list of them
anywhere in ``dfsql/`` fails here, so a new clause or unit is written in the grammar
once."""

from __future__ import annotations

import ast
from pathlib import Path

from dfsql.language import vocabulary as v
from dfsql.model import clauses as c

PACKAGE = Path(__file__).resolve().parents[2] / "dfsql"
#: the words a second list would repeat (a literal naming three of them is such a list)
CLAUSE_WORDS = {"WINDOW", "WATERMARK", "PROCESSING", "ALLOWED", "TRIGGER", "EMIT",
                "PROCESSING TIME", "ALLOWED LATENESS"}
UNIT_WORDS = {"MILLISECONDS", "MILLISECOND", "MS", "SECONDS", "SECOND", "SECS", "SEC",
              "MINUTES", "MINUTE", "MINS", "MIN", "HOURS", "HOUR", "DAYS", "DAY"}
#: the pane columns, by hand from docs/reference.md#output-columns
PANE_WORDS = {"window_start", "window_end", "pane_index", "pane_timing", "is_last",
              "emit_time", "is_retraction"}
#: the homes: the model's table of unit lengths (by the grammar's unit names), the pane
#: columns' names and types
HOMES = {("unit", "model/clauses.py"), ("pane", "model/pane_columns.py")}


def test_the_clauses_and_their_order_come_from_the_grammar() -> None:
    # by hand from the docs' query shape (docs/reference.md#query-shape)
    assert v.CLAUSE_ORDER == ("WINDOW", "WATERMARK", "PROCESSING TIME", "ALLOWED LATENESS",
                              "TRIGGER", "EMIT")
    assert v.CLAUSE_OF_TOKEN["PROCESSING"] == "PROCESSING TIME"
    assert v.CLAUSE_FOLLOWERS["EMIT"] == {"ACCUMULATING", "DISCARDING"}
    assert v.CLAUSE_FOLLOWERS["WATERMARK"] == {"DELAY", "FROM", "PERFECT", "PERCENTILE"}
    assert {"EVERY", "AFTER", "AT", "NEVER", "REPEAT", "ANY", "ALL", "("} <= \
        v.CLAUSE_FOLLOWERS["TRIGGER"]


def test_every_unit_spelling_has_the_models_length() -> None:
    # docs/reference.md#durations: MILLISECOND(S)/MS, SECOND(S)/SEC/S, MINUTE(S)/MIN, ...
    assert v.UNIT_OF_SPELLING["MS"] == "MILLISECOND"
    assert v.UNIT_OF_SPELLING["SECS"] == v.UNIT_OF_SPELLING["S"] == "SECOND"
    assert v.UNIT_OF_SPELLING["H"] == "HOUR"
    assert set(v.UNIT_SPELLINGS) == set(c.UNIT_SHORT)
    assert [c.MICROS_PER[c.UNIT_SHORT[u]] for u in ("DAY", "MINUTE", "MILLISECOND")] == [
        86_400_000_000, 60_000_000, 1_000]


def _literal_words(node: ast.AST) -> set[str] | None:
    """The strings of a literal collection of names (a set, list or tuple, or a dict
    whose values are literals too), else None."""
    if isinstance(node, ast.Set | ast.List | ast.Tuple):
        elts = node.elts
    elif isinstance(node, ast.Dict) and all(
            isinstance(x, ast.Constant | ast.List | ast.Tuple | ast.Set) for x in node.values):
        elts = [k for k in node.keys if k is not None]
    else:
        return None
    return {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}


def _second_lists(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            words = _literal_words(node)
            if words is None:
                continue
            for name, vocabulary in (("clause", CLAUSE_WORDS), ("unit", UNIT_WORDS),
                                     ("pane", PANE_WORDS)):
                if len(words & vocabulary) >= 3 and (name, rel) not in HOMES:
                    found.append(f"{rel}:{node.lineno}: {name} words {sorted(words)}")
    return found


def test_no_second_list_of_clause_words_units_or_pane_columns() -> None:
    assert _second_lists(PACKAGE) == []


def test_the_scan_finds_a_planted_list(tmp_path: Path) -> None:
    """The guard itself can fail: a module restating the clause words or the units."""
    (tmp_path / "planted.py").write_text(
        'ENDS = ("TRIGGER", "EMIT", "ALLOWED")\nU = {"SECONDS": 1, "MINUTES": 60, "HOURS": 3600}\n')
    assert [f.split(": ")[1].split()[0] for f in _second_lists(tmp_path)] == ["clause",
                                                                            "unit"]


def test_the_scan_finds_a_planted_list_of_pane_columns(tmp_path: Path) -> None:
    """A module restating three pane columns fails the guard; two, or the home, do not."""
    (tmp_path / "planted.py").write_text(
        'COLS = ["window_start", "window_end", "emit_time"]\n'
        'TWO = ("pane_timing", "is_last")\n')
    found = _second_lists(tmp_path)
    assert [f.split(": ")[0] for f in found] == ["planted.py:1"]
    assert found[0].split(": ")[1].split()[0] == "pane"
    home = tmp_path / "model"
    home.mkdir()
    (home / "pane_columns.py").write_text('COLS = ("window_start", "window_end", "is_last")\n')
    assert [f.split(": ")[0] for f in _second_lists(tmp_path)] == ["planted.py:1"]


def test_the_pane_columns_home_is_the_docs_order_and_types() -> None:
    # by hand from docs/reference.md#output-columns
    from dfsql.model.pane_columns import PANE_COLUMNS, pane_types

    assert PANE_COLUMNS == ("window_start", "window_end", "pane_index", "pane_timing",
                            "is_last", "emit_time", "is_retraction")
    assert dict(pane_types()) == {
        "window_start": "TIMESTAMP", "window_end": "TIMESTAMP", "pane_index": "BIGINT",
        "pane_timing": "STRING", "is_last": "BOOLEAN", "emit_time": "TIMESTAMP",
        "is_retraction": "BOOLEAN"}
    assert dict(pane_types(times_as_micros=True))["emit_time"] == "BIGINT"
