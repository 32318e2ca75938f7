"""``\\help WINDOW`` and ``dfsql help TRIGGER``: a section of the shipped language reference.

The reference (``dfsql/docs/reference.md``, the checkout's ``docs/``) ships in the wheel,
so the help an installed dfsql prints is the reference of that very version, read with
importlib.resources (no path of the checkout). A topic is a level-2 heading
(``## WINDOW``); its section runs to the next level-2 heading. Matching ignores case
and repeated spaces, and a topic that is the start of exactly one heading finds it
(``\\help lateness`` finds nothing, ``\\help allowed`` finds ALLOWED LATENESS), so the
user never has to guess punctuation.
"""

from __future__ import annotations

import re
from importlib import resources

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
    """The section of the reference headed ``topic`` (its heading line included), or
    None when no heading matches (the caller lists :func:`topics`)."""
    text = text if text is not None else reference_text()
    heads = list(_HEADING.finditer(text))
    want = _key(topic)
    found = [m for m in heads if _key(m.group(1)) == want] or \
        [m for m in heads if _key(m.group(1)).startswith(want + " ")]
    if len(found) != 1 or not want:
        return None
    start = found[0].start()
    later = [m.start() for m in heads if m.start() > start]
    end = later[0] if later else len(text)
    return text[start:end].rstrip() + "\n"


def unknown_topic(topic: str, text: str | None = None) -> str:
    """What an unknown topic gets: the topics there are."""
    return (f"no section of the reference is headed {topic!r}; the topics are:\n  "
            + "\n  ".join(topics(text)))
