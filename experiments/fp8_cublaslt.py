"""cuBLASLt's FP8 GEMM on this GPU (issue 36): the baseline the FP8 rungs are measured against
(harness/gpu/cublaslt.py), checked as any FP8 kernel is (harness/kinds/gemm/fp8/check.py) and timed
by the harness's method (harness.time).

Run on a GPU (sm_89 or later) from the project root with PYTHONPATH set:
python3 experiments/fp8_cublaslt.py [--seed N] [--sample-rows R]

For each size: e4m3 A (M x K) and B (N x K, K-major) drawn over the harness's FP8 spread
(every value exact), per-tensor scales 2^-3 and 2^2 (a product of scales that ignores either is
off by a power of two), a BF16 C poisoned with NaN before the call. The output is judged
against the float64 reference from the exact values: all of it at the small size, R random rows
at the large ones (every output is still looked at for NaN: one never written stays NaN). Then
timed: cold L2, warm-up, the median of at least 50 launches, with TFLOP/s, the SM clock over
the repetitions and the algorithm cuBLASLt chose.

Exit status: 0 all checks passed; 1 a check failed; 2 it could not run (no GPU, a GPU without
FP8, nvmath-python missing, cuBLASLt refusing the call)."""

from __future__ import annotations

import argparse
import sys

import numpy as np

import harness
from harness.errors import HarnessError
from harness.kinds.gemm.contents import FP8_SPREAD
from harness.kinds.gemm.fp8.check import Fp8Gemm, judge
from harness.kinds.gemm.fp8.formats import FORMATS
from harness.kinds.gemm.numerics import to_float64

SIZES = [(256, 512, 384), (4096, 4096, 4096), (8192, 8192, 4096)]
SCALES = (2.0 ** -3, 2.0 ** 2)
"""scale_a, scale_b."""
FORMAT = "e4m3"
C_TYPE = "bf16"
WHOLE_BELOW = 1 << 27
"""M N K up to which the whole output is judged (the walk's cost grows with M N K / 32)."""
MIN_REPS = 50
BF16_NAN_BITS = 0xFFFF


def bf16_non_finite(raw: np.ndarray) -> np.ndarray:
    """Where BF16 bit patterns are NaN or Inf (exponent all ones)."""
    return (raw & 0x7F80) == 0x7F80


def check_one(lt, stream, m: int, n: int, k: int, rng: np.random.Generator,
              sample_rows: int, bufs: dict) -> tuple[bool, str]:
    """One call on fresh operands, judged: (passed, what the judge said)."""
    from harness.gpu.driver import Buffer

    fmt = FORMATS[FORMAT]
    a = fmt.draw(rng, (m, k), FP8_SPREAD[FORMAT])
    b = fmt.draw(rng, (n, k), FP8_SPREAD[FORMAT])  # stored N x K: K-major
    bufs.update(a=Buffer(a.nbytes), b=Buffer(b.nbytes), c=Buffer(m * n * 2),
                scale_a=Buffer(4), scale_b=Buffer(4))
    bufs["a"].upload(a, stream)
    bufs["b"].upload(b, stream)
    bufs["scale_a"].upload(np.float32([SCALES[0]]), stream)
    bufs["scale_b"].upload(np.float32([SCALES[1]]), stream)
    bufs["c"].fill(BF16_NAN_BITS, 2, stream)
    lt.gemm_fp8(m, n, k, bufs["a"].address, bufs["b"].address, bufs["c"].address,
                bufs["scale_a"].address, bufs["scale_b"].address, FORMAT, FORMAT, C_TYPE)
    raw = bufs["c"].download(np.uint16, (m, n), stream)
    bad = bf16_non_finite(raw)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        return False, (f"non-finite or unwritten: {int(bad.sum())} of {raw.size} outputs are "
                       f"NaN or Inf (C was NaN before the call), first at (row, col) = {first}")
    if m * n * k <= WHOLE_BELOW:
        rows, where = np.arange(m), "the whole output"
    else:
        rows = np.sort(rng.choice(m, size=min(m, sample_rows), replace=False))
        where = f"{len(rows)} random rows of {m}"
    g = Fp8Gemm(a[rows], b.T, FORMAT, FORMAT, SCALES[0], SCALES[1], out=C_TYPE)
    verdict = judge(g, to_float64(raw[rows], C_TYPE))
    detail = (f"{verdict.message} over {where} (error norm {verdict.error_norm:.3g}, bound "
              f"{verdict.norm_bound:.3g})")
    return verdict.passed, detail


