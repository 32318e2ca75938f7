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
    Spark's minute of retries, and not with a stack trace."""
    import os
    import subprocess
    import sys
    import time

    url = f"{scheme}://127.0.0.1:{_free_port()}"
    env = {k: v for k, v in os.environ.items()
           if k not in ("DFSQL_SPARK_REMOTE", "DFSQL_SPARK_MASTER")}
    env[var] = url
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dfsql.cli", "demo"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert time.monotonic() - t0 < 30
    assert proc.returncode == 1
    assert f"error: the {what} at {url} does not answer" in proc.stderr
    assert f"hint: start it, or fix the URL (argument or {var})" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
