"""The trigger state machine's nodes (the formal trigger specification, shared/seeds/001):
the interface every node has, and the leaves. The composites are in
:mod:`dfsql.model.trigger_composites`; :mod:`dfsql.model.triggers` builds a tree from a
parsed TRIGGER clause and merges the trees of merging windows.

Each node is an immutable value; the functions of the specification are methods:

* ``ready(ctx)``      the predicate P over the node's elements and the current time;
* ``next(ctx)``       the trigger after firing (leaves become ``Done``);
* ``next_if_ready``   ``next`` if P holds, else unchanged;
* ``restart()``       back to the initial trigger, element state cleared;
* ``is_done()``       the recursive isDone;
* ``rewind()``        undo progress past EndOfWindow (used when a merge moves the end);
* ``further(other)``  the more advanced of two triggers; state of live leaves merges
                      (ElemCount counts add, first-arrival times take the minimum);
* ``on_element(p)``   an element arrived at processing time p (only live nodes change);
* ``next_timer(now)`` the earliest processing time after now at which a leaf turns ready.

Each leaf keeps the summary of *its own* elements since it last fired, so the
orFinally subtlety falls out: when ``main`` fires, ``final`` is only ``next_if_ready``-ed
and keeps its element set. dfsql decision: when a composite fires, children that did not
advance but whose elements were just emitted (AfterEach's not-yet-active children) are
restarted, so every active child sees the elements since the trigger last fired.

dfsql leaf semantics (processing time p, microseconds):
AtPeriod(q) is ready from the first multiple of q at or after the arrival of the pane's
first element; SinceEarliestElem(d) from that arrival + d; EndOfWindow when the
watermark >= the (exclusive) window end; Never never.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Ctx:
    """What a predicate may look at besides its elements: the clocks and the window."""

    now: int  # processing time of the evaluation
    watermark: int
    window_end: int


def ceil_to(p, period: int):
    """The first multiple of ``period`` at or after ``p`` (epoch aligned; an int, or
    elementwise on a numpy array)."""
    return -((-p) // period) * period


class Node:
    """Base of trigger state-machine nodes."""

    def ready(self, ctx: Ctx) -> bool:
        raise NotImplementedError

    def next(self, ctx: Ctx) -> Node:
        raise NotImplementedError

    def next_if_ready(self, ctx: Ctx) -> Node:
        return self.next(ctx) if self.ready(ctx) else self

    def restart(self) -> Node:
        raise NotImplementedError

    def is_done(self) -> bool:
        return False

    def rewind(self) -> Node:
        raise NotImplementedError

    def further(self, other: Node) -> Node:
        raise NotImplementedError

    def on_element(self, p: int) -> Node:
        raise NotImplementedError

    def next_timer(self, now: int) -> int | None:
        """The earliest processing time after ``now`` at which a live leaf turns ready."""
        return None

    def fired(self, ctx: Ctx) -> list[tuple[int, ...]]:
        """The leaves ``next(ctx)`` advances, as child-index paths from this node (for
        EXPLAIN FIRINGS; called only when recording, just before ``next``). It follows
        ``next`` node by node, so the leaves named are those whose predicate fired it."""
        return []

# --------------------------------------------------------------------------- leaves


@dataclass(frozen=True)
class Done(Node):
    """The tombstone of a leaf that fired: P(Done) = True, isDone = True."""

    leaf: Leaf

    def ready(self, ctx: Ctx) -> bool:
        return True

    def next(self, ctx: Ctx) -> Node:
        return self

    def restart(self) -> Node:
        return self.leaf.restart()

    def is_done(self) -> bool:
        return True

    def rewind(self) -> Node:
        # Only EndOfWindow's progress can be undone by a merge that moves the end.
        return self.leaf.restart() if isinstance(self.leaf, EndOfWindow) else self

    def further(self, other: Node) -> Node:
        return self

    def on_element(self, p: int) -> Node:
        return self


class Leaf(Node):
    """A leaf: fires once, becoming Done; its state summarises its elements."""

    def next(self, ctx: Ctx) -> Node:
        return Done(self.restart())  # type: ignore[arg-type]

    def fired(self, ctx: Ctx) -> list[tuple[int, ...]]:
        return [()]

    def rewind(self) -> Node:
        return self

    def further(self, other: Node) -> Node:
        if isinstance(other, Done):
            return other
        return self.merge(other)

    def merge(self, other: Node) -> Node:
        return self


@dataclass(frozen=True)
class ElemCount(Leaf):
    """Ready when at least k elements arrived since it last fired."""

    k: int
    n: int = 0

    def ready(self, ctx: Ctx) -> bool:
        return self.n >= self.k

    def restart(self) -> Node:
        return ElemCount(self.k)

    def on_element(self, p: int) -> Node:
        return ElemCount(self.k, self.n + 1)

    def merge(self, other: Node) -> Node:
        assert isinstance(other, ElemCount)
        return ElemCount(self.k, self.n + other.n)


@dataclass(frozen=True)
class EndOfWindow(Leaf):
    """Ready when the watermark has reached the window's (exclusive) end."""

    def ready(self, ctx: Ctx) -> bool:
        return ctx.watermark >= ctx.window_end

    def restart(self) -> Node:
        return EndOfWindow()

    def on_element(self, p: int) -> Node:
        return self


@dataclass(frozen=True)
class _FirstArrival(Leaf):
    """A leaf whose state is the arrival time of its first element (None: no element)."""

    first: int | None = None

    def on_element(self, p: int) -> Node:
        if self.first is not None and self.first <= p:
            return self
        return replace(self, first=p)

    def merge(self, other: Node) -> Node:
        assert isinstance(other, _FirstArrival)
        firsts = [f for f in (self.first, other.first) if f is not None]
        return replace(self, first=min(firsts) if firsts else None)

    def deadline(self) -> int | None:
        raise NotImplementedError

    def ready(self, ctx: Ctx) -> bool:
        d = self.deadline()
        return d is not None and ctx.now >= d

    def next_timer(self, now: int) -> int | None:
        d = self.deadline()
        return d if d is not None and d > now else None


@dataclass(frozen=True)
class SinceEarliestElem(_FirstArrival):
    """Ready ``delay`` of processing time after its first element arrived."""

    delay: int = 0

    def deadline(self) -> int | None:
        return None if self.first is None else self.first + self.delay

    def restart(self) -> Node:
        return SinceEarliestElem(delay=self.delay)


@dataclass(frozen=True)
class AtPeriod(_FirstArrival):
    """Ready at the first aligned multiple of ``period`` at/after its first element."""

    period: int = 1

    def deadline(self) -> int | None:
        return None if self.first is None else ceil_to(self.first, self.period)

    def restart(self) -> Node:
        return AtPeriod(period=self.period)


@dataclass(frozen=True)
class Never(Leaf):
    """Never ready (only the closing pane fires)."""

    def ready(self, ctx: Ctx) -> bool:
        return False

    def restart(self) -> Node:
        return Never()

    def on_element(self, p: int) -> Node:
        return self
