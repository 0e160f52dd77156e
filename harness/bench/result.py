"""The result of one kernel at one size: one typed record, built once and read everywhere.

A :class:`Result` starts as :meth:`Result.of` (the kernel and the size) in the worker, gains its
parts stage by stage (resources and launch, occupancy, checks, the kernel's and the baseline's
:class:`~harness.gpu.timing.Timing`, ceiling, comparison), and ends with a status. The runner
carries it across the process boundary as JSON unchanged; reports, ``tune``, ``compare``,
``diff`` and the CLI read it back through :func:`load_report`. Figures derived from the parts
(GFLOP/s, % of the baseline, % of peak, energy per FLOP) are properties, computed where they are
read; the JSON also spells them out under ``metrics`` for other programs, and ignores them when
it is read back.

Reports written before the schema had a version (flat rows, ``cublas_*`` keys) are read too.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.compiler.ptxas import Resources
from harness.errors import ReportError
from harness.gpu.timing import Timing
from harness.kernels.registry import Kernel, project_relative
from harness.stats import gflops

SCHEMA_VERSION = 2
"""Version of the run-report JSON: 2 is nested typed records; 1 (no ``schema`` key) flat rows."""
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

    @classmethod
    def of(cls, kernel: Kernel) -> KernelInfo:
        spec = kernel.spec
        return cls(kernel.name, project_relative(spec.path), spec.precision, dict(kernel.params),
                   spec.layout_b, spec.c_type, kernel.source_sha256,
                   signature_text(spec.signature), layouts_text(spec), launch_text(kernel),
                   getattr(spec, "fp32_via", ""))

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


@dataclass(frozen=True)
class Baseline:
    """The library the kernel is measured against, timed by the same code in the same run."""

    compute: str
    """e.g. ``CUBLAS_COMPUTE_32F``: the compute type named exactly."""
    timing: Timing
    c_type: str = "fp32"
    library: str = "cuBLAS"


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
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def passed(self) -> bool:
        return self.status in PASSED

    @property
    def gflops(self) -> float | None:
        return _rate(self.m, self.n, self.k, self.timing.median_ms) if self.timing else None

    @property
    def baseline_gflops(self) -> float | None:
        return (_rate(self.m, self.n, self.k, self.baseline.timing.median_ms)
                if self.baseline else None)

    @property
    def pct_baseline(self) -> float | None:
        if self.timing is None or self.baseline is None:
            return None
        return _pct(self.gflops, self.baseline_gflops)

    @property
    def pct_peak(self) -> float | None:
        if self.timing is None:
            return None
        return _pct(self.gflops, self.peak_gflops_at_clock)

    @property
    def pct_ceiling(self) -> float | None:
        if self.timing is None or self.ceiling is None:
            return None
        return _pct(self.gflops, self.ceiling.gflops)

    def pj_per_flop(self, timing: Timing | None) -> float | None:
        """Board energy per FLOP in ``timing``'s power pass (NaN without one)."""
        return None if timing is None else 1e12 * timing.energy_j / self.flops

    def power_gflops(self, timing: Timing | None) -> float | None:
        return None if timing is None else _rate(self.m, self.n, self.k,
                                                 timing.power_ms_per_launch)

    def metrics(self) -> dict[str, Any]:
        """The derived figures, for readers of the JSON (ignored when it is read back)."""
        base = self.baseline.timing if self.baseline else None
        return {"gflops": self.gflops, "baseline_gflops": self.baseline_gflops,
                "pct_baseline": self.pct_baseline, "pct_peak": self.pct_peak,
                "pct_ceiling": self.pct_ceiling, "pj_per_flop": self.pj_per_flop(self.timing),
                "baseline_pj_per_flop": self.pj_per_flop(base),
                "power_gflops": self.power_gflops(self.timing)}

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


def _pct(value: float, of: float) -> float:
    """``value`` in percent of ``of``; NaN where ``of`` is not above 0 (unknown)."""
    return 100.0 * value / of if of > 0 else math.nan


# --- JSON ---------------------------------------------------------------------------------

