"""dfsql.setting: the one save/restore of a Spark setting dfsql changes on a session it
does not own. Its behaviour, on a stand-in for a session's settings (what it reads of
``spark.conf`` only), each expectation by hand; and a guard: no other module of dfsql
puts a setting back itself (a ``conf.set``/``conf.unset`` in a ``finally``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dfsql.setting import setting_while

PACKAGE = Path(__file__).resolve().parents[1] / "dfsql"
KEY = "spark.sql.variable.substitute"


class _Conf:
    def __init__(self, **given: str) -> None:
        self.given = dict(given)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.given.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.given[key] = value

    def unset(self, key: str) -> None:
        self.given.pop(key, None)


class _Spark:
    def __init__(self, **given: str) -> None:
        self.conf = _Conf(**given)


@pytest.mark.parametrize(("before", "after"), [({KEY: "true"}, {KEY: "true"}),
                                               ({}, {}),  # unset before: unset after
                                               ({KEY: "false"}, {KEY: "false"})])
def test_the_setting_is_on_inside_and_back_after(before: dict, after: dict) -> None:
    spark = _Spark(**before)
    with setting_while(spark, KEY, "false"):
        assert spark.conf.given[KEY] == "false"
    assert spark.conf.given == after


def test_back_after_an_error_and_none_changes_nothing() -> None:
    spark = _Spark(**{KEY: "true"})
    with pytest.raises(ValueError), setting_while(spark, KEY, "false"):
        raise ValueError
    assert spark.conf.given == {KEY: "true"}
    with setting_while(spark, KEY, None):
        assert spark.conf.given == {KEY: "true"}


def _restores_by_hand(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "setting.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Try):
                continue
            for call in (n for f in node.finalbody for n in ast.walk(f)):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                        call.func.attr in ("set", "unset") and \
                        ast.unparse(call.func.value).endswith("conf"):
                    found.append(f"{rel}:{call.lineno}")
    return found


def test_no_second_save_and_restore_of_a_setting() -> None:
    assert _restores_by_hand(PACKAGE) == []


def test_the_guard_sees_a_planted_restore(tmp_path: Path) -> None:
    (tmp_path / "planted.py").write_text(
        "def f(spark):\n    conf = spark.conf\n    was = conf.get('k')\n    try:\n"
        "        conf.set('k', 'v')\n    finally:\n        conf.set('k', was)\n")
    assert _restores_by_hand(tmp_path) == ["planted.py:7"]
