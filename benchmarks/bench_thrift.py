"""Fetching a large result over HiveServer2's Thrift protocol: ``dfsql serve`` against
Spark's own Thrift server (``HiveThriftServer2``), in the same run.

The query, on both servers (``--rows`` N for PyHive, ``--jdbc-rows`` for JDBC)::

    SELECT id, id * 2 AS twice, CAST(id AS STRING) AS s FROM range(0, N, 1, 4)

Clients:

* ``pyhive``: PyHive's DB-API (``hive.connect(..., auth='NOSASL')``), ``cursor.arraysize``
  rows per FetchResults (each of ``--arraysize``; PyHive's default is 1000), ``execute`` +
  ``fetchall``; the time is from ``execute`` to the last row (the connection is opened
  before and closed after, untimed); the row count must equal N.
* ``jdbc``: Hive JDBC through the ``beeline`` that ships with PySpark
  (``--outputformat=csv2 --silent=true -e QUERY``, stdout to a file whose lines, the header
  and N rows, are counted afterwards). The time is the whole beeline process (JVM start,
  connect, fetch, print); a beeline ``SELECT 1`` is timed too, as the fixed cost (JVM
  start-up and connection), and rows/s are given both raw and with that cost subtracted
  (``net``).

Both servers run for the whole benchmark, one busy at a time (a 2-core machine): Spark's, started
with ``spark-submit --class org.apache.spark.sql.hive.thriftserver.HiveThriftServer2
--master local[2]`` in a temporary directory (its Derby metastore and warehouse live
there), then ``python -m dfsql.cli serve --auth NOSASL`` (``dfsql.session()``'s
``local[2]``). Each is ready once its port accepts connections and a PyHive ``SELECT 1``
answers; both are stopped (SIGTERM to its process group, then SIGKILL) at the end, also
on errors. One warm-up fetch per client and server, then ``--runs`` rounds; in a round
each client fetches from both servers back to back (which server goes first alternates),
so that the machine's load drifting over the run weighs on both alike. The figures are
the medians, and the median of the rounds' ratios (each round's two runs side by side).
Both bind 127.0.0.1 only.
Every step is bounded (``--start-timeout``, ``--fetch-timeout``).

Output: one JSON line per measurement, then a table with the ratio dfsql / Spark of
rows/s (above 1.0: dfsql is faster). Usage::

    python benchmarks/bench_thrift.py [--rows 1000000] [--jdbc-rows 200000] [--runs 3]
        [--arraysize 10000 1000] [--servers spark dfsql] [--clients pyhive jdbc]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HOST = "127.0.0.1"
QUERY = "SELECT id, id * 2 AS twice, CAST(id AS STRING) AS s FROM range(0, {n}, 1, 4)"
HEADER = "id,twice,s"


def pyspark_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def deadline(seconds: float, what: str) -> Iterator[None]:
    """Raise TimeoutError in the main thread if the block outlasts ``seconds`` (SIGALRM:
    it interrupts a blocked socket read, so a hung server cannot hang the benchmark)."""
    def expired(signum, frame):
        raise TimeoutError(f"{what}: no answer within {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_bounded(cmd: list[str], timeout: float, stdout, stderr, cwd: Path,
                env: dict[str, str]) -> int:
    """Run ``cmd`` in its own process group; on timeout, kill the group and raise."""
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                            cwd=cwd, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{Path(cmd[0]).name} still running after {timeout:.0f} s") from None
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class ServerProcess:
    """A Thrift server run as a subprocess in its own process group, output to a log."""

    def __init__(self, name: str, cmd: list[str], cwd: Path, env: dict[str, str],
                 port: int, ready_line: str | None = None) -> None:
        self.name, self.cmd, self.cwd, self.env, self.port = name, cmd, cwd, env, port
        self.ready_line = ready_line
        self.log = cwd / f"{name}-server.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float) -> float:
        """Start and wait until ready; the seconds it took."""
        t0 = time.perf_counter()
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.cwd,
                                         env=self.env, start_new_session=True)
        end = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} server exited with {self.proc.returncode} "
                                   f"while starting\n{self.tail()}")
            if self.ready_line and self.ready_line not in self.log.read_text(errors="replace"):
                time.sleep(0.5)
                continue
            try:
                with socket.create_connection((HOST, self.port), timeout=2):
                    pass
                with deadline(30, f"{self.name}: SELECT 1"):
                    conn = connect(self.port)
                    try:
                        cur = conn.cursor()
                        cur.execute("SELECT 1")
                        if cur.fetchall() != [(1,)]:
                            raise RuntimeError(f"{self.name}: SELECT 1 answered wrong")
                    finally:
                        conn.close()
                return time.perf_counter() - t0
            except Exception as e:  # not up yet (refused, reset, half-started): retry
                last = e
                time.sleep(1)
        raise TimeoutError(f"{self.name} server not ready after {timeout:.0f} s "
                           f"(last error: {last!r})\n{self.tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # the group may outlive its leader (a JVM child): make sure it is gone
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(f"  | {line}" for line in text[-lines:])


def connect(port: int):
    from pyhive import hive

    return hive.connect(host=HOST, port=port, auth="NOSASL")


def pyhive_fetch(port: int, rows: int, arraysize: int, timeout: float) -> float:
    """Seconds from ``execute`` to the last row of ``fetchall``."""
    with deadline(timeout, f"PyHive fetch of {rows} rows"):
        conn = connect(port)
        try:
            cur = conn.cursor()
            cur.arraysize = arraysize
            t0 = time.perf_counter()
            cur.execute(QUERY.format(n=rows))
            got = len(cur.fetchall())
            seconds = time.perf_counter() - t0
            cur.close()
        finally:
            conn.close()
    if got != rows:
        raise AssertionError(f"PyHive fetched {got} rows, expected {rows}")
    return seconds


def count_lines(path: Path) -> tuple[int, str]:
    """Lines in ``path`` (read in chunks), and its first line."""
    n, first = 0, ""
    with open(path, "rb") as f:
        first = f.readline().decode(errors="replace").rstrip("\r\n")
        if first:
            n = 1
        while chunk := f.read(1 << 20):
            n += chunk.count(b"\n")
    return n, first


class Beeline:
    def __init__(self, spark_home: Path, work: Path, env: dict[str, str],
                 timeout: float) -> None:
        self.bin = str(spark_home / "bin" / "beeline")
        self.work, self.env, self.timeout = work, env, timeout

    def run(self, port: int, query: str, expect_rows: int, header: str = HEADER) -> float:
        """Seconds for the whole beeline process; checks ``header`` + ``expect_rows`` lines."""
        out, err = self.work / "beeline.out", self.work / "beeline.err"
        # -n: Hive JDBC sends no user name otherwise, and Spark's server refuses "Null user"
        cmd = [self.bin, "-u", f"jdbc:hive2://{HOST}:{port}/default;auth=noSasl",
               "-n", "bench", "--outputformat=csv2", "--silent=true", "-e", query]
        with open(out, "wb") as fo, open(err, "wb") as fe:
            t0 = time.perf_counter()
            rc = run_bounded(cmd, self.timeout, fo, fe, self.work, self.env)
            seconds = time.perf_counter() - t0
        lines, first = count_lines(out)
        errors = err.read_text(errors="replace").strip().splitlines()
        if rc != 0 or lines != expect_rows + 1:
            raise AssertionError(f"beeline exited {rc} with {lines} lines, expected "
                                 f"{expect_rows + 1} (header + rows); stderr tail:\n"
                                 + "\n".join(errors[-10:]))
        # with -e, beeline prints its prompt in front of the header: "0: jdbc:...> id,..."
        if not first.endswith(header):
            raise AssertionError(f"beeline's first line is {first!r}")
        return seconds


def spark_server(spark_home: Path, work: Path, env: dict[str, str], port: int
                 ) -> ServerProcess:
    wd = work / "spark"
    wd.mkdir()
    cmd = [str(spark_home / "bin" / "spark-submit"),
           "--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
           "--master", "local[2]",
           "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.sql.warehouse.dir={wd / 'warehouse'}",
           "--conf", f"spark.driver.extraJavaOptions=-Dderby.system.home={wd}",
           "--conf", f"spark.driver.host={HOST}",
           "--conf", f"spark.driver.bindAddress={HOST}",
           "--hiveconf", f"hive.server2.thrift.port={port}",
           "--hiveconf", f"hive.server2.thrift.bind.host={HOST}",
           "--hiveconf", "hive.server2.authentication=NOSASL",
           "spark-internal"]
    return ServerProcess("spark", cmd, wd, env, port)


def dfsql_server(work: Path, env: dict[str, str], port: int) -> ServerProcess:
    wd = work / "dfsql"
    wd.mkdir()
    py = str(ROOT / ".venv" / "bin" / "python")
    if not Path(py).exists():
        py = sys.executable
    env = dict(env, PYSPARK_PYTHON=py, PYSPARK_DRIVER_PYTHON=py,
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH"))
                                          if p))
    cmd = [py, "-m", "dfsql.cli", "serve", "--port", str(port), "--auth", "NOSASL"]
    return ServerProcess("dfsql", cmd, wd, env, port, ready_line="dfsql serving")


def measure(fns: dict[tuple[str, str], Callable[[], float]], runs: int
            ) -> dict[tuple[str, str], list[float]]:
    """One warm-up call of each, then ``runs`` rounds. Within a round each client runs
    against every server back to back, the servers' order alternating from round to
    round, so that a change in the machine's load weighs on both servers alike."""
    for fn in fns.values():
        fn()
    times: dict[tuple[str, str], list[float]] = {k: [] for k in fns}
    servers = list(dict.fromkeys(server for server, _ in fns))
    clients = list(dict.fromkeys(client for _, client in fns))
    for r in range(runs):
        order = servers if r % 2 == 0 else servers[::-1]
        for client in clients:
            for server in order:
                if (server, client) in fns:
                    times[server, client].append(fns[server, client]())
    return times


