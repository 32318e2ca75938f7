"""The paper's running example as the tests read it: examples/paper/figures.json (every
figure's query and expected rows, by name) beside its data."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "examples" / "paper"
#: the paper's figures by name
FIGURES = {f["name"]: f for f in json.loads((PAPER / "figures.json").read_text())["figures"]}
