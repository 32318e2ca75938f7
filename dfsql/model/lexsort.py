"""``np.lexsort``'s permutation from one sort instead of one per key.

``np.lexsort`` runs a stable sort for every key, and the model orders elements, windows
and panes by two to five integer keys many times a run: on the replay's 4M events these
sorts were a fifth of the model's time. Integer keys whose ranges multiply to less than
2**63 pack into one int64 (the last key most significant), and one stable sort of that
gives exactly ``np.lexsort``'s permutation; rows already nearly in order (a driver's rows
come sorted by key and arrival) make that sort cheaper still (timsort runs). Keys that do
not pack (floats, objects, ranges too wide) are sorted by ``np.lexsort`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_LIMIT = 1 << 63


def lexsort(keys: Sequence[np.ndarray]) -> np.ndarray:
    """The indices that sort by ``keys`` (the last one primary, ties broken by the one
    before it, …, then by position): ``np.lexsort(keys)`` exactly."""
    arrays = [np.asarray(k) for k in keys]
    packed = _packed(arrays)
    if packed is None:
        return np.lexsort(arrays)
    return np.argsort(packed, kind="stable")


def _packed(arrays: list[np.ndarray]) -> np.ndarray | None:
    """The keys as one int64 per row, ordered as the keys are (None if they do not fit)."""
    if not arrays or any(a.ndim != 1 or a.dtype.kind not in "bi" for a in arrays):
        return None
    n = len(arrays[0])
    if n < 2 or any(len(a) != n for a in arrays):
        return None
    packed = np.zeros(n, np.int64)
    weight = 1
    for a in arrays:  # the least significant key first
        lo, hi = int(a.min()), int(a.max())
        span = hi - lo + 1
        if weight * span >= _LIMIT:
            return None
        if hi > lo:
            packed += (a.astype(np.int64) - lo) * weight
        weight *= span
    return packed