def jsonable(value):
    """``value`` with non-finite floats as None and tuples as lists: strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


# --- reading reports back --------------------------------------------------------------------
#
# Every report the harness has written is read here: this schema's nested rows, the flat rows of
# schema 1, and the JSON-lines stream a run appends its rows to as they come. A row is checked
# field by field against the records' type hints, so that a report written by hand, cut short or
# changed reads either whole or not at all, with one line that says where and what: never a
# Python exception from deep inside a table. Keys this harness does not know (a newer one adds
# fields) are ignored everywhere.

_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """The type of each field of ``cls``; Any (the value as written) for every field of a
    record whose annotations cannot be resolved here (a name imported for type checkers
    only)."""
    if cls not in _HINTS:
        try:
            _HINTS[cls] = typing.get_type_hints(cls)
        except (NameError, TypeError):
            _HINTS[cls] = {f.name: Any for f in fields(cls)}
    return _HINTS[cls]


_AT_LEAST = {(Result, "m"): 1, (Result, "n"): 1, (Result, "k"): 1, (Timing, "median_ms"): 0.0}
"""Fields whose values below a bound no harness writes (a size of 0; a negative time), refused
on reading rather than divided by later."""


def _found(value) -> str:
    """A JSON value as an error message names it: its kind and, when short, itself."""
    if value is None:
        return "null"
    kind = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)
    if isinstance(value, (list, dict)):
        return f"{kind} of {len(value)}"
    text = json.dumps(value)
    return f"{text if len(text) <= 40 else text[:37] + '...'} ({kind})"


def _expected(hint) -> str:
    """What a type hint asks for, in words."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_expected(a) for a in args)
    if hint is type(None):
        return "null"
    if dataclasses.is_dataclass(hint):
        return f"an object ({hint.__name__})"
    if origin is tuple:
        return f"a list of {len(args)}" if args and Ellipsis not in args else "a list"
    if origin is dict:
        return f"an object of {_expected(args[1]) if len(args) == 2 else 'values'}"
    return {int: "a whole number", float: "a number", str: "a string", bool: "true or false",
            list: "a list", dict: "an object"}.get(hint, getattr(hint, "__name__", str(hint)))


def _wrong(where: str, value, hint) -> ReportError:
    return ReportError(f"{where} is {_found(value)}; expected {_expected(hint)}")


@functools.cache
def _shape(hint) -> tuple[Any, tuple]:
    """A type hint's origin and arguments (``dict[str, int]``: dict, (str, int))."""
    return typing.get_origin(hint), typing.get_args(hint)


