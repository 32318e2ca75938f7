"""The trigger state machine of the formal trigger specification (shared/seeds/001).

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

from dfsql.model import clauses as c


@dataclass(frozen=True)
class Ctx:
    """What a predicate may look at besides its elements: the clocks and the window."""

    now: int  # processing time of the evaluation
    watermark: int
    window_end: int


def batch_trigger_note(cl: c.Clauses) -> str | None:
    """What to tell the user when a TRIGGER is given for a batch input (a bounded table
    without PROCESSING TIME), which LANGUAGE.md §5 accepts but on which no trigger changes
    anything: the watermark is past every window at once, so each window gives one last
    ON_TIME pane. None when there is nothing to say. The caller knows the input is
    bounded (over a stream the engine's clock makes the trigger count)."""
    if cl.processing_time is not None or not cl.trigger_given or \
            cl.trigger in (c.DEFAULT_TRIGGER, c.EndOfWindow()):
        return None
    return ("note: the TRIGGER has no effect on a batch input (a bounded table without "
            "PROCESSING TIME: every window gives one ON_TIME pane); add PROCESSING TIME "
            "<arrival column> to replay the table in arrival order")


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

    def __str__(self) -> str:
        return f"Done({self.leaf})"


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

    def __str__(self) -> str:
        return f"ElemCount({self.k})[{self.n}]"


@dataclass(frozen=True)
class EndOfWindow(Leaf):
    """Ready when the watermark has reached the window's (exclusive) end."""

    def ready(self, ctx: Ctx) -> bool:
        return ctx.watermark >= ctx.window_end

    def restart(self) -> Node:
        return EndOfWindow()

    def on_element(self, p: int) -> Node:
        return self

    def __str__(self) -> str:
        return "EndOfWindow"


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

    def __str__(self) -> str:
        return f"SinceEarliestElem({self.delay})[{self.first}]"


@dataclass(frozen=True)
class AtPeriod(_FirstArrival):
    """Ready at the first aligned multiple of ``period`` at/after its first element."""

    period: int = 1

    def deadline(self) -> int | None:
        return None if self.first is None else ceil_to(self.first, self.period)

    def restart(self) -> Node:
        return AtPeriod(period=self.period)

    def __str__(self) -> str:
        return f"AtPeriod({self.period})[{self.first}]"


@dataclass(frozen=True)
class Never(Leaf):
    """Never ready (only the closing pane fires)."""

    def ready(self, ctx: Ctx) -> bool:
        return False

    def restart(self) -> Node:
        return Never()

    def on_element(self, p: int) -> Node:
        return self


# --------------------------------------------------------------------------- composites


@dataclass(frozen=True)
class Composite(Node):
    """A node with sub-triggers; restart, rewind, further and on_element go child-wise."""

    subs: tuple[Node, ...]

    def _with(self, subs: tuple[Node, ...] | list[Node]) -> Node:
        return type(self)(tuple(subs))

    def restart(self) -> Node:
        return self._with([s.restart() for s in self.subs])

    def rewind(self) -> Node:
        return self._with([s.rewind() for s in self.subs])

    def further(self, other: Node) -> Node:
        assert isinstance(other, type(self))
        return self._with([a.further(b) for a, b in zip(self.subs, other.subs, strict=True)])

    def on_element(self, p: int) -> Node:
        return self._with([s if s.is_done() else s.on_element(p) for s in self.subs])

    def next_timer(self, now: int) -> int | None:
        ts = [t for s in self.subs if not s.is_done() and (t := s.next_timer(now)) is not None]
        return min(ts) if ts else None

    def __str__(self) -> str:
        return f"{type(self).__name__}({', '.join(map(str, self.subs))})"


@dataclass(frozen=True)
class AfterFirst(Composite):
    """Ready when any child is ready; done when any child is done."""

    def ready(self, ctx: Ctx) -> bool:
        return any(s.ready(ctx) for s in self.subs)

    def next(self, ctx: Ctx) -> Node:
        return self._with([s.next_if_ready(ctx) for s in self.subs])

    def fired(self, ctx: Ctx) -> list[tuple[int, ...]]:
        return [(i, *p) for i, s in enumerate(self.subs) if s.ready(ctx) for p in s.fired(ctx)]

    def is_done(self) -> bool:
        return any(s.is_done() for s in self.subs)


@dataclass(frozen=True)
class AfterAll(Composite):
    """Ready when every child is ready; done when every child is done."""

    def ready(self, ctx: Ctx) -> bool:
        return all(s.ready(ctx) for s in self.subs)

    def next(self, ctx: Ctx) -> Node:
        return self._with([s.next(ctx) for s in self.subs])

    def fired(self, ctx: Ctx) -> list[tuple[int, ...]]:
        return [(i, *p) for i, s in enumerate(self.subs) for p in s.fired(ctx)]

    def is_done(self) -> bool:
        return all(s.is_done() for s in self.subs)


@dataclass(frozen=True)
class AfterEach(Composite):
    """The children in sequence: P is the first live child's; every child sees elements."""

    def active(self) -> int:
        """Index of the first child not done (len(subs) when all are done)."""
        for i, s in enumerate(self.subs):
            if not s.is_done():
                return i
        return len(self.subs)

    def ready(self, ctx: Ctx) -> bool:
        i = self.active()
        return True if i == len(self.subs) else self.subs[i].ready(ctx)

    def next(self, ctx: Ctx) -> Node:
        i = self.active()
        if i == len(self.subs):
            return self
        subs = list(self.subs)
        subs[i] = subs[i].next(ctx)
        # the elements later children saw were just emitted: they start afresh
        subs[i + 1 :] = [s.restart() for s in subs[i + 1 :]]
        return self._with(subs)

    def fired(self, ctx: Ctx) -> list[tuple[int, ...]]:
        i = self.active()
        return [] if i == len(self.subs) else [(i, *p) for p in self.subs[i].fired(ctx)]

    def is_done(self) -> bool:
        return all(s.is_done() for s in self.subs)

    def rewind(self) -> Node:
        """Rewind up to the first child that is live *after* rewinding, restart the rest.

        dfsql decision: the specification takes k before rewinding; taking it after keeps
        the sequence consistent (no done child after a live one) and makes rewind
        idempotent, which merge associativity needs.
        """
        out: list[Node] = []
        for i, s in enumerate(self.subs):
            r = s.rewind()
            out.append(r)
            if not r.is_done():
                out += [x.restart() for x in self.subs[i + 1 :]]
                break
        return self._with(out)


@dataclass(frozen=True)
class Repeat(Node):
    """Fire whenever the child is ready; restart the child once it is done."""

    sub: Node

    def ready(self, ctx: Ctx) -> bool:
        return self.sub.ready(ctx)

    def next(self, ctx: Ctx) -> Node:
        n = self.sub.next(ctx)
        return Repeat(n.restart() if n.is_done() else n)

    def fired(self, ctx: Ctx) -> list[tuple[int, ...]]:
        return [(0, *p) for p in self.sub.fired(ctx)]

    def restart(self) -> Node:
        return Repeat(self.sub.restart())

    def rewind(self) -> Node:
        return Repeat(self.sub.rewind())

    def further(self, other: Node) -> Node:
        assert isinstance(other, Repeat)
        return Repeat(self.sub.further(other.sub))

    def on_element(self, p: int) -> Node:
        return Repeat(self.sub.on_element(p))

    def next_timer(self, now: int) -> int | None:
        return self.sub.next_timer(now)

    def __str__(self) -> str:
        return f"Repeat({self.sub})"


@dataclass(frozen=True)
class OrFinally(Node):
    """``main.orFinally(final)``: P(main) over its elements since it last fired, or
    P(final) over every element; done when either is done. Firing applies
    next_if_ready to both, so ``final`` keeps its elements when only ``main`` fired."""

    main: Node
    final: Node

    def ready(self, ctx: Ctx) -> bool:
        return self.main.ready(ctx) or self.final.ready(ctx)

    def next(self, ctx: Ctx) -> Node:
        return OrFinally(self.main.next_if_ready(ctx), self.final.next_if_ready(ctx))

    def fired(self, ctx: Ctx) -> list[tuple[int, ...]]:
        return [(i, *p) for i, s in enumerate((self.main, self.final)) if s.ready(ctx)
                for p in s.fired(ctx)]

    def restart(self) -> Node:
        return OrFinally(self.main.restart(), self.final.restart())

    def is_done(self) -> bool:
        return self.main.is_done() or self.final.is_done()

    def rewind(self) -> Node:
        return OrFinally(self.main.rewind(), self.final.rewind())

    def further(self, other: Node) -> Node:
        assert isinstance(other, OrFinally)
        return OrFinally(self.main.further(other.main), self.final.further(other.final))

    def on_element(self, p: int) -> Node:
        return OrFinally(
            self.main if self.main.is_done() else self.main.on_element(p),
            self.final if self.final.is_done() else self.final.on_element(p),
        )

    def next_timer(self, now: int) -> int | None:
        ts = [
            t
            for s in (self.main, self.final)
            if not s.is_done() and (t := s.next_timer(now)) is not None
        ]
        return min(ts) if ts else None

    def __str__(self) -> str:
        return f"{self.main}.orFinally({self.final})"


# --------------------------------------------------------------------------- building


def build(t: c.Trigger) -> Node:
    """The initial state machine for a parsed trigger clause."""
    if isinstance(t, c.ElemCount):
        return ElemCount(t.count)
    if isinstance(t, c.EndOfWindow):
        return EndOfWindow()
    if isinstance(t, c.SinceEarliestElem):
        return SinceEarliestElem(delay=t.delay.micros)
    if isinstance(t, c.AtPeriod):
        return AtPeriod(period=t.period.micros)
    if isinstance(t, c.Never):
        return Never()
    if isinstance(t, c.AfterFirst):
        return AfterFirst(tuple(build(s) for s in t.subs))
    if isinstance(t, c.AfterAll):
        return AfterAll(tuple(build(s) for s in t.subs))
    if isinstance(t, c.AfterEach):
        return AfterEach(tuple(build(s) for s in t.subs))
    if isinstance(t, c.Repeat):
        sub = t.sub
        while isinstance(sub, c.Repeat):  # REPEAT of a REPEAT is one REPEAT
            sub = sub.sub
        return Repeat(build(sub))
    if isinstance(t, c.OrFinally):
        return OrFinally(build(t.main), build(t.final))
    raise TypeError(f"unknown trigger {t!r}")


def merge_rewinds(ends: list[int], watermark: int) -> bool:
    """Whether merging windows whose ends are ``ends`` rewinds their triggers: when some
    but not all of them have passed their end (see :func:`merge_triggers`)."""
    passed = [watermark >= e for e in ends]
    return any(passed) and not all(passed)


def merge_triggers(triggers: list[Node], ends: list[int], watermark: int) -> Node:
    """R1 ⊕ R2 ⊕ … for windows merged at once, whose (exclusive) ends are ``ends``.

    The seed's rule: ``further(rewind(R1), rewind(R2), …)``, where rewinding is needed
    only when *some but not all* of the merged windows have passed their end (if none
    has, nothing was fired at an end that moved; if all have, the merged end has passed
    too and every output is allowed). One merge event is one n-ary operation: the result
    does not depend on the order of the windows (commutative); applying it pairwise to
    three windows may differ, because rewinding depends on the set of ends merged.
    """
    if merge_rewinds(ends, watermark):
        triggers = [t.rewind() for t in triggers]
    out = triggers[0]
    for t in triggers[1:]:
        out = out.further(t)
    return out
