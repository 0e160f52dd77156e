"""The result of one kernel at one size: one typed record, built once and read everywhere.

A :class:`Result` starts as :meth:`Result.of` (the kernel and the size) in the worker, gains its
parts stage by stage (resources and launch, occupancy, checks, the kernel's and the baseline's
:class:`~harness.gpu.timing.Timing`, ceiling, comparison), and ends with a status. The runner
carries it across the process boundary as JSON unchanged; reports, ``tune``, ``compare``,
``diff`` and the CLI read it back through :func:`harness.report.reading.load_report`. Figures
derived from the parts (GFLOP/s, % of the baseline, % of peak, energy per FLOP) are properties,
computed where they are read; the JSON also spells them out under ``metrics`` for other
programs, and ignores them when it is read back.

Reports written before the schema had a version (flat rows, ``cublas_*`` keys) are read too
(:mod:`harness.bench.result_flat`). Which kernel a result is of, :class:`KernelInfo`, is in
:mod:`harness.bench.kernel_info`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from harness.bench.kernel_info import (
    BUFFERS,
    KernelInfo,
    launch_text,
    layouts_text,
    signature_text,
)
from harness.bench.result_flat import need, nested_from_flat
from harness.compiler.ptxas import Resources
from harness.errors import ReportError
from harness.gpu.timing import Timing
from harness.stats import gflops
from harness.typed_json import AT_LEAST, found, jsonable, record_of

__all__ = [
    "BUFFERS", "PASSED", "SCHEMA_VERSION", "Baseline", "CeilingRef", "CheckSummary",
    "Comparison", "GpuInfo", "KernelInfo", "LaunchInfo", "MemoryFigures", "OccupancyInfo",
    "Result", "launch_text", "layouts_text", "need", "nested_from_flat", "result_from_json",
    "signature_text",
]
"""The result's API: its own records, and those of kernel_info.py and result_flat.py, which
the runs, reports and tests import from here."""

SCHEMA_VERSION = 3
"""Version of the run-report JSON: 3 names each row's kind (``kernel.kind``) and its
baseline (``baseline.library``, as 2 did), its figures computed by the kind
(harness.kinds); 2 is nested typed records; 1 (no ``schema`` key) flat rows. Every version
reads: a row without ``kernel.kind`` is given the kind that recognises it."""
PASSED = ("pass", "skipped")
"""Statuses that are not failures."""


@dataclass(frozen=True)
class LaunchInfo:
    block_threads: int
    grid: tuple[int, int, int] | None = None
    dynamic_smem_bytes: int | None = None


@dataclass(frozen=True)
class OccupancyInfo:
    """Blocks per SM from the driver and from the offline calculator, for this launch."""

    driver_blocks_per_sm: int
    offline_blocks_per_sm: int
    occupancy_pct: float
    """Theoretical occupancy (offline)."""
    limiter: str
    waves_per_sm: float | None = None

    @property
    def agree(self) -> bool:
        return self.driver_blocks_per_sm == self.offline_blocks_per_sm


@dataclass(frozen=True)
class CheckSummary:
    """Every numerical check of a kernel at one size: its battery (plan.py) and the size itself."""

    passed: int
    total: int
    max_rel_err: float
    skipped: tuple[str, ...] = ()
    """What the battery left out, with the reason."""
    finding: str = "ok"
    """What the first failed check found (numerics.FINDINGS), "ok" when all passed."""
    failure: str = ""
    """The first failed check: where, with which seed, alpha and beta, and what was wrong."""
    notes: tuple[str, ...] = ()
    """Findings that are not failures, e.g. "reads C when beta = 0"."""
    fp32_multiple: float = math.nan
    """The error at this size as a multiple of what FP32 accumulation (one FMA per k step)
    gives on the same inputs: about 1 for an FP32 kernel, more for BF16 or TF32 parts; NaN
    where not measured (older reports)."""
    timed_checked: int = 0
    """Timed repetitions whose outputs were kept inside the timed sequence and checked."""
    launches: int = 0
    """Launches of the kernel in its timing (warm-up, primers and timed repetitions)."""
    of_bound: float = math.nan
    """The largest error norm of its checks as a fraction of that check's own bound (NaN in
    older reports)."""


@dataclass(frozen=True)
class Baseline:
    """The library the kernel is measured against, timed by the same code in the same run."""

    compute: str
    """e.g. ``CUBLAS_COMPUTE_32F``: the compute type named exactly."""
    timing: Timing
    c_type: str = "fp32"
    library: str = "cuBLAS"


@dataclass(frozen=True)
class MemoryFigures:
    """A buffers kernel's problem (notes/buffers_kind.md) and the memory figures it is held
    to; None on GEMM rows. Its m, n, k hold the dims in order, padded with 1."""

    dims: dict[str, int]
    bytes: int
    """The compulsory bytes at these dims: the buffers' (``bytes_source``)."""
    flops: float
    ceiling_gbps: float
    """The memory ceiling measured in the same run (roofline.py): the faster of a device
    copy and a streaming read far past L2."""
    copy_gbps: float
    dram_peak_gbps: float
    """From the device's memory clock and bus width."""
    bytes_source: str = "buffers"
    """Where ``bytes`` comes from: ``buffers`` (each input and output once), or the declared
    figure with the spec's reason (bench/memory/bytes_moved.py)."""


