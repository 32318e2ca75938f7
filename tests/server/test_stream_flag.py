"""``dfsql serve --stream NAME=DIR`` on a directory with no file yet (issue #51): with the
format and the columns given (``NAME=DIR json (key STRING, ...)``) the stream starts
empty and reads the files as they arrive; without them the schema can only be read from
a file, and the error says so and shows the form that needs none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dfsql.errors import DfsqlError
from dfsql.server.streams import parse_streams

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = "key STRING, value INT, event_time TIMESTAMP"


def _arrive(directory: Path, name: str, rows: list[dict]) -> None:
    """A file written beside DIR, then renamed into it (what the endpoint guide asks)."""
    tmp = directory.parent / f".{name}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, directory / name)


def test_an_empty_directory_without_columns_is_refused_with_the_form_that_needs_none(
        tmp_path) -> None:
    empty = tmp_path / "live"
    empty.mkdir()
    with pytest.raises(DfsqlError) as e:
        parse_streams([f"live={empty}"])
    assert "no .parquet, .json or .csv file" in e.value.message
    assert e.value.hint is not None
    assert f"--stream 'live={empty} json (key STRING, event_time TIMESTAMP)'" in e.value.hint


def test_the_command_says_it_before_starting_spark(tmp_path) -> None:
    empty = tmp_path / "live"
    empty.mkdir()
    done = subprocess.run([sys.executable, "-m", "dfsql.cli", "serve", "--port", "0",
                           "--stream", f"live={empty}"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"error: --stream live: no .parquet, .json or .csv file "
                                  f"in {empty}"), done.stderr
    assert "json (key STRING, event_time TIMESTAMP)" in done.stderr


@pytest.mark.parametrize("spec, problem", [
    ("live={d} xml (key STRING)", "format"),
    ("live={d} json (key STRING", "parenthes"),
    ("live={d}/missing json (key STRING)", "not a directory"),
])
def test_a_wrong_stream_spec_is_a_clear_error(tmp_path, spec, problem) -> None:
    with pytest.raises(DfsqlError) as e:
        parse_streams([spec.format(d=tmp_path)])
    assert problem in str(e.value)


def test_an_empty_directory_with_its_columns_starts_and_reads_what_arrives(
        spark, tmp_path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    [view] = parse_streams([f"live_empty={live} json ({COLUMNS})"])
    assert (view.format, view.schema) == ("json", COLUMNS)
    session = spark.newSession()
    view.register(session)
    df = session.table("live_empty")
    assert df.isStreaming
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "string"), ("value", "int"), ("event_time", "timestamp")]
    q = df.writeStream.format("memory").queryName("live_empty_rows").start()
    try:
        q.processAllAvailable()
        assert session.table("live_empty_rows").count() == 0  # started, nothing yet
        _arrive(live, "part-0.json", [{"key": "a", "value": 5,
                                       "event_time": "2015-09-01T12:00:26"}])
        _arrive(live, "part-1.json", [{"key": "a", "value": 7,
                                       "event_time": "2015-09-01T12:01:10"}])
        q.processAllAvailable()
        rows = sorted((r.key, r.value, str(r.event_time))
                      for r in session.table("live_empty_rows").collect())
        assert rows == [("a", 5, "2015-09-01 12:00:26"), ("a", 7, "2015-09-01 12:01:10")]
    finally:
        q.stop()


def test_columns_given_for_a_directory_with_files_are_the_schema(spark, tmp_path) -> None:
    # a csv file whose "value" Spark would infer as an integer: the columns say STRING
    live = tmp_path / "live"
    live.mkdir()
    (live / "part-0.csv").write_text("key,value\na,5\n")
    [view] = parse_streams([f"live_csv={live} csv (key STRING, value STRING)"])
    session = spark.newSession()
    view.register(session)
    assert [(f.name, f.dataType.simpleString())
            for f in session.table("live_csv").schema.fields] == [("key", "string"),
                                                                 ("value", "string")]
    [inferred] = parse_streams([f"live_csv={live}"])
    inferred.register(session)
    assert session.table("live_csv").schema["value"].dataType.simpleString() == "int"


def test_columns_spark_cannot_read_are_the_users_mistake(spark, tmp_path) -> None:
    [view] = parse_streams([f"live_bad={tmp_path} json (key STRANG, value INT)"])
    with pytest.raises(DfsqlError) as e:
        view.struct(spark)
    assert str(e.value).startswith("--stream live_bad: the columns (key STRANG, value INT) "
                                   "are not a column list Spark reads")
    assert "Traceback" not in str(e.value) and e.value.hint


@pytest.mark.slow
def test_dfsql_serve_starts_on_an_empty_stream_directory(tmp_path) -> None:
    """The command itself: ``dfsql serve --stream 'live=DIR json (...)'`` on an empty DIR
    starts, and a client's session has the view with the columns given."""
    import socket
    import time

    from pyhive import hive

    live = tmp_path / "live"
    live.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "serve.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dfsql.cli", "serve", "--port",
                                 str(port), "--auth", "NOSASL",
                                 "--stream", f"live={live} json ({COLUMNS})"],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        deadline = time.time() + 300  # a JVM on a loaded machine: minutes, not seconds
        while "dfsql serving" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.time() < deadline, log.read_text()
            time.sleep(0.5)
        conn = hive.connect(host="127.0.0.1", port=port, auth="NOSASL")
        try:
            cur = conn.cursor()
            cur.execute("DESCRIBE live")
            assert [(r[0], r[1]) for r in cur.fetchall()] == [
                ("key", "string"), ("value", "int"), ("event_time", "timestamp")]
        finally:
            conn.close()
    finally:
        proc.terminate()
        proc.wait(60)