def run(seed: int, sample_rows: int) -> int:
    from harness.gpu.cublaslt import CublasLt, compute_name
    from harness.gpu.driver import Device, Stream, gpu_status

    gpu_status().require("the cuBLASLt FP8 baseline runs on a GPU")
    failed, rows = [], []
    with Device(0) as device:
        if device.compute_capability < (8, 9):
            raise HarnessError(f"{device.name} is sm_{device.compute_capability[0]}"
                               f"{device.compute_capability[1]}: FP8 GEMMs need sm_89 or later")
        stream = Stream()
        lt = CublasLt(stream)
        print(f"{device.name} (sm_{''.join(map(str, device.compute_capability))}, "
              f"{device.sm_count} SMs, max SM clock {device.max_sm_clock_mhz:.0f} MHz), driver "
              f"{device.driver_version}, cuBLASLt {lt.version_text} ({lt.version})")
        print(f"baseline: {compute_name(FORMAT, FORMAT, C_TYPE)}, scales {SCALES}, "
              f"seed {seed}")
        rng = np.random.default_rng(seed)
        try:
            for m, n, k in SIZES:
                bufs: dict = {}
                try:
                    ok, detail = check_one(lt, stream, m, n, k, rng, sample_rows, bufs)
                    print(f"{m}x{n}x{k}: check {'passed' if ok else 'FAILED'}: {detail}")
                    print(f"{m}x{n}x{k}: {lt.last_algo}")
                    if not ok:
                        failed.append((m, n, k))
                        continue

                    def launch(m=m, n=n, k=k, bufs=bufs):
                        lt.gemm_fp8(m, n, k, bufs["a"].address, bufs["b"].address,
                                    bufs["c"].address, bufs["scale_a"].address,
                                    bufs["scale_b"].address, FORMAT, FORMAT, C_TYPE)

                    timed = harness.time(launch, stream=stream, min_reps=MIN_REPS)
                    rows.append(((m, n, k), timed, lt.last_algo))
                    t = timed.timing
                    tflops = 2.0 * m * n * k / (timed.median_ms * 1e-3) / 1e12
                    print(f"{m}x{n}x{k}: {tflops:8.1f} TFLOP/s, median {timed.median_ms * 1e3:.1f}"
                          f" us (p20 {t.p20_ms * 1e3:.1f}, p80 {t.p80_ms * 1e3:.1f}), {t.reps} "
                          f"reps ({t.stop}), SM clock {t.sm_clock_mhz:.0f} MHz "
                          f"[{t.sm_clock_min_mhz:.0f}, {t.sm_clock_max_mhz:.0f}], held by "
                          f"{t.clock_limits or 'unknown'}, {t.regime}, cold L2 {t.cold_l2}, "
                          f"graph {t.graph}")
                    if t.reps < MIN_REPS:
                        print(f"  warning: only {t.reps} repetitions (the budget ran out before "
                              f"{MIN_REPS})")
                finally:
                    stream.synchronize("fp8_cublaslt")
                    for buf in bufs.values():
                        buf.close()
        finally:
            lt.close()
    print()
    print(f"{'M x N x K':>18}  {'TFLOP/s':>8}  {'median us':>10}  {'SM MHz':>7}  algorithm")
    for (m, n, k), timed, algo in rows:
        tflops = 2.0 * m * n * k / (timed.median_ms * 1e-3) / 1e12
        print(f"{f'{m}x{n}x{k}':>18}  {tflops:8.1f}  {timed.median_ms * 1e3:10.1f}  "
              f"{timed.timing.sm_clock_mhz:7.0f}  {algo}")
    if failed:
        print(f"check FAILED at {', '.join('x'.join(map(str, s)) for s in failed)}",
              file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--sample-rows", type=int, default=64,
                        help="rows judged at the large sizes (default 64)")
    args = parser.parse_args(argv)
    try:
        return run(args.seed, args.sample_rows)
    except HarnessError as exc:  # NoGpu and DeviceError among them
        print(f"fp8_cublaslt: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
