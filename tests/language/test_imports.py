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

import dfsql

ROOT = Path(dfsql.__file__).parent


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


def test_no_import_cycle_anywhere_in_dfsql() -> None:
    cycles = _cycles(_package_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


# --------------------------------------------------------------------------- folders

#: the floors whose folders are read as one (issue #53, item 1): the house's top-level
#: modules and packages (``dfsql.api``, ``dfsql.spark``), and inside ``dfsql.spark`` its
#: packages and top-level modules (``dfsql.spark.plan``, ``dfsql.spark.values``)
FLOORS = (("dfsql", 2), ("dfsql.spark", 3))


def _folder_graph(graph: dict[str, set[str]], floor: str, depth: int) -> dict[str, set[str]]:
    """``graph`` read a folder at a time: each module under ``floor`` is its first ``depth``
    name parts, and a folder imports another when any of its modules imports any of the
    other's (anywhere: in a function or under ``TYPE_CHECKING`` too)."""
    def folder(module: str) -> str | None:
        inside = module == floor or module.startswith(floor + ".")
        return ".".join(module.split(".")[:depth]) if inside else None

    out: dict[str, set[str]] = {}
    for module, imported in graph.items():
        a = folder(module)
        if a is None:
            continue
        out.setdefault(a, set())
        for b in filter(None, map(folder, imported)):
            if b != a:
                out[a].add(b)
                out.setdefault(b, set())
    return out


def _folder_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The folder-level circles of every floor (a circle: folders that import each
    other, directly or round a ring)."""
    return [c for floor, depth in FLOORS for c in _cycles(_folder_graph(graph, floor, depth))]


def test_no_folder_imports_back_up() -> None:
    """0 circles between the house's folders, and between dfsql/spark's (issue #53): the
    planner imports the executors and the values, never the other way round."""
    cycles = _folder_cycles(_package_graph())
    assert not cycles, "folder-level circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_folder_check_sees_a_planted_back_import() -> None:
    graph = _package_graph()
    assert _folder_graph(graph, "dfsql.spark", 3)["dfsql.spark.plan"] >= {
        "dfsql.spark.replay", "dfsql.spark.stream", "dfsql.spark.explain"}
    graph["dfsql.spark.replay.panes"] = graph["dfsql.spark.replay.panes"] | {
        "dfsql.spark.plan.planner"}
    graph["dfsql.model.clauses"] = graph["dfsql.model.clauses"] | {"dfsql.language.scan"}
    cycles = _folder_cycles(graph)
    assert ["dfsql.language", "dfsql.model"] in cycles
    assert any({"dfsql.spark.plan", "dfsql.spark.replay"} <= set(c) for c in cycles)


# --------------------------------------------------------------------------- sizes

#: issue #33's limits (item 4): no module over 500 lines, no function over 80
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 80

def _functions(tree: ast.AST, prefix: str = ""):
    """Every function in ``tree`` with its qualified name (``Class.method``,
    ``outer.inner``)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if not isinstance(node, ast.ClassDef):
                yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _oversized() -> dict[str, int]:
    """Modules and functions (by dotted name: ``dfsql.server.server.Server.__init__``)
    over the limits -> their lines."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        name = _module_name(path)
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            out[name] = lines
        for qualname, node in _functions(ast.parse(text)):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > MAX_FUNCTION_LINES:
                out[f"{name}.{qualname}"] = size
    return out


def test_small_rooms_everywhere_in_dfsql() -> None:
    big = _oversized()
    assert not big, f"over the size limits ({MAX_MODULE_LINES} lines a module, " \
        f"{MAX_FUNCTION_LINES} a function): " + "; ".join(f"{n}: {s} lines"
                                                        for n, s in sorted(big.items()))


# --------------------------------------------------------------------------- imports in functions

#: issue #22: an import of dfsql's own modules inside a function is for start-up cost (the CLI
#: before Spark loads, Spark's Python workers), not to hold a cycle open; about 25 at most
MAX_IMPORTS_IN_FUNCTIONS = 25


def _imports_in_functions() -> list[str]:
    """``module:line`` of every import of a dfsql module inside a function body."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                mod = (node.module or "" if isinstance(node, ast.ImportFrom) and not node.level
                       else "dfsql" if isinstance(node, ast.ImportFrom)
                       else " ".join(a.name for a in node.names)
                       if isinstance(node, ast.Import) else "")
                if mod.startswith("dfsql"):
                    out.append(f"{_module_name(path)}:{node.lineno}")
    return sorted(set(out))


def test_few_imports_inside_functions() -> None:
    found = _imports_in_functions()
    assert len(found) <= MAX_IMPORTS_IN_FUNCTIONS, f"{len(found)} imports of dfsql modules " \
        "inside functions (keep them for start-up cost only): " + ", ".join(found)
