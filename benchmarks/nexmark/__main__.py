"""``python -m benchmarks.nexmark generate --events N --out DIR [--seed S] [--rate R] …``:
writes Nexmark's person, auction and bid streams under DIR (layout: benchmarks/nexmark/
generator.py's docstring); ``python -m benchmarks.nexmark run --events N …`` times the
queries through dfsql and through Spark alone (benchmarks/nexmark/runner.py)."""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.nexmark.config import NexmarkConfig
from benchmarks.nexmark.generator import write

_DEFAULTS = NexmarkConfig()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.nexmark", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="write the person, auction and bid streams")
    g.add_argument("--events", type=int, required=True, help="number of events N")
    g.add_argument("--out", required=True, help="output directory (DIR/person, …)")
    g.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    g.add_argument("--rate", type=int, default=_DEFAULTS.rate,
                   help=f"events per second of event time (default {_DEFAULTS.rate})")
    g.add_argument("--out-of-order-group-size", type=int,
                   default=_DEFAULTS.out_of_order_group_size,
                   help="Nexmark's outOfOrderGroupSize: 1 in order (default), n: each group "
                        "of n events emitted scrambled")
    g.add_argument("--prob-delayed-event", type=float, default=_DEFAULTS.prob_delayed_event,
                   help=f"share of events held back (default {_DEFAULTS.prob_delayed_event})")
    g.add_argument("--occasional-delay-sec", type=int,
                   default=_DEFAULTS.occasional_delay_sec,
                   help=f"longest hold-back in seconds (default {_DEFAULTS.occasional_delay_sec})")
    g.add_argument("--file-seconds", type=float, default=10.0,
                   help="arrival time per Parquet file (default 10)")
    sub.add_parser("run", help="time the queries, dfsql and native Spark (run --help)",
                   add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:  # the runner's own options
        from benchmarks.nexmark.runner import run

        return run(argv[1:])
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    try:
        rows = write(args.out, args.events, seed=args.seed, rate=args.rate,
                     file_seconds=args.file_seconds,
                     out_of_order_group_size=args.out_of_order_group_size,
                     prob_delayed_event=args.prob_delayed_event,
                     occasional_delay_sec=args.occasional_delay_sec)
    except (FileExistsError, ValueError) as e:  # a used directory, a knob out of range
        print(f"error: {e}", file=sys.stderr)
        return 1
    took = time.perf_counter() - started
    print(f"{args.events:,} events in {took:.1f} s: " + ", ".join(
        f"{kind} {n:,}" for kind, n in rows.items()) + f" -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
