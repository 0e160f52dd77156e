"""The instructions one trip around a kernel's main loop issues per warp, read from its SASS at
no device cost: the loop is the innermost backward branch whose body holds both an HGMMA and
a MUFU (an attention rung's tile loop), and the trip counted is the shortest path from its
head to that branch (the path an unmasked tile takes, where masked tiles run extra blocks).
Branches out of the loop (to the divergence stubs after the kernel's end) count as not taken.

    python3 experiments/sass_loop.py FILE.cu[:VARIANT] [--arch sm_90]

FILE may be any copy of an attention kernel (``git show REV:cu/... > /tmp/x.cu`` for an older
one). Prints the loop's address range, the path's instruction count and its opcode mix, and
the issue cycles per SM per trip for a given number of warps running the loop (four
schedulers a Hopper SM).
"""

from __future__ import annotations

import argparse
import collections
import re
import sys

LINE = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)(.*);")


def instructions(sass: str) -> list[tuple[int, str, str, bool]]:
    """(address, opcode, operands, predicated) for every instruction line."""
    out = []
    for line in sass.splitlines():
        m = LINE.match(line)
        if m:
            out.append((int(m.group(1), 16), m.group(3), m.group(4), bool(m.group(2))))
    return out


def _target(operands: str) -> int | None:
    m = re.search(r"0x([0-9a-f]+)", operands)
    return int(m.group(1), 16) if m else None


def main_loop(ins) -> tuple[int, int]:
    """(head, tail) of the innermost predicated backward branch holding HGMMA and MUFU."""
    found = []
    for address, op, operands, predicated in ins:
        target = _target(operands)
        if op == "BRA" and predicated and target is not None and target < address:
            ops = [o for a, o, _, _ in ins if target <= a <= address]
            if any(o.startswith("HGMMA") for o in ops) and any(o.startswith("MUFU") for o in ops):
                found.append((address - target, target, address))
    if not found:
        raise SystemExit("no loop with both HGMMA and MUFU in this kernel's SASS")
    _, head, tail = min(found)
    return head, tail


def shortest_trip(ins, head: int, tail: int) -> list[str]:
    """The opcodes on the shortest path from ``head`` to the backward branch at ``tail``."""
    body = [(a, o, r, p) for a, o, r, p in ins if head <= a <= tail]
    index = {a: i for i, (a, _, _, _) in enumerate(body)}
    best: list[list[str] | None] = [None] * (len(body) + 1)
    best[len(body) - 1] = [body[-1][1]]
    for i in range(len(body) - 2, -1, -1):
        a, op, operands, predicated = body[i]
        choices = []
        target = _target(operands) if op.startswith("BRA") else None
        inside = target is not None and head <= target <= tail and target > a
        if not op.startswith("BRA") or predicated or not inside:
            if best[i + 1] is not None:
                choices.append(best[i + 1])  # fall through (an exit branch counts as not taken)
        if inside and best[index[target]] is not None:
            choices.append(best[index[target]])
        if choices:
            best[i] = [op, *min(choices, key=len)]
    return best[0] or []


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--warps", type=int, default=8, help="warps running the loop per SM")
    args = parser.parse_args(argv)
    from harness.compiler import sass
    from harness.kinds.attention.build import build, load

    path, _, variant = args.kernel.partition(":")
    text = sass.disassemble(build(load(path), args.arch, variant or None).cubin)
    ins = instructions(text)
    head, tail = main_loop(ins)
    trip = shortest_trip(ins, head, tail)
    mix = collections.Counter(op.split(".")[0] for op in trip)
    print(f"{args.kernel} ({args.arch}): main loop {head:#x}-{tail:#x}; shortest trip "
          f"{len(trip)} instructions a warp; {args.warps} warps: "
          f"{args.warps * len(trip) / 4:.0f} issue cycles per SM (4 schedulers)")
    print("  " + ", ".join(f"{op} {n}" for op, n in mix.most_common(16)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
