"""The judge's rule for the ``system`` schema (docs/guides/watching.md#system-tables):
a client reads ``system.streaming_queries`` and ``system.streaming_progress`` by those
names, and nothing else under ``system`` — no other table, no write, drop or change of
those two, no database ``system`` made, used or dropped, no ``IDENTIFIER('system.…')``
(dfsql reads the two as a statement names them, before Spark parses it:
:mod:`dfsql.system_tables`; a table a client made there would stand in for them).

Read from Spark's parsed tree, as the judge's other rules are: a name's parts as Spark
reads them (quotes, case, ``spark_catalog.``), and a read told from a write by Spark's
own write-privilege option on the relation."""

from __future__ import annotations

from collections.abc import Sequence

from dfsql.server.guard import NotAllowedError
from dfsql.server.judge_text import Refusal, locate, start_of
from dfsql.spark.parsed_plan import Node
from dfsql.system_tables import SCHEMA_NAME, TABLES

#: the nodes that name a table, view or database
NAMING = frozenset({"UnresolvedIdentifier", "UnresolvedTable", "UnresolvedTableOrView",
                    "UnresolvedView", "UnresolvedRelation", "UnresolvedNamespace"})
HINT = ("SELECT … FROM system.streaming_queries or system.streaming_progress (any query "
        "over them); the system schema is dfsql's")


def system_refusal(text: str, node: Node) -> Refusal | None:
    """The refusal of what ``node`` does under ``system``, or None."""
    if node.name not in NAMING:
        return None
    parts = node.values_under("nameParts") or node.values_under("multipartIdentifier")
    if node.name == "UnresolvedRelation" and _read(node) and _readable(parts):
        return None
    return name_refusal(text, node, parts, namespace=node.name == "UnresolvedNamespace")


def name_refusal(text: str, node: Node, parts: Sequence[str], namespace: bool = False,
                 built: bool = False) -> Refusal | None:
    """The refusal of the name ``parts`` at ``node`` when it is under ``system``
    (``namespace``: the parts name a database; ``built``: an ``IDENTIFIER('…')``)."""
    parts = list(parts[1:] if parts and parts[0].lower() == "spark_catalog" else parts)
    # a database system, or a table in it (three parts: Spark's own catalog system of
    # functions and session variables, system.session.v, never dfsql's)
    if len(parts) != (1 if namespace else 2) or parts[0].lower() != SCHEMA_NAME:
        return None
    if built:
        what = (f"IDENTIFIER('{'.'.join(parts)}') names a table when the statement runs: "
                "the system tables are read by their names, written out")
    elif not namespace and len(parts) == 2 and parts[1].lower() in TABLES:
        what = f"system.{parts[1].lower()} is read-only: only SELECT … FROM it"
    else:
        what = (f"{'.'.join(parts)}: the system schema is dfsql's, and has only the "
                "tables streaming_queries and streaming_progress")
    at = locate(text, node, parts[0]) if not built else start_of(node)
    return Refusal(NotAllowedError, what, HINT, at, parts[0])


def _read(node: Node) -> bool:
    return not any(p.startswith("options[__required_write_privileges__")
                   for p, _ in node.values)


def _readable(parts: Sequence[str]) -> bool:
    return len(parts) == 2 and parts[0].lower() == SCHEMA_NAME and parts[1].lower() in TABLES
