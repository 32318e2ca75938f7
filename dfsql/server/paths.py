"""Statements from the endpoint's clients may touch files only under the operator's
roots (``dfsql serve --data-root DIR``; ``--allow-any-path`` lifts the rule).

A statement names a file or directory in a few places only, and the scanner finds them
without being fooled by comments or other strings: a path-like table
(``parquet.`/data/x```), and the string after LOCATION, DIRECTORY, INPATH, CHECKPOINT,
JAR, FILE(S), ARCHIVE(S) and a ``path`` option. Each must resolve (symbolic links
followed) to a place under a root; anything else — another directory, another scheme
(``s3a://``, ``hdfs://``) — is a positioned error before the statement reaches Spark.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from dfsql.errors import DfsqlError
from dfsql.language.scan import Source, scan

#: data source names Spark accepts as ``format.`path``` tables
FILE_FORMATS = {"parquet", "csv", "json", "orc", "text", "avro", "binaryfile", "delta", "xml",
                "file"}
#: words after which a string literal is a path
PATH_WORDS = {"LOCATION", "DIRECTORY", "INPATH", "CHECKPOINT", "JAR", "JARS", "FILE", "FILES",
              "ARCHIVE", "ARCHIVES", "PATH"}


class PathNotAllowedError(DfsqlError):
    """A statement names a file outside the server's data roots."""

    sqlstate = "42501"


def literal(text: str) -> str:
    return text[1:-1].replace("\\'", "'").replace('\\"', '"')


def paths_of(text: str) -> list[tuple[str, int]]:
    """(path, offset) of every file or directory ``text`` names."""
    tokens, _ = scan(Source(text))
    out = []
    for i, t in enumerate(tokens):
        prev = tokens[i - 1] if i else None
        before = tokens[i - 2] if i > 1 else None
        if t.kind == "quoted" and prev is not None and prev.text == "." and before is not None \
                and before.kind == "word" and before.text.lower() in FILE_FORMATS:
            out.append((t.text[1:-1].replace("``", "`"), t.start))
        elif t.kind == "string" and prev is not None and prev.kind == "word" and \
                prev.upper in PATH_WORDS:
            out.append((literal(t.text), t.start))
        elif t.kind == "string" and prev is not None and prev.text == "=" and before is not None \
                and before.kind in ("word", "string") and before.text.strip("'\"").lower() == "path":
            out.append((literal(t.text), t.start))
    return out


def inside(path: str, roots: Sequence[str]) -> bool:
    if "://" in path and not path.startswith("file://"):
        return False
    local = path[len("file://"):] if path.startswith("file://") else path
    if local.startswith("file:"):
        local = local[len("file:"):]
    real = os.path.realpath(local)
    for root in roots:
        r = os.path.realpath(root)
        if real == r or real.startswith(r.rstrip(os.sep) + os.sep):
            return True
    return False


def check_paths(text: str, roots: Sequence[str]) -> None:
    """Raise :class:`PathNotAllowedError` at the first path outside ``roots``."""
    for path, offset in paths_of(text):
        if not inside(path, roots):
            where = ", ".join(roots) if roots else "none configured"
            raise Source(text).error(
                PathNotAllowedError, f"this server reads and writes files only under its "
                f"data roots ({where}): {path!r} is outside", offset,
                "ask the operator to add a root (dfsql serve --data-root DIR)")
