"""Costs bounded by the clauses' values (issue #52), checked as a clause is parsed,
before any Spark work.

``WINDOW SLIDING(1 HOUR, EVERY 1 MILLISECOND)`` puts every element in 3,600,000 windows:
Spark's ``window()`` expands each row into one projection per window it may belong to
(an ``Expand`` of ceil(size / period) branches, built in the driver), and the model's
assignment lists as many candidate starts. Planning that took 4.7 GB of heap and
minutes, in a place no statement timeout reaches (it cancels jobs, not planning). So a
SLIDING spec asking for more windows per element than :func:`max_windows_per_row` is
refused where it is written, with how many it asks for and the bound: a mistake in the
query, in ``dfsql.sql`` as over the endpoint (``dfsql serve --max-windows-per-row``
sets the bound for its process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dfsql.errors import DfsqlError

if TYPE_CHECKING:
    from dfsql.model.clauses import Trigger

#: the default bound. Measured for #52 on one row, local[2] on a busy 2-core machine
#: (dfsql.sql's planning / the whole collect): 100 windows per row 2.5 s / 16 s, 1,000
#: 6 s / 83 s, 2,000 12 s / 122 s, growing linearly from there (3,600,000: hours)
MAX_WINDOWS_PER_ROW = 1_000

#: the default bound on a TRIGGER tree's nodes: 1,000 ANY branches plan in 1.6 s on one
#: row, 10,000 in 4.6 s (measured for #52); no trigger written by hand comes near
MAX_TRIGGER_NODES = 1_000

#: the default bound on a statement's windowed queries (blocks): dfsql plans each in
#: Python, holding the GIL; measured for #52 on a loaded 2-core machine, 10 UNION ALL'd
#: blocks plan in 24 s, 50 in 31 s, and a 1 MB statement could hold thousands
MAX_WINDOWED_QUERIES = 100

_bound = [MAX_WINDOWS_PER_ROW]
_trigger_bound = [MAX_TRIGGER_NODES]
_blocks_bound = [MAX_WINDOWED_QUERIES]


class CostError(DfsqlError):
    """A statement whose clauses ask for more than a bound allows (SQLSTATE 54000,
    "program limit exceeded", as the endpoint's other limits)."""

    sqlstate = "54000"


def max_windows_per_row() -> int:
    """The bound on windows per element (0: none)."""
    return _bound[0]


def set_max_windows_per_row(n: int) -> None:
    """Set the bound for this process (``dfsql serve --max-windows-per-row``; 0: none)."""
    if n < 0:
        raise ValueError(f"a bound is 0 (none) or more: {n}")
    _bound[0] = n


def windows_per_row(size: int, period: int) -> int:
    """How many windows of ``size`` µs, one every ``period`` µs, an element is in at
    most: ceil(size / period)."""
    return -(-size // period)


def check_windows_per_row(size: int, period: int, line: int | None,
                          column: int | None) -> None:
    """Refuse a SLIDING spec over the bound, at ``line`` / ``column`` (its EVERY)."""
    bound, n = _bound[0], windows_per_row(size, period)
    if 0 < bound < n:
        raise CostError(
            f"SLIDING puts each row in {n:,} windows (size / period); the bound is "
            f"{bound:,} windows per row (dfsql serve --max-windows-per-row)", line, column,
            f"slide by a period of at least size / {bound:,}, or use a smaller window "
            "size; FIXED windows put each row in one window")


def set_max_trigger_nodes(n: int) -> None:
    """Set the bound on a trigger tree's nodes for this process (``dfsql serve
    --max-trigger-nodes``; 0: none)."""
    if n < 0:
        raise ValueError(f"a bound is 0 (none) or more: {n}")
    _trigger_bound[0] = n


def trigger_nodes(trigger: Trigger) -> int:
    """How many nodes ``trigger``'s tree has (walked without recursion: a deep tree is
    what is being counted)."""
    count, todo = 0, [trigger]
    while todo:
        node = todo.pop()
        count += 1
        todo.extend(node.children)
    return count


def check_trigger_nodes(trigger: Trigger, line: int | None, column: int | None) -> None:
    """Refuse a TRIGGER clause whose tree has more nodes than the bound, at its TRIGGER."""
    bound = _trigger_bound[0]
    if bound > 0 and (n := trigger_nodes(trigger)) > bound:
        raise CostError(
            f"the trigger has {n:,} nodes; the bound is {bound:,} (dfsql serve "
            "--max-trigger-nodes)", line, column,
            "a trigger of the same firings is usually far smaller: AFTER n ROWS once, "
            "rather than ANY of many counts")


def set_max_windowed_queries(n: int) -> None:
    """Set the bound on a statement's windowed queries for this process (``dfsql serve
    --max-windowed-queries``; 0: none)."""
    if n < 0:
        raise ValueError(f"a bound is 0 (none) or more: {n}")
    _blocks_bound[0] = n


def check_windowed_queries(count: int, line: int | None, column: int | None) -> None:
    """Refuse the ``count``-th windowed query of a statement when it is one over the
    bound, at its start (before it, and those after it, are parsed)."""
    bound = _blocks_bound[0]
    if 0 < bound < count:
        raise CostError(
            f"the statement has more than {bound:,} windowed queries; the bound is "
            f"{bound:,} (dfsql serve --max-windowed-queries)", line, column,
            "run them as separate statements, or put the rows together first and "
            "window them once")
