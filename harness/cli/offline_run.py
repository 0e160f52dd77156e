"""``harness run`` without a GPU: the offline build report at the largest size, and the
failures a GPU run would have too, found by compiling (:func:`run_offline`)."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

from harness.cli import common
from harness.cli.kernels import build_progress
from harness.compiler.offline import build_all
from harness.kernels.registry import Kernel
from harness.report import tables
from harness.report.width import fit_text

OFFLINE_ARCH = "sm_90"


def run_offline(chosen: Sequence[Kernel], sizes, why: str, width: int | None) -> int:
    """``harness run`` without a GPU: the offline build report at the largest size, and one
    line per failure a GPU run would have too: a kernel that does not compile (once), or that
    cannot launch at a size (with that size). Exit 1 when there is one, else NoGpu (3)."""
    largest = max(sizes, key=lambda s: s[0] * s[1] * s[2])
    print(fit_text(f"no GPU here ({why}): nothing can be checked or timed; the offline build "
                   f"report for {OFFLINE_ARCH} at {_size_text(largest)} follows", width))
    try:
        rows = build_all(chosen, OFFLINE_ARCH, largest, progress=build_progress())
        built = [k for k, r in zip(chosen, rows, strict=True) if "registers" in r]
        at = {size: build_all(built, OFFLINE_ARCH, size) for size in sizes if size != largest}
    except KeyboardInterrupt:
        print("harness: interrupted: every compile in flight was stopped", file=sys.stderr)
        return common.EXIT_INTERRUPTED
    print(tables.build_table(rows, width=width))
    at[largest] = [r for r in rows if "registers" in r]
    failures = [f"- {r['kernel']}: {r['status']}: {_first_problem(r['message'])}"
                for r in rows if r["status"] == "compile error"]
    failures += [f"- {r['kernel']} at {_size_text(size)}: {r['status']}: {r['message']}"
                 for size in sizes for r in at.get(size, []) if r["status"] == "cannot launch"]
    failures = list(dict.fromkeys(failures))  # a size asked twice is said once
    if failures:
        print("\nFails without a GPU already (`harness build KERNEL` shows a whole compiler "
              "log):\n" + "\n".join(failures))
        common.say(f"harness: {len(failures)} failure(s) found offline; `harness run` needs a "
                   "GPU to check and time the rest")
        return common.EXIT_FAILED
    raise common.NoGpu("`harness run` needs a GPU; the report above is what it can say "
                       "without one")


def _size_text(size) -> str:
    return "x".join(map(str, size))


_DIAGNOSTIC = re.compile(r"^\S.*:\d+: (?:error|catastrophic error|fatal)\b.*$", re.MULTILINE)


def _first_problem(message: str) -> str:
    """A compile error in one line: its first diagnostic (file:line: error: ...), else its first
    line."""
    found = _DIAGNOSTIC.search(message)
    return found[0].strip() if found else message.strip().splitlines()[0]
