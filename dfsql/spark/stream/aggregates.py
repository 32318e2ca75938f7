"""A stream bucket's pane aggregates (:mod:`dfsql.spark.stream.buckets`): the model's
kernels over the elements the driver routes to each pane, numbers and times as they are,
strings and DECIMAL MIN / MAX by sorted codes, DECIMAL SUM / AVG exactly as objects.
"""

from __future__ import annotations

import numpy as np

from dfsql.model.aggregates import Route, pane_aggregate
from dfsql.model.changelog import element_panes


def bucket_aggregates(r, elems, n_panes: int, aggs: list[tuple[str, str, str | None]],
                      ) -> dict[str, np.ndarray]:
    """Each pane's aggregates over the elements the driver routes to it, by the model's
    kernels (:func:`dfsql.model.aggregates.pane_aggregate`, the replay's too): one
    implementation of the decomposable aggregates. A NULL aggregate is None (an object
    column) as pandas gives it."""
    route = Route(r.element_first_pane, r.cover_pane, r.cover_delta, n_panes)
    rows = r.element_row
    out = {}
    for alias, how, col in aggs:
        values = counted = None
        if col is not None and elems[col].dtype.kind == "O" and how in ("sum", "avg"):
            # DECIMAL (Python objects): exact only as objects, which the kernels are not
            out[alias] = object_aggregate(r, elems[col], how, n_panes)
            continue
        if col is not None:
            s = elems[col]
            counted = s.notna().to_numpy()[rows]
            if how != "count":
                values, restore = kernel_values(s, how)
                values = values[rows]
        got, has = pane_aggregate(how, route, values, counted)
        if col is not None and how in ("min", "max"):
            got = restore(got)
        if how == "count" or has.all():
            out[alias] = got
        else:
            v = got.astype(object)
            v[~has] = None
            out[alias] = v
    return out


def kernel_values(s, how: str):
    """(numpy values the kernels reduce, how to turn a MIN / MAX back into the column's
    values) of a pandas column: numbers as they are (NULLs masked by the caller), times as
    their int64 ticks, anything else (strings, DECIMAL) MIN / MAX by its sorted codes."""
    import pandas as pd

    dtype = s.dtype
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and hasattr(dtype, "numpy_dtype"):
        return s.to_numpy(dtype=dtype.numpy_dtype, na_value=0), lambda v: v
    if dtype.kind in "iufb":
        return s.to_numpy(), lambda v: v
    if dtype.kind in "mM":
        raw = s.to_numpy()
        return raw.view(np.int64), lambda v: v.astype(np.int64).view(raw.dtype)
    codes, uniques = pd.factorize(s, sort=True)
    uniques = np.asarray(uniques, dtype=object)

    def restore(v):
        out = np.empty(len(v), dtype=object)
        ok = (v >= 0) & (v < len(uniques))
        out[ok] = uniques[v[ok]]
        return out
    return codes.astype(np.int64), restore


def object_aggregate(r, s, how: str, n_panes: int) -> np.ndarray:
    """SUM / AVG of a column of Python objects (DECIMAL), exact as the objects add: a
    pandas group-by over each pane's member elements, the general case beside the kernels
    (as Spark's own aggregation is beside them in the replay)."""
    import pandas as pd

    ok, lens, pane = element_panes(r, n_panes)
    row = np.repeat(r.element_row[ok], lens)
    g = pd.Series(s.to_numpy()[row]).groupby(pane)
    v = (g.sum(min_count=1) if how == "sum" else g.mean()).reindex(pd.RangeIndex(n_panes))
    return v.to_numpy(dtype=object) if v.isna().any() else v.to_numpy()