@dataclass(frozen=True)
class CeilingRef:
    """The instruction-issue ceiling a tensor-core row is stated against."""

    gflops: float
    instruction: str
    sm_clock_mhz: float


@dataclass(frozen=True)
class Comparison:
    """A kernel's speed against the first of an interleaved ``harness compare``."""

    compared_to: str
    speedup: float
    """Median over rounds of (first kernel's time / this one's)."""
    speedup_p20: float
    speedup_p80: float
    within_noise: bool


@dataclass(frozen=True)
class GpuInfo:
    """The GPU a row was measured on: a run spread over several GPUs (``--gpus``, a cluster)
    names each row's."""

    index: int
    """The CUDA device ordinal in the harness's numbering (``--gpus``: the devices the driver
    shows the harness, after any ``CUDA_VISIBLE_DEVICES`` of its own)."""
    uuid: str = ""
    """``cuDeviceGetUuid`` as ``GPU-xxxxxxxx-...`` (what ``nvidia-smi -L`` prints)."""
    name: str = ""
    pci_bus_id: str = ""
    host: str = ""
    """The machine's host name (GPUs of a cluster share indices across hosts)."""
    max_sm_clock_mhz: float = math.nan
    max_mem_clock_mhz: float = math.nan
    power_limit_w: float = math.nan

    @classmethod
    def of(cls, index: int, facts: dict[str, Any]) -> GpuInfo:
        """From a worker's ``device`` event (BenchSession.facts plus uuid and host)."""
        clocks = facts.get("clocks") or {}
        return cls(index, facts.get("uuid", ""), facts.get("name", ""),
                   facts.get("pci_bus_id", ""), facts.get("host", ""),
                   _number(clocks.get("max_sm_clock_mhz")),
                   _number(clocks.get("max_mem_clock_mhz")),
                   _number(clocks.get("power_limit_w")))


def _number(value) -> float:
    """A clock fact as a float; NaN where NVML said "unavailable: ..." or nothing."""
    return float(value) if isinstance(value, (int, float)) else math.nan


