"""The owner of the continuous queries (:class:`dfsql.continuous_queries.Queries`): a
query STOP drops leaves no entry behind, running or failed; a failed entry goes when the
query is started again, and every failed one when the keeper is let go
(docs/guides/streams.md#continuous-queries-as-statements: a kept query that failed is
listed until STOPped, or STARTed again)."""

from __future__ import annotations

from dataclasses import dataclass

from dfsql.continuous_queries import Queries, Running


@dataclass
class _Stream:
    """A stand-in for Spark's StreamingQuery: only whether it is active is read."""

    isActive: bool = True  # noqa: N815 (Spark's name)


def _running(name: str, active: bool = True) -> Running:
    return Running(name, _Stream(active), "table global_temp." + name, "/cp", "", 0.0)


def test_a_dropped_querys_entries_are_gone() -> None:
    q = Queries()
    q.run(_running("live"))
    q.fail("kept", "directory /d", "its input is gone")
    assert q.owners() == {"live": None, "kept": None}
    r, f, keeper = q.drop("live")
    assert r is not None and r.name == "live" and f is None and keeper is None
    r, f, _ = q.drop("kept")
    assert r is None and f is not None and f.reason == "its input is gone"
    assert q.running == {} and q.failed == {}
    assert q.listed() == ([], [])


def test_a_failed_entry_goes_when_the_query_starts_again() -> None:
    q = Queries()
    q.fail("kept", "directory /d", "its input is gone")
    q.run(_running("kept"))
    q.started_again("kept")
    assert list(q.running) == ["kept"] and q.failed == {}


def test_a_failure_replaces_a_dead_stream_only() -> None:
    q = Queries()
    q.run(_running("dead", active=False))
    q.run(_running("alive"))
    q.fail("dead", "s", "why")
    q.fail("alive", "s", "why")
    assert list(q.running) == ["alive"]
    assert sorted(q.failed) == ["alive", "dead"]


def test_letting_the_keeper_go_prunes_the_failed() -> None:
    q = Queries()
    q.keep_with(object())  # type: ignore[arg-type]
    q.fail("kept", "s", "why")
    q.keep_with(None)
    assert q.failed == {} and q.keeper is None


def test_stopping_them_all_leaves_none_running() -> None:
    q = Queries()
    q.run(_running("a"))
    q.run(_running("b"))
    assert [r.name for r in q.drain()] == ["a", "b"]
    assert q.running == {}
