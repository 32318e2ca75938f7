"""PLAIN authentication against a password file of salted hashes.

One line per user: ``user:pbkdf2_sha256:iterations:salt_hex:hash_hex`` (``#`` starts a
comment). ``dfsql passwd FILE USER`` adds or replaces a user's line, reading the
password from standard input. Passwords are never stored or compared in clear.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from dfsql.errors import DfsqlError

SCHEME = "pbkdf2_sha256"
ITERATIONS = 200_000


def hash_line(user: str, password: str, iterations: int = ITERATIONS) -> str:
    """The password file's line for ``user``."""
    if ":" in user or not user:
        raise DfsqlError(f"a user name cannot be empty or contain ':' (got {user!r})")
    salt = os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"{user}:{SCHEME}:{iterations}:{salt.hex()}:{digest.hex()}"


class PasswordFile:
    """The users a PLAIN server accepts (read once, at start)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.users: dict[str, tuple[int, bytes, bytes]] = {}
        try:
            text = self.path.read_text()
        except OSError as e:
            raise DfsqlError(f"cannot read the password file {self.path}: {e.strerror}",
                             hint="create it with: dfsql passwd FILE USER") from None
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(":")
            if len(parts) != 5 or parts[1] != SCHEME:
                raise DfsqlError(f"{self.path}, line {n}: not a dfsql password line",
                                 hint="lines are user:pbkdf2_sha256:iterations:salt:hash, "
                                      "written by: dfsql passwd FILE USER")
            self.users[parts[0]] = (int(parts[2]), bytes.fromhex(parts[3]),
                                    bytes.fromhex(parts[4]))

    def check(self, user: str, password: str) -> bool:
        entry = self.users.get(user)
        if entry is None:
            # the same work as a real check, so that timing does not tell who exists
            hashlib.pbkdf2_hmac("sha256", password.encode(), b"\0" * 16, ITERATIONS)
            return False
        iterations, salt, digest = entry
        got = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
        return hmac.compare_digest(got, digest)


def set_password(path: str | Path, user: str, password: str) -> None:
    """Add ``user`` to the password file, or replace its line."""
    p = Path(path)
    lines = p.read_text().splitlines() if p.exists() else []
    lines = [ln for ln in lines if ln.split(":", 1)[0] != user]
    lines.append(hash_line(user, password))
    p.write_text("\n".join(lines) + "\n")
    p.chmod(0o600)