@dataclass(frozen=True)
class Result:
    """One kernel at one size."""

    kernel: KernelInfo
    m: int
    n: int
    k: int
    status: str = "pending"
    """pass, FAIL, skipped, compile error, launch error, fault, timeout, error."""
    message: str = ""
    resources: Resources | None = None
    launch: LaunchInfo | None = None
    occupancy: OccupancyInfo | None = None
    checks: CheckSummary | None = None
    timing: Timing | None = None
    baseline: Baseline | None = None
    baseline_fp32: Baseline | None = None
    """``fp32_via``: plain SGEMM timed beside ``baseline`` (cuBLAS in its scheme); else None."""
    peak_gflops_at_clock: float = math.nan
    """The precision's dense peak at the SM clock measured during the timing."""
    ceiling: CeilingRef | None = None
    comparison: Comparison | None = None
    sass: dict[str, int] | None = None
    gpu: GpuInfo | None = None
    """The GPU it ran on; None for rows no GPU saw (compile errors) and in older reports."""
    seed: int | None = None
    """The run's seed its inputs were drawn from (``--seed`` replays it); None in older
    reports and rows no GPU saw."""
    screen: tuple[str, ...] = ()
    """What the kernel's cubin could keep state in or read time from (screen.py), a phrase
    each; empty when nothing was found."""
    memory: MemoryFigures | None = None
    """A buffers kernel's dims, bytes and memory ceiling (None: a GEMM)."""

    @classmethod
    def of(cls, kernel: KernelInfo, m: int, n: int, k: int) -> Result:
        """The record every result starts as: the only place one is made."""
        return cls(kernel, m, n, k)

    def with_parts(self, **parts) -> Result:
        return dataclasses.replace(self, **parts)

    def ended(self, status: str, message: str) -> Result:
        return dataclasses.replace(self, status=status, message=message)

    # --- derived figures (never stored) ---
    @property
    def size(self) -> tuple[int, int, int]:
        return self.m, self.n, self.k

    @property
    def kind_of(self):
        """Its kind (harness.kinds), which owns its figures."""
        from harness import kinds

        return kinds.of_result(self)

    def figures(self) -> dict[str, float | None]:
        """The figures its kind computes from it (GFLOP/s, GB/s, % of baseline, ...)."""
        return self.kind_of.figures(self)

    @property
    def flops(self) -> float:
        return self.figures().get("flops") or 0.0

    @property
    def gbps(self) -> float | None:
        """Compulsory bytes per second, in GB/s, for a kind judged in bytes (else None)."""
        return self.figures().get("gbps")

    @property
    def baseline_gbps(self) -> float | None:
        return self.figures().get("baseline_gbps")

    @property
    def passed(self) -> bool:
        return self.status in PASSED

    @property
    def gflops(self) -> float | None:
        return self.figures().get("gflops")

    @property
    def baseline_gflops(self) -> float | None:
        return self.figures().get("baseline_gflops")

    @property
    def pct_baseline(self) -> float | None:
        """% of its baseline (named in ``baseline.library``)."""
        return self.figures().get("pct_baseline")

    @property
    def pct_peak(self) -> float | None:
        """% of the precision's dense peak; a kind judged in bytes, of the DRAM peak."""
        return self.figures().get("pct_peak")

    @property
    def pct_copy(self) -> float | None:
        """GB/s in % of the memory ceiling measured in its run (kinds judged in bytes)."""
        return self.figures().get("pct_copy")

    @property
    def pct_ceiling(self) -> float | None:
        if self.timing is None or self.ceiling is None:
            return None
        return _pct(self.gflops, self.ceiling.gflops)

    def pj_per_flop(self, timing: Timing | None) -> float | None:
        """Board energy per FLOP in ``timing``'s power pass (NaN without one)."""
        return None if timing is None or not self.flops else 1e12 * timing.energy_j / self.flops

    def power_gflops(self, timing: Timing | None) -> float | None:
        return None if timing is None else self.kind_of.power_gflops(
            self, timing.power_ms_per_launch)

    def metrics(self) -> dict[str, Any]:
        """The derived figures, for readers of the JSON (ignored when it is read back)."""
        base = self.baseline.timing if self.baseline else None
        return {"gflops": self.gflops, "baseline_gflops": self.baseline_gflops,
                "pct_baseline": self.pct_baseline, "pct_peak": self.pct_peak,
                "pct_ceiling": self.pct_ceiling, "pj_per_flop": self.pj_per_flop(self.timing),
                "baseline_pj_per_flop": self.pj_per_flop(base),
                "power_gflops": self.power_gflops(self.timing),
                **{k: v for k, v in self.figures().items()
                   if k in ("gbps", "baseline_gbps", "pct_copy")}}

    def to_json(self) -> dict[str, Any]:
        out = jsonable(dataclasses.asdict(self))
        out["metrics"] = jsonable(self.metrics())
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Result:
        """A result from its JSON: this schema's nested form, or a flat row of schema 1; keys
        it does not know (``metrics``, fields of a newer harness) are ignored. ReportError,
        naming the field, for a row that is not a result."""
        return result_from_json(data)


def _rate(m: int, n: int, k: int, ms: float) -> float:
    """GFLOP/s of a time; NaN for a time that is not above 0 (none measured)."""
    return gflops(m, n, k, ms) if ms > 0 else math.nan


def _per_s(amount: float, ms: float) -> float:
    """Giga-units per second of ``amount`` done in ``ms``; NaN for a time not above 0."""
    return amount / (ms * 1e6) if ms > 0 else math.nan


def _pct(value: float, of: float) -> float:
    """``value`` in percent of ``of``; NaN where ``of`` is not above 0 (unknown)."""
    return 100.0 * value / of if of > 0 else math.nan


AT_LEAST.update({(Result, "m"): 1, (Result, "n"): 1, (Result, "k"): 1,
                 (Timing, "median_ms"): 0.0})
"""Read back, a size is at least 1 and a time not negative (typed_json.AT_LEAST)."""


def result_from_json(data) -> Result:
    """A result from its JSON (:meth:`Result.from_json`); ReportError, naming the field, for
    one that is not a result row."""
    if not isinstance(data, dict):
        raise ReportError(f"the row is {found(data)}; expected an object (a result)")
    if isinstance(data.get("kernel"), str):
        data = nested_from_flat(data)
    return record_of(Result, data)
