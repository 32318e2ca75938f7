"""A kept continuous query whose Python worker did not start in time runs again
(dfsql/continuous_revival.py; docs/guides/endpoint.md "Continuous queries").

Spark waits a fixed 10 seconds for a Python worker it starts to connect back. The
query's stateful stream starts one on the driver when the stream starts; here that
worker is held 15 seconds the first time it starts (a ``sitecustomize`` on the server's
PYTHONPATH, as a loaded machine would hold its imports), so Spark ends the stream with
"Python worker failed to connect back". The query, kept in ``--state-dir``, is started
again from its checkpoint, and its table is the one a run without the failure holds."""

from __future__ import annotations

from datetime import timedelta

from tests.server.restarts import QUERY, T0, Served, _events, _show_rows, _table, _wait, _write

HOLD = '''
import time
from pathlib import Path

_held = Path({held!r})
if b"transform_with_state_driver_worker" in Path("/proc/self/cmdline").read_bytes() \\
        and not _held.exists():
    _held.write_text("held")
    time.sleep(15)
'''


def test_a_query_whose_python_worker_did_not_start_in_time_runs_again(tmp_path) -> None:
    tmp_path = tmp_path.resolve()
    src, inject, held = tmp_path / "in", tmp_path / "inject", tmp_path / "held"
    src.mkdir()
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(HOLD.format(held=str(held)))
    _write(src / "part-0.parquet", _events(0, 60))
    _write(src / "part-1.parquet", _events(60, 120))
    served = Served(tmp_path, 1, "--state-dir", str(tmp_path / "state"), "--stream",
                    f"live={src}", env={"PYTHONPATH": str(inject)})
    try:
        [(name, _, _, _)] = served.rows(
            f"CREATE STREAMING QUERY live_windows AS {QUERY.format(t='live')}")
        assert name == "live_windows"
        show = lambda: {r[0]: r for r in _show_rows(served)}["live_windows"]  # noqa: E731
        assert _wait(lambda: (show()[2], show()[5]), ("RUNNING", 120)) == ("RUNNING", 120)
        assert held.read_text() == "held"  # the first start was held past Spark's wait
        # Spark ended the first run for it (and the query runs again, from its checkpoint)
        assert "Python worker failed to connect back" in (tmp_path / "spark-1.log").read_text()
        # minute 0's windows closed at arrival 1:15 (event 1:10, watermark 1:00): each
        # key's 30 rows of value 1, one ON_TIME pane, as a run that never failed has it
        minute0 = {(r[0], r[1], r[2], r[6]) for r in _table(served) if r[3] == T0}
        assert minute0 == {("a", 30, 30, "ON_TIME"), ("b", 30, 30, "ON_TIME")}
        assert all(r[3] in (T0, T0 + timedelta(minutes=1)) for r in _table(served))
    finally:
        served.kill()
