"""The one comparison of the property tests that hold two paths to the same rows (the
model's state machine and its fast paths, the replay and the batch path on Spark, one run
against key slices): equal as multisets of rows, order being docs/reference.md#output-columns's
business, tested apart. A failure names the rows each side has that the other lacks;
tests/test_agree.py shows it fails on a planted difference, as Beam's transcripts carry
bad transcripts that must fail."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable


def difference(left: Iterable[Hashable], right: Iterable[Hashable]) -> tuple[list, list]:
    """(the rows only ``left`` has, the rows only ``right`` has), counted as a multiset:
    a row twice on one side and once on the other is once in its side's list."""
    a, b = Counter(left), Counter(right)
    return sorted((a - b).elements(), key=repr), sorted((b - a).elements(), key=repr)


def assert_same_rows(left: Iterable[Hashable], right: Iterable[Hashable],
                     names: tuple[str, str] = ("left", "right")) -> None:
    """Fail unless the two paths gave the same rows, the same number of times each."""
    only_left, only_right = difference(left, right)
    assert not only_left and not only_right, (
        f"only in {names[0]}: {only_left}; only in {names[1]}: {only_right}")
