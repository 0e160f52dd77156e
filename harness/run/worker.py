"""The GPU side of ``harness run``: one process per kernel, so a fault or a hang costs only it.

Reads a job (JSON) on stdin; writes events as lines ``HARNESS-EVENT {json}`` on stdout: one
``device`` event, ``progress`` events, and one ``result`` per size, each as soon as it is known.
For each size: check the kernel (odd shapes, several seeds, NaN-poisoned output, a repeat run for
races, the timed size itself), then time it and cuBLAS on the same buffers, one after the other.
"""

from __future__ import annotations

import json
import math
import sys
import traceback
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from harness.bench import numerics
from harness.bench.ceiling import Ceilings, device_facts
from harness.bench.gemm import LoadedGemm
from harness.build.compile import compile_kernel
from harness.errors import HarnessError, LaunchError
from harness.gpu.clocks import ClockSampler
from harness.gpu.cublas import Cublas, compute_name
from harness.gpu.driver import Buffer, Device, Stream
from harness.gpu.timing import Timer, TimingOptions
from harness.kernels.registry import Kernel
from harness.kernels.spec import read_spec
from harness.stats import Summary, gflops, peak_gflops

EVENT_PREFIX = "HARNESS-EVENT "
# Shapes that are not multiples of any tile, several seeds each: odd ones for kernels with no
# constraints, ones with N and K multiples of 4 (but of no tile) for float4 kernels, and ones
# with N and K multiples of 8 (16-byte rows of 16-bit inputs: cp.async and ldmatrix kernels).
CHECK_SHAPES = ((37, 45, 29), (127, 253, 61), (257, 129, 300), (131, 196, 68), (515, 260, 132),
                (133, 264, 104), (517, 392, 200))
CHECK_SEEDS = (11, 12, 13)


def emit(event: str, **fields) -> None:
    sys.stdout.write(EVENT_PREFIX + json.dumps({"event": event, **fields}, default=_json) + "\n")
    sys.stdout.flush()