def _value(hint, value, where: str):
    """``value`` (from JSON) as the field typed ``hint`` holds it; ReportError when it is not
    one. Lists become tuples, null a NaN in float fields, non-finite floats NaN; a hint this
    reader does not know takes the value as written."""
    origin, args = _shape(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _value(option, value, where)
            except ReportError as exc:
                if not str(exc).startswith(f"{where} is "):
                    raise  # a field inside the value: say which
        raise _wrong(where, value, hint)
    if hint in _HINTS or dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise _wrong(where, value, hint)
        return _record(hint, value, where)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _wrong(where, value, hint)
    if hint is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            if abs(value) < 2**63:  # no count the harness writes is larger
                return value
            raise ReportError(f"{where} is {_found(value)}; expected a whole number below 2^63")
        raise _wrong(where, value, hint)
    if hint is float:
        if value is None:
            return math.nan
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = float(value)
            return value if math.isfinite(value) else math.nan
        raise _wrong(where, value, hint)
    if hint is str:
        if isinstance(value, str):
            return value
        raise _wrong(where, value, hint)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise _wrong(where, value, hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if args and len(value) != len(args):
            raise ReportError(f"{where} is {_found(value)}; expected a list of {len(args)}")
        return tuple(_value(a, v, f"{where}[{i}]") for i, (a, v) in
                     enumerate(zip(args or [Any] * len(value), value, strict=True)))
    if origin is dict:
        if not isinstance(value, dict):
            raise _wrong(where, value, hint)
        item = args[1] if len(args) == 2 else Any
        return {k: _value(item, v, f"{where}.{k}") for k, v in value.items()}
    if origin is list or hint is list:
        if not isinstance(value, list):
            raise _wrong(where, value, hint)
        return [_value(args[0], v, f"{where}[{i}]") if args else v for i, v in enumerate(value)]
    return value


def _record(cls, data: dict[str, Any], where: str = ""):
    """A dataclass from a JSON object: the fields it knows, each checked against its type
    hint; a field left out, or null where it has a default, takes its default; a field with
    no default must be there (null is NaN for a float)."""
    hints, values = _hints(cls), {}
    for f in fields(cls):
        here = f"{where}.{f.name}" if where else f.name
        required = (f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING)
        if f.name not in data:
            if required:
                raise ReportError(f"{here} is missing; expected {_expected(hints[f.name])}")
            continue
        value = data[f.name]
        if value is None and not required and hints[f.name] is not float:
            continue
        value = _value(hints[f.name], value, here)
        least = _AT_LEAST.get((cls, f.name))
        if least is not None and value < least:
            raise ReportError(f"{here} is {_found(value)}; expected at least {least:g}")
        values[f.name] = value
    return cls(**values)


def _need(row: dict, key: str):
    """A flat row's ``key``; ReportError naming it when it is not there."""
    if key not in row:
        raise ReportError(f"{key} is missing (a flat row of schema 1)")
    return row[key]


def _timing_from_flat(row: dict, prefix: str, m, n, k) -> dict[str, Any]:
    power_gflops = row.get(f"{prefix}power_gflops")
    ms = None
    if power_gflops:
        power = _value(float, power_gflops, f"{prefix}power_gflops")
        sizes = [_value(int, v, name) for v, name in ((m, "m"), (n, "n"), (k, "k"))]
        if power > 0:
            ms = 2.0 * sizes[0] * sizes[1] * sizes[2] / (power * 1e9) * 1e3
    return {"median_ms": _need(row, f"{prefix}median_ms"), "p20_ms": _need(row, f"{prefix}p20_ms"),
            "p80_ms": _need(row, f"{prefix}p80_ms"), "min_ms": None, "max_ms": None,
            "reps": _need(row, f"{prefix}reps"), "cold_l2": row.get("cold_l2", True),
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
    m, n, k = _need(row, "m"), _need(row, "n"), _need(row, "k")
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
            "driver_blocks_per_sm": _need(row, "blocks_per_sm"),
            "offline_blocks_per_sm": row["blocks_per_sm_offline"],
            "occupancy_pct": _need(row, "occupancy_pct"), "limiter": _need(row, "limiter"),
            "waves_per_sm": row.get("waves_per_sm")}
    if "checks_total" in row:
        nested["checks"] = {"passed": _need(row, "checks_passed"), "total": row["checks_total"],
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
                             "instruction": _need(row, "ceiling_instruction"),
                             "sm_clock_mhz": row.get("ceiling_sm_clock_mhz")}
    if "speedup" in row:
        within = row.get("within_noise")
        nested["comparison"] = {"compared_to": _need(row, "compared_to"),
                                "speedup": row["speedup"], "speedup_p20": _need(row, "speedup_p20"),
                                "speedup_p80": _need(row, "speedup_p80"),
                                "within_noise": bool(within) if within in (None, 0, 1) else within}
    if "sass" in row:
        nested["sass"] = row["sass"]
    return nested


def result_from_json(data) -> Result:
    """A result from its JSON (:meth:`Result.from_json`); ReportError, naming the field, for
    one that is not a result row."""
    if not isinstance(data, dict):
        raise ReportError(f"the row is {_found(data)}; expected an object (a result)")
    if isinstance(data.get("kernel"), str):
        data = _nested_from_flat(data)
    return _record(Result, data)


@dataclass(frozen=True)
class RunReport:
    """A saved run: its metadata and its results."""

    meta: dict[str, Any]
    results: list[Result]
    schema: int = SCHEMA_VERSION
    path: Path | None = None
    complete: bool = True
    """False for a stream of rows (``.jsonl``) that no finished report holds: the run was
    interrupted (or is still running), or the stream was cut mid-write."""
    notes: tuple[str, ...] = ()
    """What the reader left out or could not say, one sentence each (a torn last line)."""

    def describe_state(self) -> str:
        """"" for a complete report, else why it is not, in one sentence."""
        if self.complete:
            return ""
        return "incomplete: " + "; ".join(self.notes)


_META_FIELDS = {"gpu": str, "date_utc": str, "command": str, "git": dict, "device": dict,
                "timing": dict, "mode": str}
"""The fields of a report's ``meta`` that the readers use, with the type each must have."""
RUN_KINDS = ("run", "compare", "tune")
"""The reports ``load_report`` reads: those of harness run, compare and tune."""


def load_report(path: Path) -> RunReport:
    """The run, compare or tune report at ``path``: its ``.json``, or the ``.jsonl`` stream its
    rows were appended to as they came (read with the rows it holds; ``complete`` False where
    no finished report holds them). ReportError, in one line, for anything else."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, ValueError) as exc:
        raise ReportError(f"cannot read the run report {path}: {exc}") from None
    if path.suffix == ".jsonl":
        return _load_stream(path, text)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        cut = " (cut short?)" if text.strip() and not text.rstrip().endswith("}") else ""
        raise ReportError(f"cannot read the run report {path}: not JSON{cut}: {exc}") from None
    if not isinstance(data, dict) or "rows" not in data:
        raise _not_a_run(path, data)
    schema = data.get("schema", 1)
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise ReportError(f"{path}: schema is {_found(schema)}; expected a whole number")
    if schema > SCHEMA_VERSION:
        raise ReportError(f"{path} has report schema {schema}; this harness reads up to "
                          f"{SCHEMA_VERSION}: update the harness")
    rows = data["rows"]
    if not isinstance(rows, list):
        raise ReportError(f"{path}: rows is {_found(rows)}; expected a list of result rows")
    if "schema" not in data and rows and not any(isinstance(r, dict) and "m" in r
                                                  for r in rows):
        raise _not_a_run(path, data)
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise ReportError(f"{path}: meta is {_found(meta)}; expected an object (the run's "
                          "date, command, GPU and timing)")
    for key, kind in _META_FIELDS.items():
        if meta.get(key) is not None and not isinstance(meta[key], kind):
            raise ReportError(f"{path}: meta.{key} is {_found(meta[key])}; expected "
                              f"{_expected(kind)}")
    results = [_row(path, f"row {i}", row) for i, row in enumerate(rows, 1)]
    return RunReport(meta, results, schema, path)


def _row(path: Path, where: str, row) -> Result:
    try:
        return result_from_json(row)
    except ReportError as exc:
        raise ReportError(f"cannot read the run report {path}: {where}: {exc}") from None


def _not_a_run(path: Path, data) -> ReportError:
    """The one line for a JSON file that is not a run, compare or tune report."""
    from harness.report.index import KINDS, kind_of, report_key

    key = report_key(path.name) or path.stem
    kind = kind_of(key)
    named = kind not in RUN_KINDS and (kind in KINDS or kind != key)
    what = (f"a report of kind '{kind}' (by its name)" if named else
            f"{_found(data)} with no result rows (kernel, m, n, k)")
    return ReportError(f"{path} is not a run report: it holds {what}; harness report and "
                       "diff read the reports of harness run, compare and tune (their .json, or "
                       "the .jsonl stream of one)")


def _load_stream(path: Path, text: str) -> RunReport:
    """A run's JSON-lines stream: a row per line, as the results came. A last line with no
    newline after it that is not JSON was cut mid-write (the run was killed): the rows before
    it are kept and the report says which line. Any other line that is not JSON is left out
    and said the same way."""
    lines = text.split("\n")
    results, notes = [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as exc:
            if number == len(lines):
                notes.append(f"line {number} was cut mid-write (the run was stopped while "
                             "writing it) and is left out")
            else:
                notes.append(f"line {number} is not JSON ({exc}) and is left out")
            continue
        results.append(_row(path, f"line {number}", row))
    from harness.report.index import report_key

    owner = path.with_name(f"{report_key(path.name) or path.stem}.json")
    if not notes and not owner.is_file():
        notes.append(f"a stream of {len(results)} rows with no {owner.name} beside it (the "
                     "run was interrupted, or is still running)")
    gpus = [r.gpu.name for r in results if r.gpu is not None and r.gpu.name]
    meta = {"gpu": gpus[0]} if gpus else {}
    return RunReport(meta, results, SCHEMA_VERSION, path, complete=not notes,
                     notes=tuple(notes))


def report_json(meta: dict[str, Any], results: Sequence[Result]) -> str:
    """The JSON text of a run report."""
    return json.dumps(jsonable({"schema": SCHEMA_VERSION, "meta": meta,
                                "rows": [r.to_json() for r in results]}),
                      indent=1, allow_nan=False) + "\n"
