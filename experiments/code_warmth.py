"""Why a compare reads small GEMMs slower than a run, and how far placement moves cuBLAS (issue 21).

    python3 experiments/code_warmth.py [--size 512 --size 1024] [--report-dir reports]
        [KERNEL ...]

At 512 and 1024 `harness compare` of the 18 tensor-core rows read cuBLAS 0.3-0.5 us slower than
two runs did beside the round's first kernel and beside the kernels with a 16-bit C, and every
kernel 0.1-0.3 us slower (compare-20261126-113152). In a run's round (kernel, cuBLAS,
calibration) two launches run between two of a kernel's own; in a compare round 36 do. The
guess tested here: the SMs' instruction caches, which an L2 flush does not empty, hold a
launch's code in a run and have lost it in a compare. Per size, in one process:

- ``pair``: each kernel and its cuBLAS timed as `harness run` times them (over the same 8
  placements), with and without the primer (``TimingOptions.prime_below_ms``: an untimed
  launch of itself before each timed one);
- ``round``: all of them in one round, each followed by its own cuBLAS, as `harness compare`
  times them, with and without the primer;
- ``copies``: cuBLAS of each set of types timed alone on each of its 8 placements (how far its
  time depends on where its operands lie);
- ``fresh``: the pair, primed, over two fresh sets of 8 placements and two of 32 (how far the
  median over placements moves with the addresses a process gets).

The primer runs on the placement of the round before, so it warms code, not the operands'
translations: if it closes the gap, the cause is not the TLB. Launches are not checked here:
every kernel is the default run's, checked there. Writes
reports/<gpu>/code-warmth-<date>.{json,md}.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

from tabulate import tabulate

from harness.gpu.timing import Timer
from harness.kernels.registry import DEFAULT_KERNEL_DIRS, PROJECT_ROOT, load_registry
from harness.kinds.gemm import measure
from harness.kinds.gemm.session import GemmSession
from harness.report import files

KERNELS = """11_mma_sync_bf16:m128n256k64s4c1 11_mma_sync_fp16:m128n256k32s4
  12_mma_tma_bf16:m256n128e 12_mma_tma_fp16:m256n128e 13_mma_persist_bf16:m256n128l3g8e
  13_mma_persist_fp16:m256n128l3g8 14_mma_cluster_bf16:m256n128e 14_mma_cluster_fp16:m256n128e
  15_wgmma_tma_bf16:m128n256 15_wgmma_tma_fp16:m128n256 16_wgmma_ws_bf16:m128n256
  16_wgmma_ws_fp16:m128n256 17_wgmma_persist_bf16:g16 17_wgmma_persist_fp16:g16
  18_wgmma_cluster_bf16:c2g8 18_wgmma_cluster_fp16:c2g8 19_wgmma_epi_bf16:s4e64
  19_wgmma_epi_fp16:s4e64""".split()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels", nargs="*", default=KERNELS)
    parser.add_argument("--size", type=int, action="append")
    parser.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports")
    args = parser.parse_args()
    sizes = args.size or [512, 1024]
    kernels = load_registry(DEFAULT_KERNEL_DIRS).select(args.kernels)
    rows = []

    def row(**fields) -> None:
        rows.append(fields)
        print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in fields.items()), flush=True)

    with GemmSession.open() as session:
        base = session.timer.options
        timers = {primed: Timer(session.stream, session.device.l2_bytes, session.clocks,
                                replace(base, prime_below_ms=base.prime_below_ms if primed
                                        else 0.0)) for primed in (False, True)}
        for size in sizes:
            m = n = k = size
            live = []
            for kernel in kernels:
                gemm = session.load(kernel)
                ops = session.timing_operands(kernel, m, n, k)
                live.append((kernel, gemm, ops, session.placements(kernel, ops)))
            for primed, timer in timers.items():
                for kernel, gemm, ops, copies in live:
                    launch, before = measure.kernel_timed(gemm, ops, session, copies)
                    blas, poison = session.baseline_timed(kernel, ops)
                    (kt, bt), _ = timer.time_interleaved([launch, blas], [before, poison])
                    row(size=size, mode="pair", primed=primed, copies=len(copies),
                        kernel=kernel.name, kernel_us=kt.median_ms * 1e3,
                        cublas_us=bt.median_ms * 1e3, pct=100 * bt.median_ms / kt.median_ms,
                        overhead_us=kt.launch_overhead_ms * 1e3, mhz=kt.sm_clock_mhz)
                launches, befores = [], []
                for kernel, gemm, ops, copies in live:
                    launch, before = measure.kernel_timed(gemm, ops, session, copies)
                    blas, poison = session.baseline_timed(kernel, ops)
                    launches += [launch, blas]
                    befores += [before, poison]
                timings, _ = timer.time_interleaved(launches, befores)
                for i, (kernel, *_) in enumerate(live):
                    kt, bt = timings[2 * i], timings[2 * i + 1]
                    row(size=size, mode="round", primed=primed, copies=8, kernel=kernel.name,
                        kernel_us=kt.median_ms * 1e3, cublas_us=bt.median_ms * 1e3,
                        pct=100 * bt.median_ms / kt.median_ms,
                        overhead_us=kt.launch_overhead_ms * 1e3, mhz=kt.sm_clock_mhz)
            seen = set()
            for kernel, _, _, copies in live:
                spec = kernel.spec
                types = (spec.precision, spec.c_type)
                if types in seen:
                    continue
                seen.add(types)
                for number, placed in enumerate(copies):
                    bt = timers[True].time(session.baseline_launcher(kernel, placed),
                                           before=partial(placed.poison_c, session.stream))
                    row(size=size, mode="copies", primed=True, copies=number,
                        kernel=f"cuBLAS {spec.precision} C {spec.c_type}",
                        cublas_us=bt.median_ms * 1e3, a_address=hex(placed.a.address))
            for trial, count in enumerate((8, 8, 32, 32)):
                made = {}
                for kernel, gemm, ops, _ in live:
                    spec = kernel.spec
                    types = (spec.precision, spec.layout_a, spec.layout_b, spec.layout_c,
                             spec.c_type, spec.has_d)
                    if types not in made:
                        made[types] = [session.operands(kernel, m, n, k, ops.seed)
                                       for _ in range(count)]
                    copies = made[types]
                    launch, before = measure.kernel_timed(gemm, copies[0], session, copies)
                    blas, poison = session.baseline_timed(kernel, copies[0], copies)
                    (kt, bt), _ = timers[True].time_interleaved([launch, blas], [before, poison])
                    row(size=size, mode=f"fresh{trial}", primed=True, copies=count,
                        kernel=kernel.name, kernel_us=kt.median_ms * 1e3,
                        cublas_us=bt.median_ms * 1e3, pct=100 * bt.median_ms / kt.median_ms)
                for copies in made.values():
                    for placed in copies:
                        placed.close()
        facts = session.facts()
    body = [f"- {__doc__.split(chr(10) + chr(10))[1]}", ""]
    for size in sizes:
        table = []
        for kernel in kernels:
            got = {(r["mode"], r["primed"]): r for r in rows
                   if r["size"] == size and r["kernel"] == kernel.name}
            pair0, pair1 = got[("pair", False)], got[("pair", True)]
            round0, round1 = got[("round", False)], got[("round", True)]
            fresh = [got[(f"fresh{t}", True)]["pct"] for t in range(4)]
            table.append([kernel.name, *(f"{r['kernel_us']:.2f}/{r['cublas_us']:.2f}"
                                         for r in (pair0, round0, pair1, round1)),
                          f"{100 * (round0['pct'] / pair0['pct'] - 1):+.1f}",
                          f"{100 * (round1['pct'] / pair1['pct'] - 1):+.1f}",
                          f"{100 * (fresh[1] / fresh[0] - 1):+.1f}",
                          f"{100 * (fresh[3] / fresh[2] - 1):+.1f}"])
        body += [f"## {size}", "", tabulate(table, headers=[
            "kernel", "pair us (K/cuBLAS)", "round", "pair primed", "round primed",
            "round vs pair %", "primed: round vs pair %", "8 copies: set 2 vs 1 %",
            "32 copies: set 2 vs 1 %"], tablefmt="github"), ""]
        spread = []
        for name in sorted({r["kernel"] for r in rows if r["mode"] == "copies"
                            and r["size"] == size}):
            us = [r["cublas_us"] for r in rows if r["mode"] == "copies" and r["size"] == size
                  and r["kernel"] == name]
            spread.append([name, " ".join(f"{u:.2f}" for u in us),
                           f"{100 * (max(us) - min(us)) / statistics.median(us):.1f}"])
        body += [tabulate(spread, headers=["cuBLAS alone on each placement", "us",
                                           "range %"], tablefmt="github"), ""]
    text = "\n".join(body)
    print(text)
    meta = files.metadata(facts, ["python3", *sys.argv], {}, [], [])
    stem = args.report_dir / files.gpu_slug(facts["name"]) / f"code-warmth-{files.run_stamp()}"
    files.write_table_report(meta, rows, stem, "Code warmth and placements at small sizes",
                             body)
    print(f"\nwritten: {stem}.json, {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
