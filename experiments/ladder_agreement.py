"""How far two reports' buffers rows are apart in GB/s (issue 61's "within 2% of the committed
ones" for the sum and softmax ladders): rows paired by kernel and dims, the largest first.

    python3 experiments/ladder_agreement.py OLD NEW    (.json, .json.gz, or JSON lines .txt.gz)
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

LIMIT_PCT = 2.0


def rows(path: Path) -> dict[tuple[str, int, int, int], dict]:
    """(kernel, m, n, k) -> row: a report's rows, or a run's stream of them, one a line."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        text = f.read()
    try:
        found = json.loads(text)["rows"]
    except json.JSONDecodeError:  # JSON lines
        found = [json.loads(line) for line in text.splitlines() if line.strip()]
    return {(r["kernel"]["name"], r["m"], r["n"], r["k"]): r for r in found}


def gbps(row: dict) -> float:
    return row["memory"]["bytes"] / row["timing"]["median_ms"] / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    args = ap.parse_args()
    old, new = rows(args.old), rows(args.new)
    both, apart, notes = [], 0, []
    for key, row in new.items():
        was = old.get(key)
        if was is None:
            notes.append(f"  {key[0]} {key[1]}x{key[2]}: not in {args.old.name}")
        elif row["status"] != "pass" or was["status"] != "pass":
            notes.append(f"  {key[0]} {key[1]}x{key[2]}: {was['status']} then, "
                         f"{row['status']} now")
        else:
            a, b = gbps(was), gbps(row)
            pct = 100.0 * (b - a) / a
            apart += abs(pct) > LIMIT_PCT
            both.append((abs(pct), f"  {key[0]} {key[1]}x{key[2]}: {a:.0f} and {b:.0f} GB/s, "
                                   f"{pct:+.2f}%"))
    print(f"{args.old.name} against {args.new.name}: {len(both)} passing rows in both, "
          f"{len(both) - apart} within {LIMIT_PCT:g}% in GB/s, {apart} past it")
    for _, line in sorted(both, reverse=True):
        print(line)
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
