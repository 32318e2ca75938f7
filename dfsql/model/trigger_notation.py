"""How a trigger is written (docs/reference.md#trigger), the one home of the trigger's printed
notation: :func:`notation` prints a parsed TRIGGER clause back in the language's words,
:func:`leaf_text` one of its leaves with where it sits (EXPLAIN FIRINGS' details, which
the shell's plots read), :func:`duration_text` a duration."""

from __future__ import annotations

from dfsql.model import clauses as c

_UNITS = tuple((name, c.MICROS_PER[short]) for name, short in c.UNIT_SHORT.items())


def duration_text(d: c.Duration) -> str:
    """A duration as the language writes it, in the largest unit that divides it exactly:
    ``1 MINUTE``, ``90 SECONDS``, ``0 SECONDS`` (the default watermark's delay); below a
    millisecond, which no clause can write, in microseconds."""
    if d.micros == 0:
        return "0 SECONDS"
    for unit, size in (*_UNITS, ("MICROSECOND", 1)):
        if d.micros % size == 0:
            n = d.micros // size
            return f"{n} {unit}" + ("S" if n != 1 else "")
    raise AssertionError("a microsecond divides every duration")  # pragma: no cover


def notation(t: c.Trigger) -> str:
    """A parsed trigger as the language writes it (docs/reference.md#trigger: ``EVERY 1 MINUTE UNTIL
    WATERMARK THEN REPEAT WATERMARK``): UNTIL for an OrFinally whose main repeats, EVERY
    for a repeated period or row count, parentheses where an operand binds looser than
    its operator; the parser reads it back to the same tree."""
    if isinstance(t, c.EndOfWindow):
        return "WATERMARK"
    if isinstance(t, c.ElemCount):
        return f"AFTER {t.count} ROW" + ("S" if t.count != 1 else "")
    if isinstance(t, c.SinceEarliestElem):
        return f"AFTER {duration_text(t.delay)}"
    if isinstance(t, c.AtPeriod):
        return f"EVERY {duration_text(t.period)}"
    if isinstance(t, c.Never):
        return "NEVER"
    if isinstance(t, c.Repeat):
        if isinstance(t.sub, c.AtPeriod):
            return notation(t.sub)
        if isinstance(t.sub, c.ElemCount):
            return f"EVERY {t.sub.count} ROW" + ("S" if t.sub.count != 1 else "")
        return f"REPEAT {_operand(t.sub)}"
    if isinstance(t, c.OrFinally):
        if isinstance(t.main, c.Repeat):
            return f"{_operand(t.main.sub)} UNTIL {_operand(t.final)}"
        return f"{_operand(t.main)} FINALLY {_operand(t.final)}"
    if isinstance(t, c.AfterEach):
        return " THEN ".join(_operand(s) for s in t.subs)
    if isinstance(t, c.AfterFirst | c.AfterAll):
        word = "ANY" if isinstance(t, c.AfterFirst) else "ALL"
        return f"{word}({', '.join(notation(s) for s in t.subs)})"
    return str(t)


def _operand(t: c.Trigger) -> str:
    s = notation(t)
    return f"({s})" if isinstance(t, c.OrFinally | c.AfterEach) else s


def _child(t: c.Trigger, i: int) -> c.Trigger:
    """The clause child that the state-machine node's child ``i`` was built from (a
    REPEAT of a REPEAT is one node: :func:`dfsql.model.triggers.build`)."""
    k = t.children[i]
    while isinstance(t, c.Repeat) and isinstance(k, c.Repeat):
        k = k.sub
    return k


def leaf_text(trigger: c.Trigger, path: tuple[int, ...]) -> str:
    """The leaf at ``path`` (child indexes, as :meth:`Node.fired` gives them) in the
    spec's notation, with where it sits: ``EVERY 1 MINUTE in EVERY 1 MINUTE UNTIL
    WATERMARK, before UNTIL, THEN branch 1``."""
    node, steps = trigger, []
    for i in path:
        steps.append((node, i))
        node = _child(node, i)
    if steps and isinstance(steps[-1][0], c.Repeat) and isinstance(node, c.AtPeriod |
                                                                    c.ElemCount):
        node = steps.pop()[0]  # EVERY …: the REPEAT is the leaf's own
    text = notation(node)
    inner = [(n, i) for n, i in steps if not isinstance(n, c.AfterEach)]
    if inner:
        n, i = inner[-1]
        text += f" in {notation(n)}"
        if isinstance(n, c.OrFinally):
            word = "UNTIL" if isinstance(n.main, c.Repeat) else "FINALLY"
            text += f", {'before' if i == 0 else 'after'} {word}"
    for n, i in reversed(steps):
        if isinstance(n, c.AfterEach):
            text += f", THEN branch {i + 1}"
    return text
