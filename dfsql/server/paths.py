"""Where a path a statement names can reach, as Hadoop's local file system will read it
(``dfsql serve --data-root DIR``; ``--allow-any-path`` lifts the rule).

The path comes from Spark's parsed plan (:mod:`dfsql.server.judge`), so Spark has
already decoded its quotes and escapes (``'\\.\\.'`` is ``..``). What is left is how
Hadoop reads a path string, and each of its ways to reach elsewhere is closed here:

* another scheme (``s3a://``, ``hdfs://``, ``jar:``): refused; ``file:`` is the local
  file system;
* ``..`` segments: collapsed as Hadoop's ``Path`` does (lexically, before any glob), and
  the path is also resolved with symbolic links followed — both must lie under a root;
* a glob: Hadoop expands ``{a,b}`` first (each alternative is checked), and ``*``, ``?``
  and ``[…]`` match names inside one directory (never ``..``), so the directory before
  the first glob must lie under a root, and so must every name the glob matches now,
  links followed;
* a backslash escapes the next character for Hadoop's glob (``\\.\\.`` is ``..``):
  each is read so before the checks (a path Hadoop does not glob keeps its
  backslashes, and is then judged as if it did: the stricter reading);
* a relative path is the JVM's working directory's (Hadoop's local working directory).
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence

from dfsql.server.guard import NotAllowedError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_GLOB = re.compile(r"[*?\[]")
_ESCAPE = re.compile(r"\\(.)")
#: alternatives one brace glob may expand to before the path is refused as too many
MAX_ALTERNATIVES = 256


class PathNotAllowedError(NotAllowedError):
    """A statement names a file outside the server's data roots."""


def outside(path: str, roots: Sequence[str], cwd: str) -> str | None:
    """None when every file ``path`` can name lies under one of ``roots``; else why not
    (a few words for the message)."""
    local = path
    if local.startswith("file:"):
        local = re.sub(r"^file:(//(localhost)?)?", "", local)
    elif _SCHEME.match(local):
        return "another file system than this server's"
    alternatives = _braces(local)
    if alternatives is None:
        return "a brace glob with too many alternatives"
    real_roots = [os.path.realpath(r) for r in roots]
    for alt in alternatives:
        alt = _ESCAPE.sub(r"\1", alt)  # Hadoop's glob reads \x as x: \.\. is ..
        if not alt:
            return "an empty path"
        full = os.path.normpath(os.path.join(cwd, alt))
        if not _under(full, real_roots):
            return "outside"
        fixed = full
        m = _GLOB.search(full)
        if m is not None:  # the directory before the first glob, then today's matches
            fixed = os.path.dirname(full[:m.start()] + "x")
            for match in glob.glob(full):
                if not _under(os.path.realpath(match), real_roots):
                    return "outside (a name the glob matches is a link out)"
        if not _under(os.path.realpath(fixed), real_roots):
            return "outside (through a symbolic link)"
    return None


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def _braces(path: str) -> list[str] | None:
    """Hadoop's brace expansion of ``path`` (nested, comma-separated), or None past
    :data:`MAX_ALTERNATIVES`. An unbalanced brace stays as it is (Hadoop then fails)."""
    out = [path]
    done: list[str] = []
    while out:
        p = out.pop()
        open_at = p.find("{")
        if open_at < 0:
            done.append(p)
            if len(done) > MAX_ALTERNATIVES:
                return None
            continue
        depth, close_at, commas = 0, -1, []
        for i in range(open_at, len(p)):
            if p[i] == "{":
                depth += 1
            elif p[i] == "}":
                depth -= 1
                if depth == 0:
                    close_at = i
                    break
            elif p[i] == "," and depth == 1:
                commas.append(i)
        if close_at < 0:
            done.append(p)
            continue
        cuts = [open_at, *commas, close_at]
        for a, b in zip(cuts, cuts[1:], strict=False):
            out.append(p[:open_at] + p[a + 1:b] + p[close_at + 1:])
        if len(out) + len(done) > MAX_ALTERNATIVES:
            return None
    return done


def roots_text(roots: Sequence[str]) -> str:
    return ", ".join(roots) if roots else "none configured"


ROOT_HINT = "ask the operator to add a root (dfsql serve --data-root DIR)"
