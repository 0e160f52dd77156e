"""``harness run`` without a GPU: the offline build report at the largest size, and the
failures a GPU run would have too, found by compiling (:func:`run_offline`)."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

from harness import kinds
from harness.cli import common
from harness.cli.kernels import build_progress
from harness.compiler.offline import build_all
from harness.kernels.registry import Kernel
from harness.kinds.base import Kind
from harness.report import tables
from harness.report.width import fit_text

OFFLINE_ARCH = "sm_90"


def run_offline(chosen: Sequence[Kernel], sizes, why: str, width: int | None,
                texts: Sequence[str] = ()) -> int:
    """``harness run`` without a GPU: the offline build report at the largest size, and one
    line per failure a GPU run would have too: a kernel that does not compile (once), or that
    cannot launch at a size (with that size). A kind that builds its kernels itself
    (Kind.offline_rows) builds each at its own sizes (or ``texts``, the ``--size`` texts). Exit 1
    when there is a failure, else NoGpu (3)."""
    core = [k for k in chosen if not builds_itself(k)]
    largest = max(sizes, key=lambda s: s[0] * s[1] * s[2]) if core and sizes else None
    at_text = (f" at {_size_text(largest)}" if largest else "") + (
        " (kernels of their own sizes at their largest)" if len(core) < len(chosen) else "")
    print(fit_text(f"no GPU here ({why}): nothing can be checked or timed; the offline build "
                   f"report for {OFFLINE_ARCH}{at_text} follows", width))
    try:
        own = {k.name: kinds.of(k.spec).offline_rows(k, OFFLINE_ARCH, texts)
               for k in chosen if k not in core}
        rows = build_all(core, OFFLINE_ARCH, largest, progress=build_progress()) if core else []
        built = [k for k, r in zip(core, rows, strict=True) if "registers" in r]
        at = {s: build_all(built, OFFLINE_ARCH, s) for s in sizes if core and s != largest}
    except KeyboardInterrupt:
        print("harness: interrupted: every compile in flight was stopped", file=sys.stderr)
        return common.EXIT_INTERRUPTED
    by_name = {k.name: r for k, r in zip(core, rows, strict=True)}
    shown = [by_name[k.name] if k.name in by_name else own[k.name][-1] for k in chosen]
    print(tables.build_table(shown, width=width))
    skipped = [f"- {r['kernel']} at {r['size']}: {r['message']}" for own_rows in own.values()
               for r in own_rows if r["status"] == "skipped"]
    if skipped:
        print("\nNot built at these sizes (its spec's constraints):\n" + "\n".join(skipped))
    if largest:
        at[largest] = [r for r in rows if "registers" in r]
    failures = [f"- {r['kernel']}: {r['status']}: {_first_problem(r['message'])}"
                for r in rows + [r for own_rows in own.values() for r in own_rows]
                if r["status"] == "compile error"]
    failures += [f"- {r['kernel']} at {_size_text(s)}: {r['status']}: {r['message']}"
                 for s in sizes for r in at.get(s, []) if r["status"] == "cannot launch"]
    failures += [f"- {r['kernel']} at {r['size']}: {r['status']}: {r['message']}"
                 for own_rows in own.values() for r in own_rows
                 if r["status"] == "cannot launch"]
    failures = list(dict.fromkeys(failures))  # a size asked twice is said once
    if failures:
        print("\nFails without a GPU already (`harness build KERNEL` shows a whole compiler "
              "log):\n" + "\n".join(failures))
        common.say(f"harness: {len(failures)} failure(s) found offline; `harness run` needs a "
                   "GPU to check and time the rest")
        return common.EXIT_FAILED
    raise common.NoGpu("`harness run` needs a GPU; the report above is what it can say "
                       "without one")


def builds_itself(kernel: Kernel) -> bool:
    """Whether ``kernel``'s kind builds its kernels itself offline (Kind.offline_rows)."""
    return _own_rows(kinds.of(kernel.spec))


def runs_offline(kind: Kind) -> bool:
    """Whether ``harness run`` without a GPU takes ``kind``'s kernels: a kind run takes, or
    one that builds its kernels itself offline (Kind.offline_rows)."""
    return kind.takes("run") or _own_rows(kind)


def _own_rows(kind: Kind) -> bool:
    return type(kind).offline_rows is not Kind.offline_rows


def _size_text(size) -> str:
    return "x".join(map(str, size))


_DIAGNOSTIC = re.compile(r"^\S.*:\d+: (?:error|catastrophic error|fatal)\b.*$", re.MULTILINE)


def _first_problem(message: str) -> str:
    """A compile error in one line: its first diagnostic (file:line: error: ...), else its first
    line."""
    found = _DIAGNOSTIC.search(message)
    return found[0].strip() if found else message.strip().splitlines()[0]
