"""The decomposable aggregates (COUNT, SUM, MIN, MAX, AVG) of every pane, vectorised.

A pane aggregates its elements by the route the driver reports (docs/reference.md#trigger, and
:mod:`dfsql.model.group_also_by_window`): each element is first emitted by one pane (its
*delta*), and each pane covers a set of deltas (its own only when DISCARDING; every earlier
delta of its window, and of the windows merged into it, when ACCUMULATING). So a pane's
aggregate is the aggregate of its deltas' partial aggregates: one segment reduction over
the elements, grouped by delta, and one over the (pane, delta) cover pairs — no
(pane, element) pair is ever formed and no Python runs per row.

The values are SQL values: an element whose value is NULL (or that an aggregate's FILTER
rejects) is not counted, and a pane with no counted element has a NULL SUM / MIN / MAX /
AVG and a COUNT of 0 — Spark's rules, so the replay may compute panes here instead of in
Spark and give the same rows. MIN and MAX order NaN above every other value (Spark's
order); SUM of integers is exact in 64 bits and wraps around on overflow like a Java
``long`` (``overflow="raise"`` raises instead, as Spark does in ANSI mode); AVG is a
double, the exact integer sum divided by the count for integer input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

I64 = np.int64
#: the aggregates the kernels compute: the decomposable ones
HOWS = ("count", "sum", "min", "max", "avg")
#: how the partial results of a decomposable aggregate merge into a pane's value (AVG's
#: partials are a SUM and a COUNT, so it has no one-column merge)
PARTIAL_MERGES = {"count": "sum", "sum": "sum", "min": "min", "max": "max"}


def decomposable(function: str, distinct: bool, nested: bool) -> bool:
    """Whether a pane's value of the aggregate ``function`` (lower-case Spark name) can be
    computed from partial results over its deltas, the one rule every executor asks
    (docs/reference.md#emit's accumulation over deltas): COUNT, SUM, MIN, MAX and AVG, with
    DISTINCT only where it changes nothing (MIN, MAX), and no aggregate inside."""
    return (function in HOWS and not nested
            and (not distinct or function in ("min", "max")))


@dataclass(frozen=True)
class Route:
    """Which elements each pane aggregates: element → its delta → covering panes.

    ``first_pane`` holds, per element, the pane that first emitted it (its delta; -1 for
    an element no pane emits); a pair ``(cover_pane[i], cover_delta[i])`` says that pane
    ``cover_pane[i]`` aggregates delta ``cover_delta[i]``. Panes are ``0..n_panes-1``."""

    first_pane: np.ndarray
    cover_pane: np.ndarray
    cover_delta: np.ndarray
    n_panes: int


class SumOverflow(ArithmeticError):
    """A SUM of integers left the 64-bit range (Spark's ANSI mode raises too)."""

    def __init__(self) -> None:
        super().__init__("[ARITHMETIC_OVERFLOW] long overflow in SUM. If necessary set "
                         "spark.sql.ansi.enabled to \"false\" to bypass this error.")


def pane_aggregate(how: str, route: Route, values: np.ndarray | None = None,
                   counted: np.ndarray | None = None, *, overflow: str = "wrap",
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``how`` (:data:`HOWS`) of each pane's elements: ``(values, not_null)`` per pane.

    ``values`` holds one value per element (None for COUNT(*)); ``counted`` masks the
    elements the aggregate sees (not NULL, FILTER true), None for all. Integers sum to
    int64, floats to float64; MIN / MAX keep the values' dtype; AVG is float64."""
    if how not in HOWS:
        raise ValueError(f"aggregate {how!r} not in {HOWS}")
    n = route.n_panes
    keep = route.first_pane >= 0
    if counted is not None:
        keep &= counted
    delta = route.first_pane[keep]
    count = _combine(np.add, route, np.bincount(delta, minlength=n).astype(I64), 0)
    has = count > 0
    if how == "count":
        return count, np.ones(n, bool)
    if values is None:
        raise ValueError(f"{how} needs values")
    v = np.asarray(values)[keep]
    if how in ("sum", "avg"):
        if v.dtype.kind in "iub":
            total = _sum(route, delta, v.astype(I64), n)
            # no pane holds more than every element: a small bound needs no check
            bounded = not len(v) or max(-float(v.min()), float(v.max())) * len(v) < 2.0 ** 62
            if (overflow == "raise" or how == "avg") and not bounded:
                # wrapped iff far from the (inexact but unwrapped) float sum
                approx = _sum(route, delta, v.astype(np.float64), n)
                if (np.abs(approx - total.astype(np.float64)) > 2.0 ** 62).any():
                    if how == "sum":
                        raise SumOverflow()
                    return approx / np.maximum(count, 1), has  # AVG: Spark sums doubles
        else:
            total = _sum(route, delta, v.astype(np.float64), n)
        if how == "avg":
            return total.astype(np.float64) / np.maximum(count, 1), has
        return total, has
    return _extreme(how, route, delta, v, n), has


def _sum(route: Route, delta: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    per_delta = np.zeros(n, v.dtype)
    np.add.at(per_delta, delta, v)
    return _combine(np.add, route, per_delta, 0)


def _extreme(how: str, route: Route, delta: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    """MIN / MAX in Spark's order, where NaN is above every number: MIN skips NaN unless
    all are NaN; MAX is NaN if any is."""
    floating = v.dtype.kind == "f"
    if floating and how == "max":
        nan = np.isnan(v)
        if nan.any():
            out = _extreme(how, route, delta[~nan], v[~nan], n)
            n_nan = _combine(np.add, route, np.bincount(delta[nan], minlength=n), 0)
            out[n_nan > 0] = np.nan
            return out
    if floating:
        ufunc = np.fmin if how == "min" else np.fmax  # fmin: NaN only if both are
        identity = np.nan
    else:
        ufunc = np.minimum if how == "min" else np.maximum
        identity = _identity(how, v.dtype)
    per_delta = np.full(n, identity, v.dtype)
    ufunc.at(per_delta, delta, v)
    return _combine(ufunc, route, per_delta, identity)


def _identity(how: str, dtype: np.dtype):
    if dtype.kind == "b":
        return how == "min"
    info = np.iinfo(dtype)
    return info.max if how == "min" else info.min


def _combine(ufunc: np.ufunc, route: Route, per_delta: np.ndarray, identity) -> np.ndarray:
    """Each pane's reduction of the partial values of the deltas it covers."""
    out = np.full(route.n_panes, identity, per_delta.dtype)
    ufunc.at(out, route.cover_pane, per_delta[route.cover_delta])
    return out
