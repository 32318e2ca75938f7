"""Counting the front end's scans, parses and renders while a statement runs (what
tests/language/test_statement_counts.py and tests/server/test_endpoint_counts.py share)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable


def _counted(monkeypatch, counts: Counter, what: str, owner: object, name: str) -> None:
    """Count the calls of ``owner.name`` (a class's method or a module's function)."""
    real = getattr(owner, name)

    def counting(*args, **kwargs):
        counts[what] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)


def _count(monkeypatch, run: Callable[[], object]) -> Counter:
    """The scans, parses and renders while ``run()`` runs (everything it loads is loaded
    already: a function bound by ``from … import`` in any module is wrapped there too)."""
    import lark
    import sqlglot.parser
    from sqlglot import exp

    from dfsql.language import scan as scan_module

    counts: Counter = Counter()
    real_scan = scan_module.scan
    for module in [m for n, m in list(sys.modules.items()) if n.startswith("dfsql")]:
        if getattr(module, "scan", None) is real_scan:
            _counted(monkeypatch, counts, "scan", module, "scan")
    _counted(monkeypatch, counts, "lark", lark.Lark, "parse")
    _counted(monkeypatch, counts, "sqlglot", sqlglot.parser.Parser, "parse")
    _counted(monkeypatch, counts, "render", exp.Expression, "sql")
    try:
        run()
    finally:
        monkeypatch.undo()
    return counts
