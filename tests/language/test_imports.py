"""dfsql's modules import each other without a cycle (issue #10, item 19; issue #22).

A cycle (statement → rewrite → statement) only worked because one side imported inside
a function; the shared types now live in :mod:`dfsql.language.blocks`. The graph is read
from the source with :mod:`ast`, every ``import`` counted: module level or inside a
function, under ``TYPE_CHECKING`` or not. The whole-package test reports every cycle
(each strongly connected component) at once.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dfsql
import dfsql.language

PACKAGE = Path(dfsql.language.__file__).parent
ROOT = Path(dfsql.__file__).parent


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


# --------------------------------------------------------------------------- whole package


def _module_name(path: Path) -> str:
    parts = ["dfsql", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_graph() -> dict[str, set[str]]:
    """Every dfsql module → the dfsql modules it imports anywhere (``from pkg import mod``
    is an import of ``pkg.mod``; a relative import resolves against the module)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                for a in node.names:
                    found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = _package_graph()
    assert "dfsql.api" in graph["dfsql"]  # PEP 562's lazy import, inside __getattr__
    assert "dfsql.model.clauses" in graph["dfsql.language.scan"]


def test_no_import_cycle_in_the_spark_layer_and_the_api() -> None:
    """Language, model, Spark stages and the Python API form no cycle."""
    cycles = [c for c in _cycles(_package_graph())
              if not all(m.startswith(("dfsql.cli", "dfsql.shell", "dfsql.server"))
                         for m in c)]
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


@pytest.mark.xfail(strict=True, reason="issue #22: the interfaces' cycles (dfsql.cli <-> "
                   "dfsql.shell.repl <-> dfsql.shell.watch, dfsql.server.metadata <-> "
                   "dfsql.server.service) go on another branch; drop this mark once merged")
def test_no_import_cycle_anywhere_in_dfsql() -> None:
    cycles = _cycles(_package_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


# --------------------------------------------------------------------------- sizes

#: issue #22's limits: no module over 600 lines, no function over 120
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 600, 120


def _oversized(prefixes: tuple[str, ...] = ("dfsql",)) -> list[str]:
    """Modules and functions (by dotted name) over the limits, under ``prefixes``."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        name = _module_name(path)
        if not name.startswith(prefixes):
            continue
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            out.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    out.append(f"{name}.{node.name}: {size} lines")
    return out


def test_small_rooms_in_the_spark_layer_and_the_api() -> None:
    big = _oversized(("dfsql.spark", "dfsql.api", "dfsql.continuous", "dfsql.model.changelog"))
    assert not big, "over the size limits: " + "; ".join(big)


@pytest.mark.xfail(strict=True, reason="issue #22: the parser, the model's fast paths, the "
                   "server and the shell are split on other branches; drop this mark once "
                   "merged")
def test_small_rooms_everywhere_in_dfsql() -> None:
    big = _oversized()
    assert not big, "over the size limits: " + "; ".join(big)