def _json(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


class Operands:
    """A, B, C on the device for one shape, with their float64 values kept for references."""

    def __init__(self, stream: Stream, m: int, n: int, k: int, precision: str, layout_b: str,
                 seed: int, with_c: bool = False):
        rng = np.random.default_rng(seed)
        self.m, self.n, self.k = m, n, k
        a, self.a64 = numerics.random_operand(rng, (m, k), precision)
        b, self.b64 = numerics.random_operand(rng, (k, n), precision)
        self.c64 = None
        if with_c:
            self.c64 = rng.uniform(-1, 1, (m, n)).astype(np.float32).astype(np.float64)
        self.a, self.b, self.c = Buffer(a.nbytes), Buffer(b.nbytes), Buffer(m * n * 4)
        self.a.upload(a, stream)
        self.b.upload(np.ascontiguousarray(b.T) if layout_b == "col" else b, stream)

    def reset_c(self, stream: Stream) -> None:
        """NaN-poison C, or restore its random start values when beta is tested."""
        if self.c64 is None:
            self.c.fill_u32(numerics.NAN_WORD, stream)
        else:
            self.c.upload(self.c64.astype(np.float32), stream)

    def result(self, stream: Stream) -> np.ndarray:
        stream.synchronize("kernel run")
        return self.c.download(np.float32, (self.m, self.n), stream)

    def close(self) -> None:
        for buf in (self.a, self.b, self.c):
            buf.close()


_REFERENCES: dict[tuple, np.ndarray] = {}
_CACHED_REFERENCES = 3  # the timed sizes of a run (2048, 4096, 8192: 0.7 GB of float64)


def _reference(ops: Operands, key: tuple) -> np.ndarray:
    """The float64 reference of a timed size, reused by every kernel checked on the same
    inputs (same shape and seed give the same operands): at 8192 it costs seconds of CPU."""
    if ops.m * ops.n < 1 << 20:
        return numerics.reference(ops.a64, ops.b64, key[5], key[6], ops.c64)
    if key not in _REFERENCES:
        if len(_REFERENCES) >= _CACHED_REFERENCES:
            _REFERENCES.pop(next(iter(_REFERENCES)))
        _REFERENCES[key] = numerics.reference(ops.a64, ops.b64, key[5], key[6], ops.c64)
    return _REFERENCES[key]


def check_one(gemm: LoadedGemm, stream: Stream, m: int, n: int, k: int, seed: int,
              alpha: float = 1.0, beta: float = 0.0, repeat: bool = False,
              baseline: Cublas | None = None) -> list[numerics.CheckResult]:
    """Run the kernel (and the baseline if given) on fresh inputs and compare with float64."""
    spec = gemm.kernel.spec
    ops = Operands(stream, m, n, k, spec.precision, spec.layout_b, seed,
                   with_c=beta != 0.0)
    try:
        ref = _reference(ops, (m, n, k, seed, spec.precision, alpha, beta))
        ops.reset_c(stream)
        gemm.launcher(m, n, k, alpha, ops.a.address, ops.b.address, beta, ops.c.address,
                      stream)()
        out = ops.result(stream)
        results = [numerics.compare(out, ref, spec.precision, k=k, seed=seed, alpha=alpha,
                                    beta=beta)]
        if repeat:
            ops.reset_c(stream)
            gemm.launcher(m, n, k, alpha, ops.a.address, ops.b.address, beta, ops.c.address,
                          stream)()
            again = ops.result(stream)
            if not np.array_equal(out.view(np.uint32), again.view(np.uint32)):
                differ = int(np.count_nonzero(out.view(np.uint32) != again.view(np.uint32)))
                results.append(numerics.CheckResult(
                    False, m, n, k, seed, alpha, beta, math.nan, math.nan, differ, 0, 0.0,
                    f"race: {differ} outputs differ between two identical runs"))
        if baseline is not None:
            ops.reset_c(stream)
            baseline.gemm(spec.precision, m, n, k, alpha, ops.a.address, ops.b.address, beta,
                          ops.c.address, spec.layout_b)
            base = numerics.compare(ops.result(stream), ref, spec.precision, k=k, seed=seed,
                                    alpha=alpha, beta=beta)
            if not base.passed:
                raise HarnessError(f"cuBLAS itself failed the check at {m}x{n}x{k}: "
                                   f"{base.message}; the reference or the operands are wrong")
        return results
    finally:
        ops.close()


class Session:
    """What every kernel of a job shares: device, stream, clocks, cuBLAS, timer."""

    def __init__(self, job: dict):
        self.job = job
        self.device = Device(0)
        self.stream = Stream()
        self.clocks = ClockSampler(self.device.pci_bus_id)
        self.blas = Cublas(self.stream)
        self.timer = Timer(self.stream, self.device.l2_bytes, self.clocks,
                           TimingOptions(**job["timing"]))
        self.baseline_once = job.get("baseline") == "once"
        self._baselines: dict[tuple, object] = {}
        # the mma.sync ceiling of a precision, measured the first time a row of it is timed
        self.ceilings = Ceilings(self.device, self.timer,
                                 say=lambda line: emit("progress", kernel="ceiling", stage=line))
        emit("device", **device_facts(self.device, self.clocks),
             cublas_version=self.blas.version)

    def time_baseline(self, precision: str, layout_b: str, ops: Operands):
        """cuBLAS on the kernel's buffers, timed now (or once per shape with baseline=once)."""
        key = (precision, layout_b, ops.m, ops.n, ops.k)
        if self.baseline_once and key in self._baselines:
            return self._baselines[key]
        timing = self.timer.time(partial(self.blas.gemm, precision, ops.m, ops.n, ops.k, 1.0,
                                         ops.a.address, ops.b.address, 0.0, ops.c.address,
                                         layout_b))
        self._baselines[key] = timing
        return timing


def run_job(job: dict) -> None:
    session = Session(job)
    kernels = [Kernel(e["name"], read_spec(Path(e["file"])), tuple(tuple(p) for p in e["params"]))
               for e in job["kernels"]]
    if job.get("mode") == "compare":
        run_compare(session, kernels)
        return
    for kernel in kernels:
        emit("kernel_start", kernel=kernel.name)
        try:
            run_kernel(session, kernel)
        except LaunchError as exc:  # refused before any launch: the context is intact
            emit("kernel_error", kernel=kernel.name, kind="LaunchError", message=str(exc))


@dataclass
class Prepared:
    """A kernel loaded, with the results of its odd-shape checks."""

    kernel: Kernel
    compiled: object
    gemm: LoadedGemm
    checks: list
    skipped_checks: list


def prepare(session: Session, kernel: Kernel) -> Prepared:
    """Compile, load, and check ``kernel`` on the odd shapes (fresh inputs, several seeds)."""
    device, stream = session.device, session.stream
    compiled = compile_kernel(kernel, device.arch.name)
    gemm = LoadedGemm(device, kernel, compiled, session.job.get("carveout_pct"))
    checks: list[numerics.CheckResult] = []
    skipped: list[str] = []
    emit("progress", kernel=kernel.name, stage="checking odd shapes")
    for i, (m, n, k) in enumerate(CHECK_SHAPES):
        if kernel.shape_problems(m, n, k):
            skipped += kernel.shape_problems(m, n, k)
            continue
        for seed in CHECK_SEEDS:
            checks += check_one(gemm, stream, m, n, k, seed + 100 * i, repeat=seed == 11)
        checks += check_one(gemm, stream, m, n, k, 7 + i, alpha=0.75, beta=-0.5)
    for reason in skipped:
        emit("progress", kernel=kernel.name, stage=f"check skipped: {reason}")
    return Prepared(kernel, compiled, gemm, checks, skipped)


def checked_row(session: Session, prep: Prepared, m: int, n: int, k: int) -> dict:
    """The row for one size, with status 'skipped' or 'FAIL' (final) or 'checked' (time it)."""
    kernel, compiled, gemm = prep.kernel, prep.compiled, prep.gemm
    precision = kernel.spec.precision
    row = {"kernel": kernel.name, "m": m, "n": n, "k": k, "precision": precision,
           "cublas_compute": compute_name(precision),
           "registers": compiled.resources.registers,
           "static_smem_bytes": compiled.resources.static_smem_bytes,
           "spill_store_bytes": compiled.resources.spill_store_bytes,
           "spill_load_bytes": compiled.resources.spill_load_bytes,
           "block_threads": kernel.block_threads, "check_skips": prep.skipped_checks}
    problems = kernel.shape_problems(m, n, k)
    if problems:
        return {**row, "status": "skipped", "message": "; ".join(problems)}
    shape = gemm.prepare(m, n, k)
    occ = gemm.occupancy(m, n, k)
    row.update(dynamic_smem_bytes=shape.dynamic_smem_bytes, grid=list(shape.grid),
               blocks_per_sm=occ["driver_blocks_per_sm"],
               blocks_per_sm_offline=occ["offline"]["blocks_per_sm"],
               occupancy_pct=occ["offline"]["occupancy_pct"],
               limiter=occ["offline"]["limiter"], occupancy_agree=occ["agree"],
               waves_per_sm=occ["waves_per_sm"])
    emit("progress", kernel=kernel.name, size=[m, n, k], stage="checking the timed size")
    size_checks = check_one(gemm, session.stream, m, n, k, seed=m * 7 + n * 3 + k,
                            baseline=session.blas)
    all_checks = prep.checks + size_checks
    failed = [c for c in all_checks if not c.passed]
    row["checks_passed"] = len(all_checks) - len(failed)
    row["checks_total"] = len(all_checks)
    row["max_rel_err"] = max((c.rel_err_norm for c in all_checks), default=math.nan)
    if failed:
        f = failed[0]
        return {**row, "status": "FAIL",
                "message": f"{len(failed)} of {len(all_checks)} checks failed; first at "
                           f"{f.m}x{f.n}x{f.k} seed {f.seed} alpha {f.alpha} beta {f.beta}: "
                           f"{f.message}"}
    return {**row, "status": "checked"}


def timed_row(session: Session, row: dict, kt, bt) -> dict:
    """``row`` completed with the kernel's timing ``kt`` and cuBLAS's ``bt``."""
    m, n, k = row["m"], row["n"], row["k"]
    device = session.device
    flops_per_clock = device.arch.fma_flops_per_clock_per_sm.get(row["precision"], math.nan)
    k_gflops, b_gflops = gflops(m, n, k, kt.median_ms), gflops(m, n, k, bt.median_ms)
    peak = peak_gflops(flops_per_clock, device.sm_count, kt.sm_clock_mhz)
    ceiling = session.ceilings.get(row["precision"])
    if ceiling is not None:  # bf16/fp16: the share of what mma.sync can issue on this GPU
        row = {**row, "ceiling_gflops": ceiling.gflops, "pct_ceiling": 100.0 * k_gflops
               / ceiling.gflops, "ceiling_instruction": ceiling.instruction,
               "ceiling_sm_clock_mhz": ceiling.sm_clock_mhz}
    return {
        **row, "status": "pass", "message": "ok",
        "gflops": k_gflops, "median_ms": kt.median_ms, "p20_ms": kt.p20_ms,
        "p80_ms": kt.p80_ms, "reps": kt.reps, "cold_l2": kt.cold_l2,
        "sm_clock_mhz": kt.sm_clock_mhz, "sm_clock_min_mhz": kt.sm_clock_min_mhz,
        "sm_clock_max_mhz": kt.sm_clock_max_mhz, "queue_ahead_ms": kt.queue_ahead_ms,
        "cublas_gflops": b_gflops, "cublas_median_ms": bt.median_ms,
        "cublas_p20_ms": bt.p20_ms, "cublas_p80_ms": bt.p80_ms, "cublas_reps": bt.reps,
        "cublas_sm_clock_mhz": bt.sm_clock_mhz, "cublas_queue_ahead_ms": bt.queue_ahead_ms,
        "clock_limits": kt.clock_limits, "cublas_clock_limits": bt.clock_limits,
        # the power pass (TimingOptions.power_s): NaN without one
        "power_w": kt.power_w, "power_span_s": kt.power_span_s,
        "power_gflops": gflops(m, n, k, kt.power_ms_per_launch),
        "pj_per_flop": 1e12 * kt.energy_j / (2.0 * m * n * k),
        "cublas_power_w": bt.power_w, "cublas_power_gflops": gflops(m, n, k,
                                                                    bt.power_ms_per_launch),
        "cublas_pj_per_flop": 1e12 * bt.energy_j / (2.0 * m * n * k),
        "pct_cublas": 100.0 * k_gflops / b_gflops, "peak_gflops_at_clock": peak,
        "pct_peak": 100.0 * k_gflops / peak if peak == peak else math.nan,
    }


def run_kernel(session: Session, kernel: Kernel) -> None:
    prep = prepare(session, kernel)
    for m, n, k in session.job["sizes"]:
        row = checked_row(session, prep, m, n, k)
        if row["status"] != "checked":
            emit("result", **row)
            continue
        emit("progress", kernel=kernel.name, size=[m, n, k], stage="timing kernel and cuBLAS")
        ops = Operands(session.stream, m, n, k, kernel.spec.precision, kernel.spec.layout_b,
                       seed=m + n + k)
        try:
            ops.reset_c(session.stream)
            kt = session.timer.time(prep.gemm.launcher(m, n, k, 1.0, ops.a.address,
                                                       ops.b.address, 0.0, ops.c.address,
                                                       session.stream))
            bt = session.time_baseline(kernel.spec.precision, kernel.spec.layout_b, ops)
        finally:
            ops.close()
        emit("result", **timed_row(session, row, kt, bt))


def run_compare(session: Session, kernels: list[Kernel]) -> None:
    """Check every kernel, then time them and cuBLAS interleaved, round by round."""
    first = kernels[0].spec
    for kernel in kernels[1:]:
        if (kernel.spec.precision, kernel.spec.layout_b) != (first.precision, first.layout_b):
            raise HarnessError(
                f"compare needs one precision and B layout: {kernels[0].name} is "
                f"{first.precision}/{first.layout_b}, {kernel.name} is "
                f"{kernel.spec.precision}/{kernel.spec.layout_b}")
    preps = [prepare(session, kernel) for kernel in kernels]
    stream = session.stream
    for m, n, k in session.job["sizes"]:
        rows = [checked_row(session, prep, m, n, k) for prep in preps]
        for row in rows:
            if row["status"] != "checked":
                emit("result", **row)
        live = [(prep, row) for prep, row in zip(preps, rows, strict=True)
                if row["status"] == "checked"]
        if not live:
            continue
        emit("progress", kernel="compare", size=[m, n, k],
             stage=f"timing {len(live)} kernels and cuBLAS interleaved")
        ops = Operands(stream, m, n, k, first.precision, first.layout_b, seed=m + n + k)
        try:
            ops.reset_c(stream)
            launches = [prep.gemm.launcher(m, n, k, 1.0, ops.a.address, ops.b.address, 0.0,
                                           ops.c.address, stream) for prep, _ in live]
            launches.append(partial(session.blas.gemm, first.precision, m, n, k, 1.0,
                                    ops.a.address, ops.b.address, 0.0, ops.c.address,
                                    first.layout_b))
            timings, per_round = session.timer.time_interleaved(launches)
        finally:
            ops.close()
        for i, (_, row) in enumerate(live):
            # per-round ratios: drift between rounds cancels, so their spread is the noise
            ratios = Summary.of([r[0] / r[i] for r in per_round])
            emit("result", **timed_row(session, row, timings[i], timings[-1]),
                 compared_to=live[0][1]["kernel"], speedup=ratios.median,
                 speedup_p20=ratios.p20, speedup_p80=ratios.p80,
                 within_noise=i > 0 and ratios.p20 <= 1.0 <= ratios.p80)


def main() -> int:
    job = json.loads(sys.stdin.read())
    try:
        run_job(job)
    except HarnessError as exc:
        emit("error", kind=type(exc).__name__, message=str(exc))
        return 3
    except Exception as exc:  # an unexpected failure: report it whole, the parent goes on
        emit("error", kind=type(exc).__name__, message=f"{exc}\n{traceback.format_exc()}")
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
