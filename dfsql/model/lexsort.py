"""``np.lexsort``'s permutation from fewer sorts: one per int64 the keys pack into.

``np.lexsort`` runs a stable sort for every key, and the model orders elements, windows
and panes by two to five integer keys many times a run: on the replay's 4M events these
sorts were a fifth of the model's time. Consecutive integer keys whose ranges multiply to
less than 2**63 pack into one int64 (the later key more significant), and stable sorts
by those packed keys, least significant first (a radix sort's order of passes), give
exactly ``np.lexsort``'s permutation. Usually that is one sort, or two where times in
microseconds sit beside each other; rows already nearly in order (a driver's rows come
sorted by key and arrival) make each sort cheaper still (timsort's runs). Keys that are
not integers are sorted by ``np.lexsort`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_LIMIT = 1 << 63


def lexsort(keys: Sequence[np.ndarray]) -> np.ndarray:
    """The indices that sort by ``keys`` (the last one primary, ties broken by the one
    before it, …, then by position): ``np.lexsort(keys)`` exactly."""
    arrays = [np.asarray(k) for k in keys]
    packed = packed_keys(arrays)
    if packed is None:
        return np.lexsort(arrays)
    order = np.argsort(packed[0], kind="stable")
    for more in packed[1:]:  # each more significant than the last: stable, so ties keep
        order = order[np.argsort(more[order], kind="stable")]  # the order so far
    return order


def packed_keys(arrays: list[np.ndarray]) -> list[np.ndarray] | None:
    """The keys packed into as few int64 arrays as their ranges allow, least significant
    first (None if some key is not a 1-d integer or boolean array, or there is nothing
    to sort)."""
    if not arrays or any(a.ndim != 1 or a.dtype.kind not in "bi" for a in arrays):
        return None
    n = len(arrays[0])
    if n < 2 or any(len(a) != n for a in arrays):
        return None
    packed: list[np.ndarray] = []
    current, weight = None, 1
    for a in arrays:  # the least significant key first
        lo, hi = int(a.min()), int(a.max())
        span = hi - lo + 1
        if current is not None and weight * span >= _LIMIT:
            packed.append(current)
            current, weight = None, 1
        if span >= _LIMIT:  # too wide to shift: sorted on its own, as it is
            packed.append(a.astype(np.int64, copy=False))
            continue
        part = (a.astype(np.int64) - lo) * weight
        current = part if current is None else current + part
        weight *= span
    if current is not None:
        packed.append(current)
    return packed
