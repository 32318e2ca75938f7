"""The language's modules stay readable (issue #33, item 4): no module of
``dfsql/language`` over 500 lines, no function there over 80."""

from __future__ import annotations

import ast
from pathlib import Path

import dfsql

LANGUAGE = Path(dfsql.__file__).parent / "language"


def test_no_language_module_over_500_lines() -> None:
    long = {p.name: n for p in LANGUAGE.glob("*.py")
            if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}


def test_no_language_function_over_80_lines() -> None:
    long = {}
    for p in LANGUAGE.glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > 80:
                    long[f"{p.name}:{node.name}"] = n
    assert long == {}
