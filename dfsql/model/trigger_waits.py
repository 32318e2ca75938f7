"""What a window's trigger waits for next (EXPLAIN FIRINGS' WAITING rows,
docs/reference.md#explaining-time and docs/guides/streams.md#continuous-queries-as-statements): the leaves of its state machine that can fire next, each in the spec's
notation (:mod:`dfsql.model.trigger_notation`) with its own state — how many rows a
count has, the instant a period or delay comes due. The clause and the state machine
(:func:`dfsql.model.triggers.build`) are walked side by side."""

from __future__ import annotations

from collections.abc import Callable

from dfsql.model import clauses as c
from dfsql.model import triggers as tr
from dfsql.model.trigger_notation import notation


def waits_for(trigger: c.Trigger, node: tr.Node, time_text: Callable[[int], str]) -> str:
    """The leaves of ``node`` (the state of a trigger built from ``trigger``) that can
    fire next, joined by ``or`` (``and`` inside ALL): ``EVERY 1 MINUTE at 12:06:00 or
    WATERMARK``. ``time_text`` prints an instant. "nothing" when the trigger is done."""
    return _text(trigger, node, time_text) or "nothing (the trigger is done)"


def _text(t: c.Trigger, n: tr.Node, time_text: Callable[[int], str]) -> str:
    if isinstance(n, tr.Done):
        return ""
    if isinstance(n, tr.Repeat):
        sub = t.sub if isinstance(t, c.Repeat) else t
        while isinstance(sub, c.Repeat):  # REPEAT of a REPEAT is one node
            sub = sub.sub
        if isinstance(sub, c.AtPeriod | c.ElemCount):  # EVERY …: the REPEAT is the leaf's
            return _leaf(notation(t), n.sub, time_text)
        return _text(sub, n.sub, time_text)
    if isinstance(n, tr.OrFinally):
        assert isinstance(t, c.OrFinally)
        parts = [_text(t.main, n.main, time_text) if not n.main.is_done() else "",
                 _text(t.final, n.final, time_text)]
        return " or ".join(dict.fromkeys(p for p in parts if p))
    if isinstance(n, tr.AfterEach):
        assert isinstance(t, c.AfterEach)
        i = n.active()
        return "" if i == len(n.subs) else _text(t.subs[i], n.subs[i], time_text)
    if isinstance(n, tr.AfterFirst | tr.AfterAll):
        assert isinstance(t, c.AfterFirst | c.AfterAll)
        parts = [_text(ts, s, time_text) for ts, s in zip(t.subs, n.subs, strict=True)
                 if not s.is_done()]
        word = " or " if isinstance(n, tr.AfterFirst) else " and "
        joined = word.join(p for p in parts if p)
        return f"({joined})" if word == " and " and len(parts) > 1 else joined
    return _leaf(notation(t), n, time_text)


def _leaf(written: str, n: tr.Node, time_text: Callable[[int], str]) -> str:
    """A leaf as written, with its state."""
    if isinstance(n, tr.ElemCount):
        return f"{written} ({n.n} of {n.k} so far)"
    if isinstance(n, tr.AtPeriod | tr.SinceEarliestElem):
        due = n.deadline()
        return f"{written} at {time_text(due)}" if due is not None else \
            f"{written} (from the next element on)"
    if isinstance(n, tr.Never):
        return "NEVER (only the closing pane fires)"
    return written
