"""Progress where a user waits (issue #51): the reading shared by the shell, Python and the
endpoint (dfsql.spark.progress), and Python's bar on a terminal's stderr — drawn in a
pseudo-terminal, absent on a pipe and with ``dfsql.progress=false``."""

from __future__ import annotations

import re
import sys
import textwrap
import threading
from pathlib import Path

import pexpect
import pytest

from dfsql.spark.progress import LogLines, listening, say, stage_line, stages, tracker_of
from tests.conftest import wait_until

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
STAGE = r"job \d+ stage \d+: \d+/\d+ tasks"

#: 8 rows, values 1..8 at 12:00, 12:01, … 12:07, each taking a second to compute (a
#: Python UDF), in 4 partitions; FIXED(2 MINUTES) sums them by two: 3, 7, 11, 15
PROGRAM = textwrap.dedent('''
    import os, sys, time
    import dfsql
    from pyspark.sql import functions as F

    spark = dfsql.session()

    @F.udf("long")
    def slow(v):
        import time
        time.sleep(1.0)
        return v

    spark.range(8, numPartitions=4).select(
        F.lit("k").alias("key"), slow(F.col("id") + 1).alias("value"),
        F.timestamp_seconds(F.lit(1704110400) + F.col("id") * 60).alias("event_time"),
    ).createOrReplaceTempView("slow_scores")
    Q = ("SELECT key, SUM(value) AS total FROM slow_scores GROUP BY key "
         "WINDOW FIXED(2 MINUTES) ON event_time")

    def run():
        return sorted(r.total for r in dfsql.sql(Q, spark).collect())

    r, w = os.pipe()
    real, sys.stderr = sys.stderr, os.fdopen(w, "w")
    got = run()
    sys.stderr.close()
    piped = os.read(r, 1 << 20).decode()
    sys.stderr = real
    print("PIPED", got, "tasks" in piped, flush=True)
    print("TTY-START", flush=True)
    got = run()
    time.sleep(0.6)
    print("TTY-END", got, flush=True)
    spark.conf.set("dfsql.progress", "false")
    print("OFF-START", flush=True)
    got = run()
    time.sleep(0.6)
    print("OFF-END", got, flush=True)
''')


@pytest.mark.slow
def test_python_bar_on_a_terminal_not_on_a_pipe_nor_when_turned_off(tmp_path):
    """The bar's text — ``[job J stage S: done/total tasks]`` — on a pseudo-terminal's
    stderr while the windowed query's jobs run; nothing on a pipe, nothing after
    ``dfsql.progress=false``; the panes the same each time."""
    prog = tmp_path / "bar.py"
    prog.write_text(PROGRAM)
    child = pexpect.spawn(sys.executable, [str(prog)], cwd=str(tmp_path), encoding="utf-8",
                          env={"PYTHONPATH": str(ROOT), "TERM": "xterm",
                               **{k: v for k, v in __import__("os").environ.items()
                                  if k not in ("DFSQL_SPARK_MASTER", "DFSQL_SPARK_REMOTE")}},
                          dimensions=(40, 200), timeout=300)
    child.expect(pexpect.EOF)
    out = ANSI.sub("", child.before.replace("\r", "\n"))
    assert "PIPED [3, 7, 11, 15] False" in out
    tty = out.split("TTY-START", 1)[1].split("TTY-END", 1)
    assert tty[1].startswith(" [3, 7, 11, 15]")
    bars = re.findall(r"\[(" + STAGE + r"(?:; " + STAGE + r")*)\]", tty[0])
    assert bars, out[-3000:]
    # counts as Spark gives them: done never above the stage's tasks
    for done, total in re.findall(r"(\d+)/(\d+) tasks", " ".join(bars)):
        assert int(done) <= int(total)
    off = out.split("OFF-START", 1)[1].split("OFF-END", 1)
    assert "tasks" not in off[0] and off[1].startswith(" [3, 7, 11, 15]")


def test_log_lines_say_phases_and_stages_when_asked(spark, tmp_path):
    """The endpoint's reading: phase lines said on the statement's thread, then its job
    group's running stages, each change once; nothing read while no one asks."""
    from pyspark.sql import functions as F

    group = "dfsql-test-progress"
    log = LogLines(spark, group)
    started, release = threading.Event(), threading.Event()

    gate = str(tmp_path / "go")  # the job runs until the test has seen its stage

    @F.udf("long")
    def wait(v):
        import os
        import time
        deadline = time.monotonic() + 120
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)
        return v

    def work() -> None:
        sc = spark.sparkContext
        sc.setJobGroup(group, "progress test")
        with listening(log.hear):
            say("backfill: replaying the history")
            started.set()
            spark.range(4, numPartitions=2).select(wait("id")).collect()
            say("ALTER: done")
        release.set()

    say("nobody listens")  # said on this thread: heard by no one
    t = threading.Thread(target=work)
    t.start()
    assert started.wait(60)
    assert wait_until(lambda: stage_line(stages(tracker_of(spark), group)), 60)
    lines = log.take()
    assert lines[0] == "backfill: replaying the history"
    assert len(lines) == 2 and re.fullmatch(STAGE, lines[1]), lines
    again = log.take()  # a line only when the stages changed since
    assert all(re.fullmatch(STAGE, x) and x != lines[1] for x in again), again
    Path(gate).touch()
    t.join(60)
    assert release.is_set()
    assert log.take(running=False) == ["ALTER: done"]
    assert stage_line([]) is None
