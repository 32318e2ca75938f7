"""The front end's modules import each other without a cycle (issue #10, item 19).

A cycle (statement → rewrite → statement) only worked because one side imported inside
a function; the shared types now live in :mod:`dfsql.language.blocks`. The graph is read
from the source with :mod:`ast`, every ``import`` counted, module level or not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dfsql.language

PACKAGE = Path(dfsql.language.__file__).parent


def _imports(path: Path) -> set[str]:
    """The dfsql.language modules that ``path`` imports anywhere in its body."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "dfsql.language":
                found |= {f"dfsql.language.{a.name}" for a in node.names}
            elif node.module.startswith("dfsql.language."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("dfsql.language.")}
    return found


def _graph() -> dict[str, set[str]]:
    modules = {f"dfsql.language.{p.stem}": p for p in PACKAGE.glob("*.py")
               if p.stem != "__init__"}
    return {m: _imports(p) & set(modules) for m, p in modules.items()}


def test_no_import_cycle_in_the_front_end() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            assert state.get(n) != 1, "import cycle: " + " -> ".join([*path, m, n])
            if n not in state:
                visit(n, [*path, m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_rewrite_keeps_its_public_names() -> None:
    from dfsql.language import rewrite, statement

    for name in ("EVENT_TIME", "PROCESSING_TIME", "PANES_TABLE", "PANE_COLUMNS", "Stages",
                 "rewrite", "WindowedBlock"):
        assert hasattr(rewrite, name), name
    for name in ("PLACEHOLDER", "SparkWatermark", "WindowedBlock", "Statement",
                 "parse_statement"):
        assert hasattr(statement, name), name
    assert statement.WindowedBlock is rewrite.WindowedBlock
