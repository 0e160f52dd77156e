"""How far two reports' rows are apart in % of cuBLAS (issue 37's "within 2% per row"): for
every row both hold that passed with a cuBLAS timing, the relative difference of the kernel's
% of cuBLAS (cuBLAS's median over the kernel's), the largest first.

    python3 experiments/agreement.py OLD.json NEW.json [--top N]    (or .json.gz)

A run and a compare (whose rows are a subset) pair by kernel name and size. ``harness diff``
judges each median against its own error; this answers the issue's one question per row. Then,
by size, the root mean square of the rows' differences beside what the reports' own errors
(``median_rel_se_pct`` of the kernel and of cuBLAS, in both) would give.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from harness.report.reading import read_text

LIMIT_PCT = 2.0


def pct_of_cublas(path: Path) -> dict[tuple[str, int], tuple[float, float]]:
    """(kernel name, M) -> the kernel's % of cuBLAS and the sum of the squares of its two
    medians' relative errors (percent), for the passing rows with a baseline."""
    out = {}
    for row in json.loads(read_text(path))["rows"]:  # a committed .json.gz too
        timing, baseline = row.get("timing"), row.get("baseline")
        if row.get("status") != "pass" or not timing or not baseline:
            continue
        out[(row["kernel"]["name"], row["m"])] = (
            100.0 * baseline["timing"]["median_ms"] / timing["median_ms"],
            timing["median_rel_se_pct"] ** 2 + baseline["timing"]["median_rel_se_pct"] ** 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    old, new = pct_of_cublas(args.old), pct_of_cublas(args.new)
    apart = sorted(((100.0 * abs(new[k][0] / old[k][0] - 1.0), k) for k in old if k in new),
                   reverse=True)
    over = sum(d > LIMIT_PCT for d, _ in apart)
    print(f"{args.old.name} against {args.new.name}: {len(apart)} rows in both, "
          f"{len(apart) - over} within {LIMIT_PCT:g}% in % of cuBLAS, {over} past it")
    for d, (name, m) in apart[:args.top]:
        print(f"  {name} at {m}: {old[(name, m)][0]:.2f}% and {new[(name, m)][0]:.2f}% of "
              f"cuBLAS, {d:.2f}% apart")
    for size in sorted({m for _, (_, m) in apart}):
        rows = [(d, k) for d, k in apart if k[1] == size]
        rms = math.sqrt(sum(d * d for d, _ in rows) / len(rows))
        errors = math.sqrt(sum(old[k][1] + new[k][1] for _, k in rows) / len(rows))
        print(f"  at {size}: {len(rows)} rows {rms:.2f}% apart (root mean square); their "
              f"errors would give {errors:.2f}%")


if __name__ == "__main__":
    main()
