"""Why a compare reads mma.sync rows lower than a run at 4096, and what makes them agree (issue 21).

    python3 experiments/power_context.py [--size 4096] [--report-dir reports] [KERNEL ...]

At 4096 `harness compare` of the 18 tensor-core rows read every mma.sync row 0.4-3.3% lower in
% of cuBLAS than two runs did, and the wgmma rows 0-1% higher (compare-20261126-123806,
-130533). Everything ran slower in the compare (cuBLAS bf16 195-201 us against 179-191 in the
runs). Two guesses: the compare's round of 18 pairs runs for seconds without a break and the
card is hotter (a run times each pair for about 0.6 s after the GPU idled through its check);
or the power limiter sets the clock from the mix of the round, where in a run it follows one
pair. Per size, in one process, the pairs each timed as `harness run` times them, and all of
them in one round as `harness compare` does, in this order:

- ``pair-cool``: each pair after 2 s of idle GPU (as after a run's check);
- ``round``: all pairs in one round (budget scaled by the pairs, as compare);
- ``pair-hot``: each pair straight after the round and each other, no idle;
- ``pair-soak``: each pair after a warm-up of 3 s of itself;
- ``dwell-2``, ``dwell-20``: the round again, each pair's timed launches preceded in every round
  by about 2 (20) ms of untimed launches of that pair (the limiter then follows the pair, if
  it acts within that time);
- ``round-again``: the round once more, the card now hot.

``--modes`` picks others, each ``MODE`` or ``MODE@R``: with ``@R`` every pair's kernel is
preceded in every round by a rest of R times the pair's GPU time (a one-thread spin, idle
SMs), so that the card draws well under its power cap and its clock no longer follows what
ran in the seconds before (``round@1``: the round at half duty).

NVML's temperature and board power are read at each mode's start and end. Launches are not
checked here: every kernel is the default run's, checked there. Writes
reports/<gpu>/power-context-<date>.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
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
MODES = ("pair-cool", "round", "pair-hot", "pair-soak", "dwell-2", "dwell-20", "round-again")


def _nvml():
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:  # no NVML: the figures go without temperatures
        return lambda: (float("nan"), float("nan"))

    def read() -> tuple[float, float]:
        return (float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
                pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3)
    return read


def _rest(session, before, ms: float):
    """``before`` preceded by ``ms`` of a one-thread spin (the SMs idle)."""
    def run() -> None:
        session.timer.kernels.spin(ms)
        before()
    return run


def _pair_ms(size: int) -> float:
    """About what a pair (kernel, cuBLAS) and their flushes take at ``size`` (0.6 ms at 4096)."""
    return max(0.6 * (size / 4096) ** 3, 0.01)


def _dwell(launches, before, reps: int):
    """``before`` preceded by ``reps`` untimed launches of the pair."""
    def run() -> None:
        for _ in range(reps):
            for launch in launches:
                launch()
        before()
    return run


def _pairs(session, live, size, row, mode: str, timer: Timer, idle_s: float = 0.0,
           rest: float = 0.0) -> None:
    """Each kernel and its cuBLAS timed as `harness run` times them, after ``idle_s``."""
    for kernel, gemm, ops, copies in live:
        time.sleep(idle_s)
        launch, before = measure.kernel_timed(gemm, ops, session, copies)
        blas, poison = session.baseline_timed(kernel, ops)
        if rest > 0:
            before = _rest(session, before, rest * _pair_ms(size))
        (kt, bt), _ = timer.time_interleaved([launch, blas], [before, poison])
        _row(row, size, mode, kernel, kt, bt)


def _round(session, live, size, row, mode: str, dwell_ms: float = 0.0,
           rest: float = 0.0) -> None:
    """All kernels in one round, each followed by its cuBLAS, as `harness compare` times
    them; with ``dwell_ms``, each pair's timed launches preceded by about that much of
    untimed launches of the pair."""
    launches, befores = [], []
    for kernel, gemm, ops, copies in live:
        launch, before = measure.kernel_timed(gemm, ops, session, copies)
        blas, poison = session.baseline_timed(kernel, ops)
        if dwell_ms > 0:
            raw = [launches.launcher(gemm, ops, session), session.baseline_launcher(kernel, ops)]
            before = _dwell(raw, before, max(1, round(dwell_ms / _pair_ms(size))))
        if rest > 0:
            before = _rest(session, before, rest * _pair_ms(size))
        launches += [launch, blas]
        befores += [before, poison]
    scale = len(live) * (3 if dwell_ms > 0 else 1)
    timings, _ = session.timer.time_interleaved(launches, befores, budget_scale=scale)
    for i, (kernel, *_) in enumerate(live):
        _row(row, size, mode, kernel, timings[2 * i], timings[2 * i + 1])


def _row(row, size, mode, kernel, kt, bt) -> None:
    row(size=size, mode=mode, kernel=kernel.name, kernel_us=kt.median_ms * 1e3,
        cublas_us=bt.median_ms * 1e3, pct=100 * bt.median_ms / kt.median_ms,
        mhz=kt.sm_clock_mhz, se=kt.median_rel_se_pct, blas_se=bt.median_rel_se_pct)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels", nargs="*", default=KERNELS)
    parser.add_argument("--size", type=int, action="append")
    parser.add_argument("--modes", help="comma-separated MODE or MODE@R (default: "
                        + ",".join(MODES) + ")")
    parser.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports")
    args = parser.parse_args()
    sizes = args.size or [4096]
    modes = args.modes.split(",") if args.modes else list(MODES)
    kernels = load_registry(DEFAULT_KERNEL_DIRS).select(args.kernels)
    nvml = _nvml()
    rows, states = [], []

    def row(**fields) -> None:
        rows.append(fields)
        print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in fields.items()), flush=True)

    with GemmSession.open() as session:
        base = session.timer.options
        soak = Timer(session.stream, session.device.l2_bytes, session.clocks,
                     replace(base, warmup_ms=3000.0))
        for size in sizes:
            m = n = k = size
            live = []
            for kernel in kernels:
                gemm = session.load(kernel)
                ops = session.timing_operands(kernel, m, n, k)
                live.append((kernel, gemm, ops, session.placements(kernel, ops)))

            for mode in modes:
                start, t0 = nvml(), time.perf_counter()
                name, _, ratio = mode.partition("@")
                rest = float(ratio or 0)
                if name == "pair-cool":
                    _pairs(session, live, size, row, mode, session.timer, 2.0, rest)
                elif name == "pair-hot":
                    _pairs(session, live, size, row, mode, session.timer, rest=rest)
                elif name == "pair-soak":
                    _pairs(session, live, size, row, mode, soak, rest=rest)
                elif name.startswith("dwell-"):
                    _round(session, live, size, row, mode, float(name.split("-")[1]), rest)
                else:
                    _round(session, live, size, row, mode, rest=rest)
                end = nvml()
                states.append([size, mode, f"{time.perf_counter() - t0:.1f}",
                               f"{start[0]:.0f} -> {end[0]:.0f}",
                               f"{start[1]:.0f} -> {end[1]:.0f}"])
                print(f"== {mode} at {size}: {states[-1]}", flush=True)
        facts = session.facts()
    body = [f"- {__doc__.split(chr(10) + chr(10))[1]}", ""]
    for size in sizes:
        got = {(r["mode"], r["kernel"]): r for r in rows if r["size"] == size}
        table = []
        for kernel in kernels:
            ref = got[(modes[0], kernel.name)]["pct"]
            pcts = [got[(mode, kernel.name)]["pct"] for mode in modes[1:]]
            table.append([kernel.name, f"{ref:.1f}",
                          *(f"{p:.1f} ({100 * (p / ref - 1):+.1f})" for p in pcts)])
        body += [f"## {size}: % of cuBLAS (change from {modes[0]}, %)", "",
                 tabulate(table, headers=["kernel", *modes], tablefmt="github"), ""]
        clocks = []
        for mode in modes:
            picked = [r for r in rows if r["size"] == size and r["mode"] == mode]
            clocks.append([mode, " ".join(f"{r['mhz']:.0f}" for r in picked),
                           " ".join(f"{r['cublas_us']:.1f}" for r in picked)])
        body += [tabulate(clocks, headers=["mode", "median SM MHz per row",
                                           "cuBLAS us per row"], tablefmt="github"), ""]
    body += [tabulate(states, headers=["size", "mode", "wall s", "GPU temperature C",
                                       "board W"], tablefmt="github"), ""]
    text = "\n".join(body)
    print(text)
    meta = files.metadata(facts, ["python3", *sys.argv], {}, [], [])
    stem = args.report_dir / files.gpu_slug(facts["name"]) / f"power-context-{files.run_stamp()}"
    files.write_table_report(meta, rows, stem, "Power context of a compare and a run", body)
    print(f"\nwritten: {stem}.json, {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
