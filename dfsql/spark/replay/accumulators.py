"""Accumulators the replay's tasks fill (imported where Spark runs, not by the model)."""

from __future__ import annotations

from pyspark.accumulators import AccumulatorParam


class PerPartition(AccumulatorParam):
    """An accumulator of {partition id: count}: a partition run again (a second action,
    a retried task) replaces its own count instead of adding to it."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value1: dict, value2: dict) -> dict:  # noqa: N802 - Spark's name
        value1.update(value2)
        return value1
