"""The judged endpoint's fixtures (``places``, ``server``, ``cursor``: tests/server/judged.py)
for the modules that attack it; a module's own fixture of the same name wins."""

from tests.server.judged import cursor, places, server  # noqa: F401 (fixtures)