def client_fns(port: int, args: argparse.Namespace, beeline: Beeline
               ) -> dict[str, Callable[[], float]]:
    """The measurements of one server, by client."""
    fns: dict[str, Callable[[], float]] = {}
    for a in args.arraysize if "pyhive" in args.clients else []:
        fns[f"pyhive arraysize={a}"] = (
            lambda a=a: pyhive_fetch(port, args.rows, a, args.fetch_timeout))
    if "jdbc" in args.clients:
        fns["jdbc SELECT 1"] = lambda: beeline.run(port, "SELECT 1", 1, "1")
        fns["jdbc"] = lambda: beeline.run(port, QUERY.format(n=args.jdbc_rows), args.jdbc_rows)
    return fns


def summarise(times: dict[tuple[str, str], list[float]], args: argparse.Namespace
              ) -> list[dict]:
    """One result per (server, client), each printed as a JSON line; with both servers,
    the ratio of each round (the two servers' runs next to each other) too."""
    out = []
    for (server, client), ts in times.items():
        if client == "jdbc SELECT 1":
            continue
        rows = args.jdbc_rows if client == "jdbc" else args.rows
        med = statistics.median(ts)
        row = {"server": server, "client": client, "rows": rows, "seconds": round(med, 3),
               "rows_per_s": round(rows / med), "runs_s": [round(t, 3) for t in ts]}
        if client == "jdbc":
            fixed = statistics.median(times[server, "jdbc SELECT 1"])
            row["select1_s"] = round(fixed, 3)
            row["select1_runs_s"] = [round(t, 3) for t in times[server, "jdbc SELECT 1"]]
            row["rows_per_s_net"] = round(rows / (med - fixed)) if med > fixed else None
        other = times.get(("spark", client)) if server == "dfsql" else None
        if other:
            row["round_ratios"] = [round(s / d, 3) for s, d in zip(other, ts, strict=True)]
            row["round_ratio_median"] = round(statistics.median(row["round_ratios"]), 3)
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows fetched by PyHive")
    ap.add_argument("--jdbc-rows", type=int, default=200_000, help="rows fetched by beeline")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--arraysize", type=int, nargs="+", default=[10_000, 1_000],
                    help="PyHive cursor.arraysize values to measure (PyHive's default: 1000)")
    ap.add_argument("--servers", nargs="+", choices=["spark", "dfsql"],
                    default=["spark", "dfsql"])
    ap.add_argument("--clients", nargs="+", choices=["pyhive", "jdbc"],
                    default=["pyhive", "jdbc"])
    ap.add_argument("--start-timeout", type=float, default=180.0,
                    help="seconds for a server to start and answer SELECT 1")
    ap.add_argument("--fetch-timeout", type=float, default=300.0,
                    help="seconds for one fetch (PyHive call or beeline process)")
    args = ap.parse_args(argv)

    spark_home = pyspark_dir()
    env = dict(os.environ, SPARK_HOME=str(spark_home), SPARK_LOCAL_IP=HOST)
    work = Path(tempfile.mkdtemp(prefix="dfsql-bench-thrift-"))
    beeline = Beeline(spark_home, work, env, args.fetch_timeout)
    t_start = time.perf_counter()
    results: list[dict] = []
    failed = False
    servers: list[ServerProcess] = []
    try:
        fns: dict[tuple[str, str], Callable[[], float]] = {}
        for name in args.servers:
            port = free_port()
            server = (spark_server(spark_home, work, env, port) if name == "spark"
                      else dfsql_server(work, env, port))
            servers.append(server)
            try:
                startup = server.start(args.start_timeout)
            except Exception as e:  # report, stop it, go on with the other one
                failed = True
                print(json.dumps({"server": name, "event": "error", "error": str(e)[:2000]}),
                      flush=True)
                server.stop()
                continue
            print(json.dumps({"server": name, "event": "ready", "port": port,
                              "startup_s": round(startup, 1)}), flush=True)
            for client, fn in client_fns(port, args, beeline).items():
                fns[name, client] = fn
        results = summarise(measure(fns, args.runs), args)
    except Exception as e:
        failed = True
        print(json.dumps({"event": "error", "error": str(e)[:2000]}), flush=True)
        for server in servers:
            print(f"{server.name} server log tail:\n{server.tail()}", file=sys.stderr,
                  flush=True)
    finally:
        for server in servers:
            server.stop()
    total = time.perf_counter() - t_start

    by = {(r["server"], r["client"]): r for r in results}
    clients = list(dict.fromkeys(r["client"] for r in results))
    print(f"\n{'client':<22} {'rows':>8} {'spark s':>8} {'dfsql s':>8} {'spark rows/s':>13} "
          f"{'dfsql rows/s':>13} {'ratio':>6} {'rounds':>7}")

    def line(label, rows, s, d, key):
        sv = s[key] if s and s.get(key) else None
        dv = d[key] if d and d.get(key) else None
        ratio = f"{dv / sv:.2f}" if sv and dv else "-"
        rounds = d.get("round_ratio_median", "-") if d and key == "rows_per_s" else ""
        print(f"{label:<22} {rows:>8} {s['seconds'] if s else '-':>8} "
              f"{d['seconds'] if d else '-':>8} {sv or '-':>13} {dv or '-':>13} {ratio:>6} "
              f"{rounds:>7}")

    for client in clients:
        s, d = by.get(("spark", client)), by.get(("dfsql", client))
        rows = (s or d)["rows"]
        line(client, rows, s, d, "rows_per_s")
        if client == "jdbc":
            line("jdbc net of SELECT 1", rows, s, d, "rows_per_s_net")
            print(f"{'  (SELECT 1 s)':<22} {'':>8} {s['select1_s'] if s else '-':>8} "
                  f"{d['select1_s'] if d else '-':>8}")
    print(f"\ntotal {total:.0f} s; ratio = dfsql rows/s / Spark rows/s (>= 1.0: dfsql at "
          f"least as fast), of the medians; rounds = the median of each round's ratio" + (f"; logs kept in {work}" if failed else ""))
    if not failed:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
