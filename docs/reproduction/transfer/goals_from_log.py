"""The goals of bench_transfer.py, from the re-timed lines of a log whose run was stopped
before its own summary (each held-out workload's rows are re-timed, and printed, as soon as
they are measured; the summary comes after the last workload).

    python docs/reproduction/transfer/goals_from_log.py docs/reproduction/transfer/2026-12-05.log
"""

import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from bench_transfer import Row, _goals

RETIMED = re.compile(r"^  re-timed (\S+)\s+(\d+) seed (\d+):\s+([\d.]+) GFLOPS")


def main(log: str) -> None:
    workload = None
    rows = []
    for line in Path(log).read_text().splitlines():
        if not line.startswith(" ") and " seed " in line:
            workload = line.split()[0]
        if m := RETIMED.match(line):
            label, budget, seed, gflops = m.groups()
            rows.append(
                Row(workload, label, int(budget), int(seed), 0, 0.0, 0, math.nan, float(gflops), 0)
            )
    strategies = sorted({r.strategy.removesuffix("+T") for r in rows} - {"tune_tir_fast"})
    for line in _goals(rows, strategies, (32, 64, 128)):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
