"""Front-end latency: parse_statement + rewrite for every docs/reference.md and figure query.

No Spark. Prints the median over ``--runs`` runs (after warm-up) per query and exits
non-zero if any median exceeds the budget (5 ms). Run: ``python benchmarks/bench_parse.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dfsql.language import parse_statement  # noqa: E402
from dfsql.language.rewrite import rewrite  # noqa: E402

FIGURES = ROOT / "examples" / "paper" / "figures.json"
BUDGET_MS = 5.0
HEAD = "SELECT k, COUNT(*) AS n, SUM(v) AS total\nFROM t\nGROUP BY k\n"

SPEC_QUERIES: dict[str, str] = {
    "§1 example": """SELECT user_id, SUM(score) AS total, COUNT(*) AS n
FROM scores
WHERE score > 0
GROUP BY user_id
HAVING COUNT(*) > 0
WINDOW SESSIONS(GAP 30 MINUTES) ON event_time
WATERMARK DELAY 2 MINUTES
PROCESSING TIME arrival_time
ALLOWED LATENESS 1 HOUR
TRIGGER EVERY 1 MINUTE UNTIL WATERMARK
EMIT ACCUMULATING AND RETRACTING
ORDER BY emit_time, user_id
LIMIT 100""",
    "§3 GLOBAL": HEAD + "WINDOW GLOBAL",
    "§3 FIXED offset": HEAD + "WINDOW FIXED(1 HOUR, OFFSET 15 MINUTES) ON ts",
    "§3 SLIDING": HEAD + "WINDOW SLIDING(10 MINUTES, EVERY 1 MINUTE, OFFSET 5 S) ON ts",
    "§3 SESSIONS": HEAD + "WINDOW SESSIONS(GAP 30 MINUTES) ON ts",
    "§4 DELAY": HEAD + "WINDOW FIXED(1 MINUTE) ON ts WATERMARK DELAY 2 MINUTES",
    "§4 FROM": HEAD + "WINDOW FIXED(1 MINUTE) ON ts WATERMARK FROM wm",
    "§4 FROM BY IDLE": HEAD + "WINDOW FIXED(1 MINUTE) ON ts WATERMARK FROM n BY w IDLE TIMEOUT 5 MIN",
    "§4 PERFECT": HEAD + "WINDOW FIXED(1 MINUTE) ON ts WATERMARK PERFECT PROCESSING TIME arr",
    "§4 PERCENTILE": HEAD + "WINDOW FIXED(1 MINUTE) ON ts WATERMARK PERCENTILE 99 DELAY 1 SEC",
    "§4 Spark WATERMARK": "SELECT k, COUNT(*) FROM t WATERMARK ts DELAY OF INTERVAL 2 MINUTES "
                          "GROUP BY k WINDOW FIXED(1 MINUTE)",
    "§4 LATE ROWS INTO": HEAD + "WINDOW FIXED(1 MINUTE) ON ts PROCESSING TIME arr "
                                "ALLOWED LATENESS 1 HOUR LATE ROWS INTO late_rows",
    "§5 AT WATERMARK EARLY LATE": HEAD + "WINDOW FIXED(1 MINUTE) ON ts "
                                         "TRIGGER AT WATERMARK EARLY EVERY 1 MINUTE LATE AFTER 1 ROW",
    "§5 ANY/ALL/THEN": HEAD + "WINDOW FIXED(1 MINUTE) ON ts TRIGGER ANY(AFTER 5 ROWS, WATERMARK) "
                              "THEN ALL(AFTER 1 MINUTE, AFTER 2 ROWS) FINALLY NEVER",
    "§5 EVERY n ROWS": HEAD + "WINDOW GLOBAL TRIGGER EVERY 2 ROWS",
    "§6 EMIT DISCARDING": HEAD + "WINDOW GLOBAL EMIT DISCARDING",
    "§1 windowed over windowed": (
        "WITH a AS (SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW FIXED(1 MINUTE) ON ts "
        "EMIT ACCUMULATING AND RETRACTING)\n"
        "SELECT k, SUM(n) AS total FROM a GROUP BY k WINDOW GLOBAL ON window_end"),
}


def queries() -> dict[str, str]:
    """Every query to time: docs/reference.md's and the paper figures'."""
    out = dict(SPEC_QUERIES)
    for fig in json.loads(FIGURES.read_text())["figures"]:
        out[fig["name"]] = fig["query"]
    return out


def once(text: str) -> None:
    """One front-end pass: parse the statement and rewrite every windowed block.

    parse_statement already rewrites each block (to report SELECT mistakes early) and
    keeps the stages in the block, which rewrite() then returns.
    """
    stmt = parse_statement(text)
    for b in stmt.blocks:
        rewrite(b, stmt.source)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    args, _ = ap.parse_known_args(argv)
    rows = []
    for name, text in queries().items():
        for _ in range(args.warmup):
            once(text)
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            once(text)
            times.append((time.perf_counter() - t0) * 1000)
        rows.append((name, statistics.median(times), max(times)))
    width = max(len(r[0]) for r in rows)
    print(f"{'query':<{width}}  median ms  max ms   (parse_statement + rewrite, "
          f"{args.runs} runs)")
    for name, med, mx in rows:
        flag = "  OVER BUDGET" if med > BUDGET_MS else ""
        print(f"{name:<{width}}  {med:9.3f}  {mx:6.2f}{flag}")
    over = [r for r in rows if r[1] > BUDGET_MS]
    if over:
        print(f"FAIL: {len(over)} median(s) over {BUDGET_MS} ms", file=sys.stderr)
        return 1
    print(f"ok: every median under {BUDGET_MS} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
