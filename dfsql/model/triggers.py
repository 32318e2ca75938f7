"""The trigger state machine (the formal trigger specification, shared/seeds/001): the
tree for a parsed TRIGGER clause (:func:`build`) and the merge of the trees of merging
windows (:func:`merge_triggers`). The nodes are :mod:`dfsql.model.trigger_nodes` (their
interface and the leaves) and :mod:`dfsql.model.trigger_composites`; both are named here
too, as the model's drivers use them. How a trigger is written: :mod:`dfsql.model.trigger_notation`.
"""

from __future__ import annotations

from dfsql.model import clauses as c
from dfsql.model.trigger_composites import (
    AfterAll,
    AfterEach,
    AfterFirst,
    Composite,
    OrFinally,
    Repeat,
)
from dfsql.model.trigger_nodes import (
    AtPeriod,
    Ctx,
    Done,
    ElemCount,
    EndOfWindow,
    Leaf,
    Never,
    Node,
    SinceEarliestElem,
    ceil_to,
)

__all__ = [
    "AfterAll", "AfterEach", "AfterFirst", "AtPeriod", "Composite", "Ctx", "Done", "ElemCount",
    "EndOfWindow", "Leaf", "Never", "Node", "OrFinally", "Repeat", "SinceEarliestElem",
    "batch_trigger_note", "build", "ceil_to", "merge_rewinds", "merge_triggers",
]


def batch_trigger_note(cl: c.Clauses) -> str | None:
    """What to tell the user when a TRIGGER is given for a batch input (a bounded table
    without PROCESSING TIME), which docs/reference.md#trigger accepts but on which no trigger changes
    anything: the watermark is past every window at once, so each window gives one last
    ON_TIME pane. None when there is nothing to say. The caller knows the input is
    bounded (over a stream the engine's clock makes the trigger count)."""
    if cl.processing_time is not None or not cl.trigger_given or \
            cl.trigger in (c.DEFAULT_TRIGGER, c.EndOfWindow()):
        return None
    return ("note: the TRIGGER has no effect on a batch input (a bounded table without "
            "PROCESSING TIME: every window gives one ON_TIME pane); add PROCESSING TIME "
            "<arrival column> to replay the table in arrival order")


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
