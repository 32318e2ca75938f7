"""``\\help WINDOW`` and ``dfsql help TRIGGER``: a section of the shipped language reference.

The reference (``dfsql/docs/reference.md``, the checkout's ``docs/``) ships in the wheel,
so the help an installed dfsql prints is the reference of that very version, read with
importlib.resources (no path of the checkout). A topic is a level-2 heading
(``## WINDOW``); its section runs to the next level-2 heading. Matching ignores case
and repeated spaces, and a topic that is the start of exactly one heading finds it
(``\\help allowed`` finds ALLOWED LATENESS), so the user never has to guess
punctuation; a keyword of the language finds the section that uses it most
(``\\help SESSIONS`` is WINDOW's), and a misspelt heading the closest one.
"""

from __future__ import annotations

import re
from importlib import resources

from dfsql.language.vocabulary import KEYWORDS as ALL_KEYWORDS

REFERENCE = "docs/reference.md"

_HEADING = re.compile(r"^## +(.+?) *$", re.MULTILINE)


def reference_text() -> str:
    """The whole language reference, as shipped."""
    return resources.files("dfsql").joinpath(REFERENCE).read_text(encoding="utf-8")


def _key(text: str) -> str:
    return " ".join(text.split()).upper()


def topics(text: str | None = None) -> list[str]:
    """The reference's level-2 headings, in order: what ``\\help`` can show."""
    return [m.group(1) for m in _HEADING.finditer(text if text is not None else
                                                   reference_text())]


def section(topic: str, text: str | None = None) -> str | None:
    """The section of the reference for ``topic`` (its heading line included): the one
    it heads (or whose heading it starts), else for a keyword of the language
    (``SESSIONS``, ``EVERY``, ``RETRACTING``) the section that uses it most, else the
    heading closest in spelling (``WINDOWS``); None when nothing is near (the caller
    lists :func:`topics`)."""
    text = text if text is not None else reference_text()
    heads = list(_HEADING.finditer(text))
    want = _key(topic)
    if not want:
        return None
    found = [m for m in heads if _key(m.group(1)) == want] or \
        [m for m in heads if _key(m.group(1)).startswith(want + " ")]
    if len(found) != 1:
        found = _by_keyword(want, heads, text) or _closest(want, heads)
    if len(found) != 1:
        return None
    start = found[0].start()
    later = [m.start() for m in heads if m.start() > start]
    end = later[0] if later else len(text)
    return text[start:end].rstrip() + "\n"


def _by_keyword(word: str, heads: list[re.Match], text: str) -> list[re.Match]:
    """The section where the language keyword ``word`` is written most often (as a
    whole word in capitals, as the reference writes keywords)."""
    if word not in ALL_KEYWORDS:
        return []
    named = [m for m in heads if word in _key(m.group(1)).split()]
    if len(named) == 1:  # LATENESS: ALLOWED LATENESS
        return named
    bounds = [m.start() for m in heads] + [len(text)]
    pattern = re.compile(rf"\b{re.escape(word)}\b")
    counts = [len(pattern.findall(text, a, b)) for a, b in zip(bounds, bounds[1:],
                                                               strict=False)]
    best = max(counts, default=0)
    return [heads[counts.index(best)]] if best else []


def _closest(word: str, heads: list[re.Match]) -> list[re.Match]:
    import difflib

    names = [_key(m.group(1)) for m in heads]
    near = difflib.get_close_matches(word, names, n=1, cutoff=0.75)
    return [heads[names.index(near[0])]] if near else []


def unknown_topic(topic: str, text: str | None = None) -> str:
    """What an unknown topic gets: the topics there are."""
    return (f"no section of the reference is headed {topic!r}; the topics are:\n  "
            + "\n  ".join(topics(text)))
