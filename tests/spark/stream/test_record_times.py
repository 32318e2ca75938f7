"""The one reader of a progress record's times (dfsql.spark.stream.progress_log.record_time):
Spark writes UTC, dfsql's figures are local wall-clock times (docs/guides/watching.md's
watermark lag is the wall clock minus the watermark, so a zone mixed up is hours of lag)."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone

import pytest

from dfsql.server.console_data import lag
from dfsql.spark.stream.progress_log import record_time

UTC = timezone.utc


def test_spark_times_are_utc_and_dfsql_figures_stay_naive() -> None:
    assert record_time("2024-01-01T00:07:20.500Z") == datetime(2024, 1, 1, 0, 7, 20, 500000,
                                                               tzinfo=UTC)
    assert record_time("2024-01-01 00:07:20") == datetime(2024, 1, 1, 0, 7, 20)
    assert record_time("2024-01-01 00:07:20").tzinfo is None
    # spark_watermark is written without its Z: the caller says it is UTC
    assert record_time("2024-01-01 00:07:20", utc=True) == datetime(2024, 1, 1, 0, 7, 20,
                                                                    tzinfo=UTC)
    t = datetime(2015, 9, 1, 12, 9)
    assert record_time(t) is t


@pytest.mark.parametrize("text", [None, "", "not a time", "2024-13-01 00:00:00"])
def test_no_time_is_none(text) -> None:
    assert record_time(text) is None


@pytest.fixture
def kolkata():
    """The process's local zone at UTC+5:30 for one test (a zone with a half hour, so an
    offset applied twice or not at all cannot pass by luck)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ")
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_the_lag_reads_spark_s_clock_as_utc_and_the_watermark_as_local(kolkata) -> None:
    # the batch committed at 12:00 UTC; its watermark, a local 17:00 at +5:30, is 11:30 UTC
    assert lag("2024-01-01T12:00:00Z", "2024-01-01 17:00:00") == 1800.0
    assert lag(datetime(2024, 1, 1, 12, tzinfo=UTC), datetime(2024, 1, 1, 17)) == 1800.0
    # Spark's own watermark (UTC) against its own clock: no zone between them
    assert lag("2024-01-01T12:00:00Z", record_time("2024-01-01 11:59:00", utc=True)) == 60.0
    assert lag(None, "2024-01-01 17:00:00") is None
    assert lag("2024-01-01T12:00:00Z", None) is None
    assert timedelta(seconds=lag("2024-01-02T00:00:00Z", "2024-01-01 05:30:00")) == \
        timedelta(hours=24)
