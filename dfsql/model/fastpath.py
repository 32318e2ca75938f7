"""Vectorised fast path (placeholder until written)."""

from __future__ import annotations

from typing import Any

from dfsql.language.clauses import Clauses


def plan_for(clauses: Clauses) -> Any:
    """No fast path yet."""
    return None


def run(*args: Any, **kwargs: Any) -> Any:  # pragma: no cover
    raise NotImplementedError
