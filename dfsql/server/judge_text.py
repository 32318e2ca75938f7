"""Where a refusal stands in the text a client wrote: the judge decides on Spark's parsed
tree (:mod:`dfsql.server.judge`), and these place its message at the node, the quoted value
or, for a text dfsql built from the client's statement, the token it came from."""

from __future__ import annotations

import json
from dataclasses import dataclass

from dfsql.errors import DfsqlError
from dfsql.language.continuous import ContinuousStatement
from dfsql.language.statement import Statement
from dfsql.server.guard import HINT, JvmNotAllowedError, NotAllowedError
from dfsql.spark.parsed_plan import Node, Tree

_OPTION_FIELDS = ("options", "properties")  # and serdeProperties, …


@dataclass(frozen=True)
class Refusal:
    """A refused statement's error, message, hint and offset in the judged text."""

    error: type[DfsqlError]
    message: str
    hint: str
    offset: int
    #: the judged text's fragment it stands at, to find it in the client's statement
    fragment: str = ""



def option_field(path: str) -> str:
    """The field a value path ends in: ``storage.locationUri`` → ``locationuri``,
    ``options[path]`` → ``path`` (only a key of a map of options or properties: a
    ``path`` in a table's or a SerDe's properties is its location),
    ``paths.0`` → ``paths``."""
    segs = [s for s in path.split(".") if not s.isdigit()]
    last = segs[-1] if segs else ""
    if last.endswith("]") and "[" in last:
        owner, key = last[:-1].split("[", 1)
        return key.lower() if owner.lower().endswith(_OPTION_FIELDS) else ""
    return last.lower()


def path_values(field: str, value: str) -> list[str]:
    """``paths`` holds a JSON array of paths (DataFrameReader's form); the rest one."""
    if field == "paths":
        try:
            parsed = json.loads(value)
        except ValueError:
            return [value]
        return [str(p) for p in parsed] if isinstance(parsed, list) else [value]
    return [value]


def placed(stmt: Statement | ContinuousStatement, fragment: str) -> int:
    """Where ``fragment`` (a refused node's text, in a text dfsql built) is written in
    the client's statement: at the first of its tokens the fragment starts with, so
    never inside a string literal, a quoted name or a comment (0: not written there,
    e.g. a persistent view's body). For the message only: the refusal is the tree's."""
    text = stmt.written
    tokens = stmt.scanned.tokens if stmt.scanned is not None else []
    if fragment:
        for t in tokens:
            if text.startswith(fragment, t.start):
                return t.start
    return 0


def start_of(node: Node) -> int:
    return max(node.origin[2], 0)


def fragment_of(text: str, node: Node) -> str:
    start, stop = node.origin[2], node.origin[3]
    return text[start:stop + 1] if 0 <= start <= stop else ""


def locate(text: str, node: Node, value: str) -> int:
    """Where ``value`` is written inside ``node``'s text (for the message only: the
    decision was made on the tree): its quote, else the node's start."""
    start, stop = start_of(node), node.origin[3]
    span = text[start:stop + 1] if stop >= start else text[start:]
    at = span.find(value)
    if at < 0:
        return start
    return start + max(at - 1, 0) if at > 0 and span[at - 1] in "'\"`" else start + at


def literal_child(tree: Tree, node: Node, field: str) -> tuple[Node | None, str | None]:
    """The child in ``field`` and its value when it is a literal (None: an expression)."""
    arg = tree.child(node, field)
    return arg, (arg.value("value") if arg is not None and arg.name == "Literal" else None)


def unjudged(text: str, node: Node, message: str, hint: str) -> Refusal:
    return Refusal(NotAllowedError, message, hint, start_of(node), fragment_of(text, node))


def code_refusal(text: str, node: Node, message: str) -> Refusal:
    return Refusal(JvmNotAllowedError, message, HINT, start_of(node), fragment_of(text, node))


def jvm_call(text: str, node: Node, name: str) -> Refusal:
    return Refusal(JvmNotAllowedError, f"{name}(...) calls Java methods in the server's "
                   "JVM: this server does not run it", HINT, start_of(node),
                   fragment_of(text, node))
