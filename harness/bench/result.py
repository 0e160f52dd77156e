"""The result of one kernel at one size: one typed record, built once and read everywhere.

A :class:`Result` starts as :meth:`Result.of` (the kernel and the size) in the worker, gains its
parts stage by stage (resources and launch, occupancy, checks, the kernel's and the baseline's
:class:`~harness.gpu.timing.Timing`, ceiling, comparison), and ends with a status. The runner
carries it across the process boundary as JSON unchanged; reports, ``tune``, ``compare``,
``diff`` and the CLI read it back through :func:`harness.report.reading.load_report`. Figures
derived from the parts (GFLOP/s, % of the baseline, % of peak, energy per FLOP) are properties,
computed where they are read; the JSON also spells them out under ``metrics`` for other
programs, and ignores them when it is read back.

Reports written before the schema had a version (flat rows, ``cublas_*`` keys) are read too.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from harness.compiler.ptxas import Resources
from harness.errors import ReportError
from harness.gpu.timing import Timing
from harness.kernels.registry import Kernel, project_relative
from harness.stats import gflops
from harness.typed_json import AT_LEAST, found, jsonable, record_of, value_of

SCHEMA_VERSION = 3
"""Version of the run-report JSON: 3 names each row's kind (``kernel.kind``) and its
baseline (``baseline.library``, as 2 did), its figures computed by the kind
(harness.kinds); 2 is nested typed records; 1 (no ``schema`` key) flat rows. Every version
reads: a row without ``kernel.kind`` is given the kind that recognises it."""
BUFFERS = "buffers: "
"""How a buffers kernel's signature text begins (KernelInfo.signature)."""
PASSED = ("pass", "skipped")
"""Statuses that are not failures."""


@dataclass(frozen=True)
class KernelInfo:
    """Which kernel, with what parameters, from which source."""

    name: str
    file: str
    """The kernel file, relative to the project root where it lies inside it."""
    precision: str
    params: dict[str, int] = field(default_factory=dict)
    layout_b: str = "row"
    c_type: str = "fp32"
    source_sha256: str = ""
    """Hash of the kernel file and the files it includes, as they were when it ran."""
    signature: str = ""
    """The declared parameter list as text (``"ptr A, ptr B, ptr C, i32 M, i32 N, i32 K"``);
    empty for the common ABI (and in reports written before signatures existed)."""
    layouts: str = ""
    """The operands' storage, ``"A row, B col, C row"``; empty in older reports."""
    launch_attributes: str = ""
    """What the kernel is launched with besides its grid and block: ``"cluster 2x1x1
    (__cluster_dims__), block order spread"``; empty for a plain launch."""
    fp32_via: str = ""
    """How an FP32 kernel computes on tensor cores, as its spec declares (``bf16x3``, ...);
    empty: FP32 itself."""
    kind: str = ""
    """The kernel's kind (harness.kinds); empty in reports before schema 3."""

    @classmethod
    def of(cls, kernel: Kernel) -> KernelInfo:
        spec = kernel.spec
        return cls(kernel.name, project_relative(spec.path), spec.precision, dict(kernel.params),
                   spec.layout_b, spec.c_type, kernel.source_sha256,
                   signature_text(spec.signature) if spec.buffers is None else
                   BUFFERS + ", ".join(a.label for a in spec.buffers.args),
                   layouts_text(spec), launch_text(kernel),
                   getattr(spec, "fp32_via", ""), spec.kind)

    @property
    def computes(self) -> str:
        """The precision as every table names it: ``fp32``, or ``fp32 via bf16x3``."""
        return f"{self.precision} via {self.fp32_via}" if self.fp32_via else self.precision


def launch_text(kernel: Kernel) -> str:
    """The launch attributes a kernel declares (cluster, block order) as one phrase; "" for
    none."""
    spec, parts = kernel.spec, []
    if kernel.cluster_dims is not None:
        parts.append(f"cluster {'x'.join(map(str, kernel.cluster_dims))} ("
                     f"{'__cluster_dims__' if spec.cluster_from == 'source' else 'spec'})")
    if spec.block_order != "default":
        parts.append(f"block order {spec.block_order}")
    return ", ".join(parts)


def signature_text(signature) -> str:
    """A declared signature (a tuple of signature.Param) as one line; "" for None (the common
    ABI)."""
    if signature is None:
        return ""
    def one(p) -> str:
        if p.name == "const":
            return f"const {p.value}"
        if p.name == "host":
            return f"{p.type} host {p.key}"
        if p.name == "workspace":
            return f"ptr workspace ({p.fill})"
        return f"{p.type} {p.name}"
    return ", ".join(one(p) for p in signature)


def layouts_text(spec) -> str:
    """``"A row, B col, C row"``: how the spec stores A, B and C."""
    return (f"A {getattr(spec, 'layout_a', 'row')}, B {spec.layout_b}, "
            f"C {getattr(spec, 'layout_c', 'row')}")


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


