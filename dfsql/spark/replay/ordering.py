"""docs/reference.md#output-columns's row order for a replayed result, without a global sort's extra job.

A SQL ``ORDER BY`` is a range exchange: Spark first runs a sampling job over its input to
pick partition bounds, and that job recomputes everything below the exchange (here the
last aggregation of the panes). The order's first column is ``emit_time``, whose range the
replay already knows (first arrival to end of input), so the bounds can be chosen without
looking: equal slices of that range. Each row goes to the partition of its slice by a hash
exchange on a stand-in value whose Spark hash (Murmur3, seed 42, the function
``HashPartitioning`` uses) lands on exactly that partition; then each partition is sorted
on its own. Partitions are read in order, so the rows come out globally ordered. On one
shuffle partition the replay's rows are already in one task: they are gathered there
(``coalesce(1)``, no exchange) and sorted, which spares a small replay a shuffle and
a job (70 ms of its 350 here).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix_k1(k1: int) -> int:
    k1 = (k1 * 0xCC9E2D51) & _MASK
    return (_rotl(k1, 15) * 0x1B873593) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    h1 = _rotl(h1 ^ k1, 13)
    return (h1 * 5 + 0xE6546B64) & _MASK


def murmur3_long(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of one BIGINT (``Murmur3_x86_32.hashLong``), as a signed int."""
    v = value & 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed & _MASK, _mix_k1(v & _MASK))
    h1 = _mix_h1(h1, _mix_k1(v >> 32))
    h1 ^= 8
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


@lru_cache(maxsize=32)
def partition_stand_ins(partitions: int) -> tuple[int, ...]:
    """For each partition j, the smallest BIGINT v >= 0 that a hash exchange into
    ``partitions`` partitions sends to partition j (``pmod(hash(v), partitions) == j``)."""
    found: dict[int, int] = {}
    v = 0
    while len(found) < partitions:
        found.setdefault(murmur3_long(v) % partitions, v)  # Python's % is pmod
        v += 1
    return tuple(found[j] for j in range(partitions))


def shuffle_partitions(spark) -> int:
    """The session's ``spark.sql.shuffle.partitions`` (4 when it cannot be read)."""
    from pyspark.errors import PySparkException

    try:
        return max(1, int(spark.conf.get("spark.sql.shuffle.partitions")))
    except (PySparkException, TypeError, ValueError):  # unset or not a number
        return 4


def in_emit_order(df: DataFrame, order_by: tuple[str, ...], lo: int, hi: int,
                  partitions: int) -> DataFrame:
    """``df`` ordered by ``order_by`` (SQL ORDER BY items, the first one ``emit_time``),
    given that emit times lie mostly in [lo, hi] microseconds (outliers are still ordered:
    they join the first or last slice)."""
    from pyspark.sql import functions as F  # noqa: N812

    n = max(1, partitions)
    if n == 1:  # one partition holds the whole order: no shuffle to get there
        return df.coalesce(1).sortWithinPartitions(*sort_columns(order_by))
    span = float(max(1, hi - lo))
    stand_ins = ", ".join(f"CAST({v} AS BIGINT)" for v in partition_stand_ins(n))
    slice_of = (f"coalesce(least({n - 1}, greatest(0, floor((unix_micros(emit_time) - "
                f"{int(lo)}) / CAST('{span!r}' AS DOUBLE) * {n}))), 0)")
    # one expression, built as text from numbers only: one call to Spark, not one per
    # function (each is a round trip from Python)
    target = F.expr(f"element_at(array({stand_ins}), CAST({slice_of} AS INT) + 1)")
    return df.repartition(n, target).sortWithinPartitions(*sort_columns(order_by))


def sort_columns(order_by: tuple[str, ...]) -> list:
    """SQL ORDER BY items (``expr`` or ``expr DESC``) as Spark sort columns."""
    from pyspark.sql import functions as F  # noqa: N812

    return [F.expr(item[:-5]).desc() if item.upper().endswith(" DESC") else F.expr(item).asc()
            for item in order_by]
