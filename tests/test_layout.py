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
