"""Windowed statements on Spark: input stage → windows and panes → aggregates → output.

Execution lands with the executor issue; until then a windowed query says so plainly
instead of returning anything that looks like a result.
"""

from __future__ import annotations

from dfsql.errors import NotSupportedError


def execute(stmt, spark, registry):  # noqa: ARG001 - signature of the real planner
    top = stmt.blocks[-1]
    p = stmt.source.pos(top.region[0])
    raise NotSupportedError(
        "executing windowed queries is not available yet in this version of dfsql",
        p.line, p.column, "dfsql.explain(query) shows how it will run",
    )
