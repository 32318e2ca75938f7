"""``python -m benchmarks``: run every benchmark script in this folder in turn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    failed = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"== {script.name}", flush=True)
        failed |= subprocess.run([sys.executable, str(script), *sys.argv[1:]]).returncode != 0
    sys.exit(1 if failed else 0)
