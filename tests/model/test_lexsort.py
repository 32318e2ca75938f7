"""The model's one-sort ``lexsort`` against ``np.lexsort``: the same permutation, exactly,
ties included, whether the keys pack into one int64 or fall back."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfsql.model.lexsort import _packed, lexsort
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
    """Keys of the replay's kind (key ids, microsecond times, flags) take the one-sort
    path, and the packed values order rows as the keys do."""
    rng = np.random.default_rng(7)
    key = rng.integers(0, 10_000, 5_000)
    start = rng.integers(1_700_000_000_000_000, 1_700_003_600_000_000, 5_000)
    flag = rng.integers(0, 2, 5_000).astype(bool)
    packed = _packed([flag, start, key])
    assert packed is not None
    o = np.argsort(packed, kind="stable")
    assert np.all(np.diff(key[o]) >= 0)
    np.testing.assert_array_equal(o, np.lexsort((flag, start, key)))


@pytest.mark.parametrize("keys", [
    [np.array([NEG_INF, POS_INF, 0]), np.array([POS_INF, NEG_INF, 1])],  # too wide
    [np.array([0.5, -1.0, 0.5]), np.array([1, 0, 1])],  # a float key
])
def test_keys_that_do_not_pack_fall_back(keys) -> None:
    assert _packed(list(keys)) is None
    np.testing.assert_array_equal(lexsort(keys), np.lexsort(keys))
