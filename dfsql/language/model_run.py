"""The model's reference run (:func:`dfsql.model.run`) with the clauses written as text.

The model takes typed :class:`~dfsql.model.clauses.Clauses` and imports nothing of the
language; tests, examples and docs that write the clauses as text (from WINDOW to EMIT)
call this, which parses them first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from dfsql.language.parse import parse_clauses
from dfsql.model import reference
from dfsql.model.clauses import Clauses


def run(
    elements: Iterable[Sequence[Any]],
    clauses: Clauses | str,
    aggregate: Callable[[list[Any]], Any] = sum,
    watermarks: Iterable[Sequence[Any]] | None = None,
    *,
    fast: bool | None = None,
    in_query: Sequence[bool] | None = None,
) -> list[dict[str, Any]]:
    """:func:`dfsql.model.run`, where ``clauses`` may also be the text from WINDOW to EMIT
    (without PROCESSING TIME the input is batch); ``in_query``: what a WHERE keeps."""
    if isinstance(clauses, str):
        clauses = parse_clauses(clauses)
    return reference.run(elements, clauses, aggregate, watermarks, fast=fast,
                         in_query=in_query)
