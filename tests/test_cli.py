"""The CLI's statement splitting and its demo over the paper's examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from dfsql.cli import _statements

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "paper"


def test_semicolons_in_comments_and_strings_do_not_split(tmp_path: Path) -> None:
    f = tmp_path / "q.sql"
    f.write_text("-- a comment; with a semicolon\nSELECT 'a;b' AS x;\n"
                 "/* block; comment */ SELECT 2;\n-- trailing comment only\n")
    assert _statements(f) == ["-- a comment; with a semicolon\nSELECT 'a;b' AS x",
                              "/* block; comment */ SELECT 2"]


def test_every_example_is_one_statement() -> None:
    for path in sorted(EXAMPLES.glob("*.sql")):
        assert len(_statements(path)) == 1, path.name


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(("var", "scheme", "what"), [
    ("DFSQL_SPARK_REMOTE", "sc", "Spark Connect server"),
    ("DFSQL_SPARK_MASTER", "spark", "Spark master"),
])
def test_unreachable_cluster_is_a_clear_error(var: str, scheme: str, what: str) -> None:
    """A cluster URL nobody answers fails at once with dfsql's message and hint — not after
    Spark's minute of retries, and not with a stack trace. "At once" is what the message
    proves: dfsql.session() raises it from its reachability check, before any Spark
    (a JVM or a Connect client) is built, so no retry can have run (no bound on the
    elapsed time, which a loaded machine would stretch)."""
    import os
    import subprocess
    import sys

    url = f"{scheme}://127.0.0.1:{_free_port()}"
    env = {k: v for k, v in os.environ.items()
           if k not in ("DFSQL_SPARK_REMOTE", "DFSQL_SPARK_MASTER")}
    env[var] = url
    proc = subprocess.run([sys.executable, "-m", "dfsql.cli", "demo"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert f"error: the {what} at {url} does not answer" in proc.stderr
    assert f"hint: start it, or fix the URL (argument or {var})" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


#: what Spark's JVM and Python workers print that a dfsql user should not see (issue #23)
NOISE = ("incubator", "log4j", "WARN", "Python worker", "Failed to cancel job group",
         "setLogLevel")

STREAM_PROGRAM = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import dfsql
from tests.conftest import paper_stream_dir, register_paper_tables
spark = dfsql.session()
register_paper_tables(spark)
src = paper_stream_dir(Path(sys.argv[2]))
schema = spark.read.parquet(str(src)).schema
spark.readStream.schema(schema).option("maxFilesPerTrigger", 2).parquet(str(src)) \\
    .createOrReplaceTempView("live")
query = (open(Path(sys.argv[1]) / "examples" / "paper" / "fig14_sessions_retracting.sql")
         .read().replace("FROM scores", "FROM live").rstrip().rstrip(";"))
sink = dfsql.TableSink("live_windows")
q = dfsql.start(query, sink=sink, spark=spark)
q.processAllAvailable()
q.stop()
print(sorted(int(v) for v in spark.table("live_windows").toPandas()["total"]))
"""


def _quiet_env(tmp_path: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in ("DFSQL_SPARK_REMOTE", "DFSQL_SPARK_MASTER")}
    env["DFSQL_SPARK_LOG"] = str(tmp_path / "spark.log")
    return env


def test_the_demo_prints_no_spark_noise(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = _quiet_env(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "dfsql.cli", "demo"], env=env,
                          capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| k   | 10 | 51    |" in proc.stdout  # the paper's ten values, total 51
    for word in NOISE:
        assert word not in proc.stdout + proc.stderr, word
    assert proc.stderr == ""
    assert "log4j" in (tmp_path / "spark.log").read_text()  # it went to the log


def test_a_program_streaming_through_dfsql_prints_no_worker_noise(tmp_path: Path) -> None:
    """A stream on dfsql's executor (transformWithStateInPandas): PySpark's worker prints
    a line per task on stderr, which goes to the log with the JVM's output. The live
    windows are Figure 14's two after its last pane (39 and 12, from the paper)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", STREAM_PROGRAM, str(root),
                           str(tmp_path / "stream")], env=_quiet_env(tmp_path),
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[12, 39]"
    for word in NOISE:
        assert word not in proc.stdout + proc.stderr, word
    assert "TransformWithStateInPandas Python worker" in (tmp_path / "spark.log").read_text()
