"""``dfsql.register``'s registrations belong to their session and go when it stops
(docs/reference.md#sources: a registered source is a temp view of one session).

The run has one SparkSession, which must not stop: the pruning is shown on stand-ins
that say their id and whether they stopped as Spark Connect's sessions do; the live
session's own registrations are shown kept."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from dfsql.language.registered import Registration
from dfsql.registrations import Registrations, session_id, stopped


@dataclass
class _Connected:
    """What a Spark Connect session tells of itself: its id, and whether it stopped."""

    session_id: str
    is_stopped: bool = False


def _reg(name: str) -> Registration:
    return Registration(name, "t", None, None, streaming=False)


def test_a_stopped_sessions_registrations_are_gone() -> None:
    regs = Registrations()
    a, b = _Connected("a"), _Connected("b")
    regs.add(a, _reg("Clicks"))  # type: ignore[arg-type]
    regs.add(b, _reg("views"))  # type: ignore[arg-type]
    assert set(regs.of(a)) == {"clicks"}  # type: ignore[arg-type]
    assert regs.sessions() == 2
    a.is_stopped = True
    assert regs.of(a) == {}  # type: ignore[arg-type]
    assert regs.sessions() == 1
    assert set(regs.of(b)) == {"views"}  # type: ignore[arg-type]


def test_wrappers_of_one_session_share_its_registrations() -> None:
    regs = Registrations()
    regs.add(_Connected("same"), _reg("clicks"))  # type: ignore[arg-type]
    assert set(regs.of(_Connected("same"))) == {"clicks"}  # type: ignore[arg-type]
    assert regs.of(None) == {}


def test_the_live_session_keeps_its_registrations(spark: SparkSession) -> None:
    import dfsql
    from dfsql.api import registration

    assert not stopped(spark)
    dfsql.register("kept_here", spark.range(1).selectExpr("current_timestamp() AS t"),
                   event_time="t")
    found = registration("kept_here", spark)
    assert found is not None and found.event_time == "t"
    assert session_id(spark) == session_id(spark.range(1).sparkSession)
