"""The judge's rule for objects with owners: a client may read but not drop, alter, rename
or replace another user's continuous query's ``global_temp`` view."""

from __future__ import annotations

import re

from dfsql.continuous import owners
from dfsql.continuous_actors import NotOwnerError, actor, not_owner
from dfsql.server.judge_text import Refusal, locate
from dfsql.spark.plan.parsed_plan import Node, Tree

#: the nodes that name a changing command's target (a query reads UnresolvedRelation)
_VIEW_TARGETS = frozenset({"UnresolvedIdentifier", "UnresolvedView", "UnresolvedTableOrView",
                           "UnresolvedTable"})
_CHANGING = re.compile(r"Drop|Alter|Create|Replace|Rename|Set|Unset|Truncate|Add|Recover")


def owned_view_refusal(text: str, tree: Tree, node: Node,
                       global_temp: str) -> Refusal | None:
    """A statement may not drop, alter, rename or replace the ``global_temp`` view of
    another user's continuous query (reading it is fine): the view a changing
    command names as its target, or a global temp view it creates."""
    if node.name in _VIEW_TARGETS:
        parent = tree.nodes[node.parent].name if node.parent >= 0 else ""
        if not _CHANGING.match(parent):  # DESCRIBE, SHOW COLUMNS: reading
            return None
        parts = node.values_under("nameParts") or node.values_under("multipartIdentifier")
        if len(parts) != 2 or parts[0].lower() != global_temp:
            return None
        name = parts[1]
    elif node.name in ("CreateViewCommand", "CreateView") and \
            node.value("viewType") == "GlobalTempView":
        name = node.value("name.table") or ""
    else:
        return None
    theirs = {q.lower(): (q, o) for q, o in owners().items()}
    query, owner = theirs.get(name.lower(), (None, None))
    if query is None or actor().may_change(owner):
        return None
    return Refusal(NotOwnerError, not_owner(query, owner, f"its view "
                                            f"{global_temp}.{query}"),
                   f"reading {global_temp}.{query} is allowed; changing it is not",
                   locate(text, node, name), name)