# --- flat rows of schema 1 -------------------------------------------------------------------

def need(row: dict, key: str):
    """A flat row's ``key``; ReportError naming it when it is not there."""
    if key not in row:
        raise ReportError(f"{key} is missing (a flat row of schema 1)")
    return row[key]


def _timing_from_flat(row: dict, prefix: str, m, n, k) -> dict[str, Any]:
    power_gflops = row.get(f"{prefix}power_gflops")
    ms = None
    if power_gflops:
        power = value_of(float, power_gflops, f"{prefix}power_gflops")
        sizes = [value_of(int, v, name) for v, name in ((m, "m"), (n, "n"), (k, "k"))]
        if power > 0:
            ms = 2.0 * sizes[0] * sizes[1] * sizes[2] / (power * 1e9) * 1e3
    return {"median_ms": need(row, f"{prefix}median_ms"), "p20_ms": need(row, f"{prefix}p20_ms"),
            "p80_ms": need(row, f"{prefix}p80_ms"), "min_ms": None, "max_ms": None,
            "reps": need(row, f"{prefix}reps"), "cold_l2": row.get("cold_l2", True),
            "sm_clock_mhz": row.get(f"{prefix}sm_clock_mhz"),
            "sm_clock_min_mhz": row.get(f"{prefix}sm_clock_min_mhz"),
            "sm_clock_max_mhz": row.get(f"{prefix}sm_clock_max_mhz"),
            "queue_ahead_ms": row.get(f"{prefix}queue_ahead_ms"),
            "clock_limits": row.get(f"{prefix}clock_limits") or "",
            "power_w": row.get(f"{prefix}power_w"),
            "power_span_s": row.get(f"{prefix}power_span_s") or 0.0,
            "power_ms_per_launch": ms}


def _nested_from_flat(row: dict) -> dict[str, Any]:
    """A flat row of schema 1 (reports written before the schema had a version) in the nested
    form of this schema."""
    m, n, k = need(row, "m"), need(row, "n"), need(row, "k")
    nested: dict[str, Any] = {
        "kernel": {"name": row["kernel"], "file": row.get("file", ""),
                   "precision": row.get("precision", ""), "params": row.get("params") or {}},
        "m": m, "n": n, "k": k, "status": row.get("status", ""), "message": row.get("message", "")}
    if "registers" in row:
        nested["resources"] = {"registers": row["registers"],
                               "static_smem_bytes": row.get("static_smem_bytes", 0),
                               "spill_store_bytes": row.get("spill_store_bytes", 0),
                               "spill_load_bytes": row.get("spill_load_bytes", 0)}
    if "block_threads" in row:
        nested["launch"] = {"block_threads": row["block_threads"], "grid": row.get("grid") or None,
                            "dynamic_smem_bytes": row.get("dynamic_smem_bytes")}
    if "blocks_per_sm_offline" in row:
        nested["occupancy"] = {
            "driver_blocks_per_sm": need(row, "blocks_per_sm"),
            "offline_blocks_per_sm": row["blocks_per_sm_offline"],
            "occupancy_pct": need(row, "occupancy_pct"), "limiter": need(row, "limiter"),
            "waves_per_sm": row.get("waves_per_sm")}
    if "checks_total" in row:
        nested["checks"] = {"passed": need(row, "checks_passed"), "total": row["checks_total"],
                            "max_rel_err": row.get("max_rel_err"),
                            "skipped": row.get("check_skips") or ()}
    if "median_ms" in row:
        nested["timing"] = _timing_from_flat(row, "", m, n, k)
        nested["peak_gflops_at_clock"] = row.get("peak_gflops_at_clock")
    if "cublas_median_ms" in row:
        nested["baseline"] = {"compute": row.get("cublas_compute", ""),
                              "timing": _timing_from_flat(row, "cublas_", m, n, k)}
    if row.get("ceiling_gflops") is not None:
        nested["ceiling"] = {"gflops": row["ceiling_gflops"],
                             "instruction": need(row, "ceiling_instruction"),
                             "sm_clock_mhz": row.get("ceiling_sm_clock_mhz")}
    if "speedup" in row:
        within = row.get("within_noise")
        nested["comparison"] = {"compared_to": need(row, "compared_to"),
                                "speedup": row["speedup"], "speedup_p20": need(row, "speedup_p20"),
                                "speedup_p80": need(row, "speedup_p80"),
                                "within_noise": bool(within) if within in (None, 0, 1) else within}
    if "sass" in row:
        nested["sass"] = row["sass"]
    return nested


def result_from_json(data) -> Result:
    """A result from its JSON (:meth:`Result.from_json`); ReportError, naming the field, for
    one that is not a result row."""
    if not isinstance(data, dict):
        raise ReportError(f"the row is {found(data)}; expected an object (a result)")
    if isinstance(data.get("kernel"), str):
        data = _nested_from_flat(data)
    return record_of(Result, data)
