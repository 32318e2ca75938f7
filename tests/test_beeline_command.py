"""The endpoint guide's beeline command works from a pip install without activating the
venv (issue #51). pyspark's own ``bin/beeline`` finds its Spark by running ``python3``
from PATH on ``find_spark_home.py``: with the venv's bin not on PATH that is another
Python, without pyspark, and beeline stops at "Could not find valid SPARK_HOME".
``dfsql beeline`` starts it with Spark's home set from the installed pyspark."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the venv's ``dfsql`` command (pip installs it beside the venv's python)
DFSQL = Path(sys.executable).parent / "dfsql"

pytestmark = pytest.mark.slow


def _outside_the_venv(tmp_path: Path) -> dict[str, str]:
    """A shell that never activated the venv: its bin not on PATH, no SPARK_HOME."""
    bin_dir = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and Path(p).resolve() != Path(bin_dir).resolve()]
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_HOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
                        "PYTHONPATH")}
    return env | {"PATH": os.pathsep.join(path or ["/usr/bin", "/bin"]), "HOME": str(tmp_path)}


def test_the_guides_beeline_command_is_dfsql_beeline() -> None:
    guide = (ROOT / "docs" / "guides" / "endpoint.md").read_text()
    commands = re.findall(r"^((?:\S+ )?beeline) -u", guide, flags=re.M)
    assert commands and set(commands) == {"dfsql beeline"}, commands


@pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                    reason="beeline needs Java")
def test_dfsql_beeline_starts_without_the_venv_activated(tmp_path) -> None:
    assert DFSQL.exists(), DFSQL
    done = subprocess.run([str(DFSQL), "beeline", "--help"], env=_outside_the_venv(tmp_path),
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    out = done.stdout + done.stderr
    assert "Could not find valid SPARK_HOME" not in out
    assert done.returncode == 0, out
    # beeline's own usage: it started (java, Spark's jars, Hive's BeeLine class)
    assert "Usage: java org.apache.hive.cli.beeline.BeeLine" in out
    assert "-u <database url>" in out


def test_dfsql_beeline_without_java_says_so(tmp_path) -> None:
    env = _outside_the_venv(tmp_path)
    env.pop("JAVA_HOME", None)
    # a PATH with the system's tools but no java: only the directories without one
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not (Path(p) / "java").exists())
    done = subprocess.run([str(DFSQL), "beeline", "-u", "jdbc:hive2://127.0.0.1:1/default"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "beeline needs Java" in done.stderr and "JAVA_HOME" in done.stderr, done.stderr
