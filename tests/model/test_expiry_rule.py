"""The expiry rule (docs/reference.md#allowed-lateness, ALLOWED LATENESS), one home: ``model.windows.expired``.
A window's state is kept until the watermark reaches window_end + lateness; from then on
an element for it is dropped. Every driver of the model (the state machine, the FIXED fast
path, the sessions fast path) holds it at the boundary, by hand: FIXED(60 SECONDS) /
SESSIONS(GAP 50 SECONDS), ALLOWED LATENESS 30 SECONDS, the watermark the largest event
time seen. The row of event time 90 s arriving at 2 s moves the watermark to 90 s =
60 + 30: the window of a row of event time 10 s arriving at 3 s has expired: dropped.
With the watermark at 89 s it is late but kept."""

from __future__ import annotations

import pytest

from dfsql.language.model_run import run
from dfsql.model.windows import POS_INF, expired


def test_expired_is_watermark_at_or_past_end_plus_lateness() -> None:
    assert expired(60, 30, 90) and not expired(60, 30, 89)
    assert not expired(POS_INF, 30, POS_INF - 1)  # GLOBAL's end + lateness saturates


@pytest.mark.parametrize("window", ["FIXED(60 SECONDS)", "SESSIONS(GAP 50 SECONDS)"])
@pytest.mark.parametrize("fast", [False, None])
@pytest.mark.parametrize("moved_to,dropped", [(90, True), (89, False)])
def test_every_driver_drops_at_the_expiry_boundary(window, fast, moved_to, dropped) -> None:
    """The late row's own window is [0, 60) (FIXED) or [10, 60) (its session proto-window):
    expiry 90 s. EMIT DISCARDING counts each element in one pane: 3 kept, 2 if dropped."""
    rows = [("k", 1, 0, 1), ("k", 1, moved_to, 2), ("k", 1, 10, 3)]
    text = (f"WINDOW {window} ON event_time WATERMARK DELAY 0 SECONDS "
            "PROCESSING TIME arrival_time ALLOWED LATENESS 30 SECONDS EMIT DISCARDING")
    got = run(rows, text, aggregate=len, fast=fast)
    assert sum(r["value"] for r in got) == (2 if dropped else 3), got
