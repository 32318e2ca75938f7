"""The model imports nothing of the language, the parsers or Spark (issue #22, item 3).

Spark's Python workers import :mod:`dfsql.model`; the clause types live in
:mod:`dfsql.model.clauses` so that the parser (which produces them) and the model (which
consumes them) both import them without ``model/`` importing ``language/``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import dfsql.model

PACKAGE = Path(dfsql.model.__file__).parent
FORBIDDEN = ("dfsql.language", "lark", "sqlglot", "pyspark")


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_model_source_imports_no_language_parser_or_spark() -> None:
    bad = {f"{p.name}: {m}" for p in PACKAGE.glob("*.py") for m in _imported(p)
           if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)}
    assert not bad, sorted(bad)


def test_importing_the_model_loads_no_parser() -> None:
    code = ("import sys, dfsql.model, dfsql.model.group_also_by_window; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('lark', 'sqlglot', "
            "'pyspark') or m.startswith('dfsql.language')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
