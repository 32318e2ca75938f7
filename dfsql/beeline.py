"""``dfsql beeline ARGS``: Hive's beeline, as pyspark ships it, started with Spark's home.

pyspark's ``bin/beeline`` (pip puts a copy in the venv's bin) finds its Spark by running
``python3`` from PATH on ``find_spark_home.py``: from a shell that did not activate the
venv, that is another Python, without pyspark, and beeline stops at "Could not find
valid SPARK_HOME". Here the home is the installed pyspark's own directory (its ``jars``
and ``bin``), so the command works however it is called.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib.util import find_spec
from pathlib import Path

from dfsql.errors import DfsqlError


def spark_home() -> Path:
    """SPARK_HOME if set, else the directory of the pyspark this Python imports."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:  # dfsql requires pyspark: a broken install
        raise DfsqlError("pyspark is not installed in this Python", hint="pip install "
                         "dfsql-spark (it brings pyspark, which ships beeline)")
    return Path(spec.origin).parent


def beeline(args: list[str]) -> int:
    """Run beeline with ``args`` (replacing this process where the OS allows)."""
    home = spark_home()
    script = home / "bin" / ("beeline.cmd" if os.name == "nt" else "beeline")
    if not script.exists():
        raise DfsqlError(f"no beeline in {home / 'bin'}", hint="set SPARK_HOME to a Spark "
                         "that ships bin/beeline, or unset it to use pyspark's")
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and (Path(java_home) / "bin").is_dir()) and shutil.which("java") is None:
        raise DfsqlError("beeline needs Java, and there is no java on PATH", hint="install "
                         "Java 17 or newer, or set JAVA_HOME to one")
    env = dict(os.environ, SPARK_HOME=str(home))
    if os.name == "nt":
        return subprocess.call([str(script), *args], env=env)
    os.execve(str(script), [str(script), *args], env)
    return 0  # not reached: the process is beeline now
