"""Who created each object a client of the endpoint made: its tables and persistent
views, its global temp views, its databases (a session's own temp views are invisible
to other sessions and need none). One registry per server, filled when a client's
CREATE succeeds, moved by a rename, emptied by a DROP; with ``--state-dir`` it is kept in
``<state-dir>/owners.json`` (written whole, atomically, after each change) so that a
restart keeps the owners, as it keeps continuous queries.

An object without an entry was made by the operator (the server's own session, the
shell, a catalog registered from the warehouse) or before the registry was kept: it has
no owner, and only an admin may change it (:mod:`dfsql.server.judge_owners`).

Keys are ``table:<database>.<name>`` (tables, persistent and global temp views share a
database's names) and ``database:<name>``, lower case as Spark's catalog keeps them, a
part with a dot or a back-quote back-quoted.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

#: the file in a --state-dir
FILE = "owners.json"


def _part(name: str) -> str:
    """A name in a key: back-quoted when it holds a dot or a back-quote, so that no two
    objects share a key (database ``a.b``'s table ``c`` is not database ``a``'s ``b.c``)."""
    name = name.lower()
    return f"`{name.replace('`', '``')}`" if "." in name or "`" in name else name


def table_key(database: str, name: str) -> str:
    return f"table:{_part(database)}.{_part(name) if name else ''}"


def database_key(name: str) -> str:
    return f"database:{_part(name)}"


class Registry:
    """The owners of a server's clients' objects (thread-safe: sessions share it)."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        self._file: Path | None = None

    def keep_in(self, state_dir: str | os.PathLike) -> None:
        """Keep the registry in ``state_dir`` from now on, starting from what it holds."""
        path = Path(state_dir) / FILE
        kept: dict[str, dict[str, str]] = {}
        if path.exists():
            try:
                kept = dict(json.loads(path.read_text()).get("objects", {}))
            except (OSError, ValueError, AttributeError) as e:
                raise OSError(f"{path} is not a dfsql owners file ({e}): move it away to "
                              "start without owners") from None
        with self._lock:
            self._file = path
            self._objects = {k: dict(v) for k, v in kept.items() if isinstance(v, dict)}

    def owner(self, key: str) -> str | None:
        entry = self._objects.get(key)
        return None if entry is None else entry.get("owner")

    def under(self, database: str) -> dict[str, dict[str, str]]:
        """{key: entry} of the objects registered in ``database``."""
        prefix = table_key(database, "")
        return {k: dict(v) for k, v in list(self._objects.items()) if k.startswith(prefix)}

    def owners_of_tables(self) -> dict[str, str]:
        """{"<database>.<name>": owner} of every registered table or view (SHOW TABLES)."""
        return {v.get("shown", k[len("table:"):]): v.get("owner", "")
                for k, v in list(self._objects.items()) if k.startswith("table:")}

    def record(self, key: str, owner: str, kind: str, shown: str) -> None:
        """``key`` is ``owner``'s: a ``kind`` of object named ``shown`` (db.name)."""
        with self._lock:
            self._objects[key] = {"owner": owner, "kind": kind, "shown": shown}
            self._save()

    def forget(self, *keys: str) -> None:
        with self._lock:
            gone = [k for k in keys if self._objects.pop(k, None) is not None]
            if gone:
                self._save()

    def move(self, old: str, new: str, shown: str) -> None:
        """A rename: ``old``'s entry is now ``new``'s, named ``shown``."""
        with self._lock:
            entry = self._objects.pop(old, None)
            if entry is not None:
                self._objects[new] = {**entry, "shown": shown}
                self._save()

    def _save(self) -> None:
        """Write the whole registry (under the lock), replacing the file at once."""
        if self._file is None:
            return
        self._file.parent.mkdir(parents=True, exist_ok=True)
        part = self._file.with_name(self._file.name + ".part")
        part.write_text(json.dumps({"objects": self._objects}, indent=1, sort_keys=True))
        os.replace(part, self._file)
