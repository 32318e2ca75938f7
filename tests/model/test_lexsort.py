"""The model's ``lexsort`` against ``np.lexsort``: the same permutation, exactly, ties
included, whether the keys pack into one int64, into several, or fall back."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dfsql.model.lexsort import lexsort, packed_keys
from dfsql.model.windows import NEG_INF, POS_INF

# small ranges (many ties), timestamps in microseconds, and the model's infinities
VALUES = st.sampled_from([
    st.integers(-3, 3), st.integers(0, 1), st.integers(1_700_000_000_000_000,
                                                      1_700_000_100_000_000),
    st.sampled_from([NEG_INF, -1, 0, 5, POS_INF]),
])


@settings(max_examples=300, deadline=None)
@given(st.data(), st.integers(0, 40), st.integers(1, 5))
def test_same_permutation_as_numpy(data, n: int, n_keys: int) -> None:
    keys = []
    for _ in range(n_keys):
        values = data.draw(VALUES)
        keys.append(np.array(data.draw(st.lists(values, min_size=n, max_size=n)), np.int64))
    if data.draw(st.booleans()):
        keys[0] = keys[0] % 2 == 0  # a boolean key, as the model's flags are
    np.testing.assert_array_equal(lexsort(keys), np.lexsort(keys))


def test_keys_that_fit_are_packed_in_order() -> None:
    """Keys of the replay's kind (key ids, microsecond times, flags) pack into one int64,
    and the packed values order rows as the keys do."""
    rng = np.random.default_rng(7)
    key = rng.integers(0, 10_000, 5_000)
    start = rng.integers(1_700_000_000_000_000, 1_700_003_600_000_000, 5_000)
    flag = rng.integers(0, 2, 5_000).astype(bool)
    packed = packed_keys([flag, start, key])
    assert packed is not None and len(packed) == 1
    o = np.argsort(packed[0], kind="stable")
    assert np.all(np.diff(key[o]) >= 0)
    np.testing.assert_array_equal(o, np.lexsort((flag, start, key)))


def test_wide_keys_take_one_sort_each() -> None:
    """Two times in microseconds over an hour do not fit one int64 beside each other, and
    a key holding the model's infinities does not fit beside anything."""
    hour = np.array([0, 3_600_000_000, 7, 7]) + 1_700_000_000_000_000
    keys = [np.array([2, 1, 0, 1]), hour, hour[::-1].copy(), np.array([NEG_INF, POS_INF, 0, 0])]
    packed = packed_keys(keys)
    assert packed is not None and len(packed) == 3
    np.testing.assert_array_equal(lexsort(keys), np.lexsort(keys))


def test_a_float_key_falls_back() -> None:
    keys = [np.array([0.5, -1.0, 0.5]), np.array([1, 0, 1])]
    assert packed_keys(keys) is None
    np.testing.assert_array_equal(lexsort(keys), np.lexsort(keys))
