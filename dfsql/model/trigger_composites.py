"""The trigger state machine's composite nodes: AfterFirst, AfterAll, AfterEach, Repeat
and OrFinally (the formal trigger specification, shared/seeds/001; the node interface
and the leaves: :mod:`dfsql.model.trigger_nodes`)."""

from __future__ import annotations

from dataclasses import dataclass

from dfsql.model.trigger_nodes import Ctx, Node


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
