"""Where EVERY n ROWS fires in windows that never merge (dfsql/model/count_fires.py), on
instants whose firings are derived by hand; the whole fast path is held to the state
machine in tests/model/test_properties.py."""

from __future__ import annotations

import numpy as np

from dfsql.model.count_fires import NO_FIRE, count_fire_ordinals


def test_the_count_restarts_after_each_firing() -> None:
    # window 0, EVERY 3 ROWS: 1 element at instant 1 (count 1), 2 at instant 2 (3: fires,
    # back to 0), 1 at 3 (1), 3 at 5 (4: fires; the one over 3 is not carried), 1 at 6
    # (1: no firing). Window 1: instants 2 and 4 taken (count 2: no firing); the element
    # at 3 was not taken (dropped), so it does not count (with it, 4 would fire).
    wid = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1], np.int64)
    arrival = np.array([1, 2, 2, 3, 5, 5, 5, 6, 2, 3, 4], np.int64)
    taken = np.ones(11, bool)
    taken[9] = False
    got = count_fire_ordinals(wid, arrival, taken, 3).tolist()
    # an element is first emitted by the first firing at or after its instant (ordinal 2t)
    assert got == [4, 4, 4, 10, 10, 10, 10, NO_FIRE, NO_FIRE, NO_FIRE, NO_FIRE]


def test_nothing_taken_fires_nothing() -> None:
    wid = np.array([0, 0], np.int64)
    got = count_fire_ordinals(wid, np.array([1, 2], np.int64), np.zeros(2, bool), 1)
    assert got.tolist() == [NO_FIRE, NO_FIRE]
