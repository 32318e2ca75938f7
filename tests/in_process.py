"""In-process stand-ins the tests share (importable from any test module: ``tests/`` is on
``sys.path`` through its conftest): a state store value for the bucket processor, and a
shell on the run's Spark session without a terminal."""

from __future__ import annotations


class MemoryState:
    """One ValueState in memory: what transformWithState gives a bucket processor."""

    def __init__(self) -> None:
        self.value = None

    def exists(self) -> bool:
        return self.value is not None

    def get(self):
        return self.value

    def update(self, value) -> None:
        self.value = value


def shell_on(spark):
    """The shell on the test run's (already started) session: no terminal, no timing, no
    pager, no history file."""
    from dfsql.shell.display import make_console
    from dfsql.shell.repl import Shell

    shell = Shell(history="/dev/null")
    shell._spark = spark
    shell._started.set()
    shell.out = make_console(terminal=False)
    shell.timing = shell.pager = False
    return shell
