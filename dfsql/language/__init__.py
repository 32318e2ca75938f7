"""Text → typed query: the extension clauses (Lark) and the SELECT around them (sqlglot)."""

from dfsql.language.parse import parse_clauses
from dfsql.language.statement import Statement, WindowedBlock, parse_statement

__all__ = ["parse_clauses", "parse_statement", "Statement", "WindowedBlock"]
