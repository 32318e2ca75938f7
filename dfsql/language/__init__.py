"""Text → typed query: the extension clauses (Lark) and the SELECT around them (sqlglot).

The clause types it produces live in :mod:`dfsql.model.clauses` (the model consumes
them and imports nothing of the language). The public names load lazily (PEP 562), so a
module that needs one submodule does not load both parsers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dfsql.language.continuous import parse_any
    from dfsql.language.parse import parse_clauses
    from dfsql.language.statement import Statement, WindowedBlock, parse_statement

__all__ = ["parse_any", "parse_clauses", "parse_statement", "Statement", "WindowedBlock"]

#: public name -> the submodule that defines it
_HOME = {
    "parse_clauses": "parse",
    "parse_statement": "statement",
    "parse_any": "continuous",
    "Statement": "statement",
    "WindowedBlock": "statement",
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'dfsql.language' has no attribute {name!r}")
    import importlib  # here: the lazy loader itself (PEP 562), see the docstring

    value = getattr(importlib.import_module(f"dfsql.language.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
