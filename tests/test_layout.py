"""The tests are laid out like the code (issue #53): ``tests/spark/<package>/`` for each
package of ``dfsql/spark/``, and no test module imports another's (what several share is
in a helper module: tests/paper.py, tests/spark/feeds.py, tests/server/clients.py, …), so
a module can be moved, run or deleted alone."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "dfsql"


def _test_module_imports(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name.rsplit(".", 1)[-1].startswith("test_"):
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
    return found


def test_no_test_module_imports_another() -> None:
    assert _test_module_imports(TESTS) == []


def test_the_check_sees_a_planted_import(tmp_path: Path) -> None:
    (tmp_path / "test_b.py").write_text("from tests.spark.test_a import X\n")
    assert _test_module_imports(tmp_path) == ["test_b.py:1 imports tests.spark.test_a"]


def test_each_spark_package_has_its_tests_folder() -> None:
    packages = {p.parent.name for p in (PACKAGE / "spark").glob("*/__init__.py")}
    folders = {p.name for p in (TESTS / "spark").iterdir() if p.is_dir()
               and any(p.glob("test_*.py"))}
    assert packages and packages == folders


def _cited_anchors(root: Path) -> set[tuple[str, str]]:
    """(document, anchor) of every ``docs/….md#anchor`` the code, tests and benchmarks
    cite (``#a, #b`` after one: more anchors of the same document)."""
    import re

    cited = set()
    for folder in ("dfsql", "tests", "benchmarks"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for m in re.finditer(r"docs/([\w/]+\.md)#([\w-]+)((?:,? (?:and )?#[\w-]+)*)", text):
                cited.add((m[1], m[2]))
                cited |= {(m[1], a) for a in re.findall(r"#([\w-]+)", m[3])}
    return cited


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    import re

    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_references_point_into_the_repositorys_own_docs() -> None:
    """Every reference is to docs/ (issue #53): never to the contract outside the repo,
    and every cited section exists."""
    outside = "LANGUAGE" + ".md"
    root = TESTS.parent
    for folder in ("dfsql", "tests", "benchmarks"):
        for path in (root / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".md", ".json", ".sql", ".lark"):
                assert outside not in path.read_text(encoding="utf-8"), path
    cited = _cited_anchors(root)
    assert len(cited) > 10
    for doc, anchor in sorted(cited):
        headings = [line.lstrip("#") for line in (root / "dfsql" / "docs" / doc)
                    .read_text(encoding="utf-8").splitlines() if line.startswith("#")]
        assert anchor in {_anchor(h) for h in headings}, (doc, anchor)
