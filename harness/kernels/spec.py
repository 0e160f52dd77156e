"""Kernel specs: the TOML block at the top of every kernel file, parsed and validated.

A kernel file starts with a block comment whose first line is ``/* harness``; its body is TOML
(see README "Adding a kernel"). Formulas are parsed by ``harness.expr``, never evaluated as code.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.archs import ARCHS
from harness.errors import HarnessError, SpecError
from harness.kernels import expr
from harness.kernels.hostsetup import missing_setup
from harness.kernels.signature import (
    DEFAULT_SIGNATURE,
    TMAP_BYTES,
    Param,
    TensorMapSpec,
    cubin_parameter_sizes,
    has_alpha,
    has_beta,
    host_keys,
    param_bytes,
    param_label,
    parameter_mismatch,
    parse_signature,
    parse_tmaps,
    ptx_entry_parameters,
    show_parameters,
    tensor_map_operands,
)

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
LAYOUTS = ("row", "col")
SHAPE_NAMES = frozenset({"M", "N", "K"})
MODEL_KEYS = ("tile_m", "tile_n", "smem_loads", "fmas")
"""The napkin model's required keys ([model])."""
MODEL_WAVEFRONT_KEYS = ("smem_ld_requests", "smem_ld_wavefronts", "smem_st_requests",
                        "smem_st_wavefronts")
"""Optional [model] keys, in pairs: shared-memory load (store) instructions a warp issues and
the wavefronts its layout predicts they take, over any one stretch of the kernel (a k step,
a tile); their ratio is the predicted wavefronts per request (1 = no bank conflicts), which
``harness profile`` sets beside Nsight Compute's."""
KINDS = ("gemm", "ceiling")
"""``gemm``: the common GEMM ABI (every GEMM command). ``ceiling``: a register-only
microbenchmark of one instruction's issue rate, ABI ``(u64 sink, u32 iterations)``
(``harness ceiling``; see harness/ceiling.py)."""
_REQUIRED = ("entry", "summary", "precision", "min_arch", "block", "grid")
_OPTIONAL = ("layout_b", "c_type", "blas_strict", "nondeterministic", "representative",
             "dynamic_smem_bytes",
             "constraints", "carveout_pct", "predicted", "params", "variants", "tune",
             "tuned", "model", "kind", "ceiling", "tma", "budget",
             "signature", "layout_a", "layout_c", "tmaps", "cluster_dims", "block_order",
             "fp32_via", "macros")
BLOCK_ORDERS = ("default", "spread", "load_balancing")
"""How the GPU places a launch's blocks (their clusters) on the SMs (``block_order``): the
driver's cluster scheduling policy (``CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE``),
``default``, ``spread`` (a cluster's blocks spread over SMs) or ``load_balancing`` (the hardware
may balance them). The order in which tiles are visited is the kernel's own (its grid formulas
and its index arithmetic, or a host-built schedule)."""
FP32_VIA = ("tf32", "tf32x3", "bf16", "bf16x3", "bf16x6", "bf16x9")
"""How an FP32 kernel may compute on tensor cores (``fp32_via``): its inputs rounded to TF32 or
BF16 once, or split into 3, 6 or 9 products of parts (the "x3" schemes drop the small x small
terms). A kernel that declares none is held to FP32's accuracy and to the FP32 FMA peak."""
C_TYPES = ("fp32", "bf16", "fp16")
"""Element types of C a kernel may declare (``c_type``); a 16-bit C goes with inputs of the
same type (what cuBLAS offers: FP32 inputs write FP32)."""
_CEILING_KEYS = ("kind", "entry", "summary", "predicted", "precision", "min_arch", "block",
                 "ceiling")
CEILING_TABLE_KEYS = ("instruction", "mma_per_iteration", "blocks_per_sm")
# the operand types an mma instruction names for each input precision (FP32 accumulate)
_MMA_TYPES = {"bf16": ".bf16.bf16.", "fp16": ".f16.f16.", "tf32": ".tf32.tf32."}
_MMA = re.compile(r"^(?P<family>mma\.sync|wgmma\.mma_async\.sync)\.aligned"
                  r"\.m(?P<m>\d+)n(?P<n>\d+)k(?P<k>\d+)\.[a-z0-9.]+$")
# warps that issue one instruction together: a wgmma is one warpgroup's (4 warps)
_WARPS_PER_MMA = {"mma.sync": 1, "wgmma": 4}
_SPEC_BLOCK = re.compile(r"\A\s*/\*\s*harness[ \t]*\n(?P<body>.*?)\*/", re.DOTALL)
_SPEC_OPENER = re.compile(r"\A\s*/\*[ \t]*harness\b(?P<rest>[^\n]*)")
_SPEC_OPENER_ANYWHERE = re.compile(r"^[ \t]*/\*[ \t]*harness[ \t]*$", re.MULTILINE)
# a line of the body that is code, not TOML: the block ran on past its end
_CODE_LINE = re.compile(r"^\s*(?:#\s*include\s*[<\"]|#(?:define|ifn?def|if|pragma)\b|"
                        r"extern\s+\"C\"|__global__|template\s*<|namespace\s+\w+\s*(?:\{|$)|"
                        r"\.(?:version|target|visible|entry)\s|//|/\*)")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CXX_ENTRY = re.compile(r"^(?:::)?(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*\s*(?:<[^;{}()]*>)?$")
"""A .cu entry given as a C++ name (a kernel in a namespace, a template instantiation): the
build asks NVRTC for its lowered (mangled) symbol (``nvrtcAddNameExpression``)."""
BUDGET_KEYS = ("max_registers", "max_spill_bytes", "max_smem_bytes", "min_occupancy_pct")
"""Keys of the optional ``[budget]`` table: limits the offline build must stay within (registers
per thread, spill stores + loads in bytes, static + dynamic shared memory per block at the size
built for, and the least predicted occupancy in percent); the pytest plugin and
``harness.testing`` check them, and ``harness build`` (:func:`budget_problems`)."""
TMA_OPERANDS = ("A", "B", "C")
"""Operands a kernel may take as TMA tensor maps ([tma]), passed after C in this order."""
TMA_SWIZZLES = ("128B", "64B", "32B", "none")
"""Shared-memory layouts of a tensor map's box (``CU_TENSOR_MAP_SWIZZLE_*``): 16-byte chunk c of
row r at c ^ (r % (S / 16)) within each S-byte row span; ``none``: rows back to back."""


@dataclass(frozen=True)
class TmaMap:
    """One operand's 2-D TMA tensor map as ``[tma]`` declares it."""

    box: tuple[expr.Expr, expr.Expr]
    """The box (inner, outer) in elements: along the contiguous dimension and across rows."""
    swizzle: str = "128B"
    """The box's layout in shared memory, one of :data:`TMA_SWIZZLES`; the inner box must fit
    in the swizzle's span (128 bytes for ``128B``), or be a multiple of 16 bytes (``none``)."""


@dataclass(frozen=True)
class CeilingSpec:
    """The ``[ceiling]`` table of a ``kind = "ceiling"`` kernel."""

    instruction: str
    """The measured instruction exactly as the kernel file spells it, e.g.
    ``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32``."""
    mma_per_iteration: int
    """Instructions each warp issues (or, for wgmma, takes part in) per loop iteration."""
    blocks_per_sm: int
    """Blocks launched per SM: the grid is blocks_per_sm x the SM count."""

    @property
    def shape(self) -> tuple[int, int, int]:
        """m, n, k of the instruction (``m16n8k16``)."""
        match = _MMA.match(self.instruction)
        return int(match["m"]), int(match["n"]), int(match["k"])

    @property
    def family(self) -> str:
        """``mma.sync`` (one warp's instruction) or ``wgmma`` (a warpgroup's, sm_90a)."""
        return "wgmma" if self.instruction.startswith("wgmma") else "mma.sync"

    @property
    def warps_per_instruction(self) -> int:
        """Warps that issue one instruction together: 1 for mma.sync, 4 for wgmma."""
        return _WARPS_PER_MMA[self.family]

    @property
    def flops_per_instruction(self) -> int:
        """One warp's share of the instruction's 2 m n k FLOP (all of it for mma.sync, a
        quarter for a warpgroup's wgmma)."""
        m, n, k = self.shape
        return 2 * m * n * k // self.warps_per_instruction


@dataclass(frozen=True)
class KernelSpec:
    """What one kernel file declares about itself."""

    path: Path
    entry: str
    summary: str
    precision: str
    min_arch: str
    block: tuple[expr.Expr, ...]
    grid: tuple[expr.Expr, ...]
    dynamic_smem_bytes: expr.Expr
    layout_b: str = "row"
    layout_a: str = "row"
    """A (M x K) as stored: ``row`` (lda = K) or ``col`` (lda = M)."""
    layout_c: str = "row"
    """C (and D) (M x N) as stored: ``row`` (ldc = N) or ``col`` (ldc = M)."""
    c_type: str = "fp32"
    """The element type the kernel writes C in (and reads it in, when beta != 0)."""
    blas_strict: bool = False
    """Reading C when beta = 0 is a failure, not a note (BLAS leaves C unset then)."""
    fp32_via: str = ""
    """An FP32 kernel that computes on tensor cores says how (:data:`FP32_VIA`); "" holds it
    to FP32 accuracy and the FP32 FMA peak."""
    nondeterministic: bool = False
    """The kernel's output may change in its last bits between identical runs (atomics whose
    order changes): a note with the size of the difference instead of a failure."""
    constraints: tuple[expr.Expr, ...] = ()
    carveout_pct: int | None = None
    predicted: str = ""
    params: dict[str, int] = field(default_factory=dict)
    variants: dict[str, dict[str, int]] = field(default_factory=dict)
    tune: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """The space ``harness tune`` sweeps: parameter -> candidate values."""
    representative: str | None = None
    """The variant that stands for the file in a default ``harness run`` (the first when not
    named; the file's own parameters when it has no variants)."""
    tuned: dict[str, dict[str, int]] = field(default_factory=dict)
    """Tuned defaults pinned per arch (``[tuned.sm_90]``), over [params], under a variant."""
    model: dict[str, expr.Expr] = field(default_factory=dict)
    """The napkin model's inputs ([model]): tile_m, tile_n (C per block: each A tile is read
    once per block column, each B tile once per block row), smem_loads and fmas (shared-load
    instructions and FMAs per thread per k step), and optionally the shared-memory wavefront
    pairs of :data:`MODEL_WAVEFRONT_KEYS`."""
    kind: str = "gemm"
    """One of :data:`KINDS`; only ``gemm`` kernels take the GEMM ABI."""
    ceiling: CeilingSpec | None = None
    """The ``[ceiling]`` table (kind = "ceiling" only)."""
    budget: dict[str, int] = field(default_factory=dict)
    """``[budget]``: key of :data:`BUDGET_KEYS` -> its limit (an integer); the build must stay
    within every one declared (checked by the pytest plugin and ``harness.testing``)."""
    tma: dict[str, TmaMap] = field(default_factory=dict)
    """``[tma]``: operand (A, B, C) -> its 2-D tensor map (box and swizzle; zero fill outside
    the matrix for loads, stores clipped to it), which the harness builds for every launch and
    passes after C (``.param .align 64 .b8 name[128]``, in TMA_OPERANDS order). A and B hold
    the input precision's elements (B as ``layout_b`` stores it), C the ``c_type``'s: a kernel
    writes C with TMA tensor stores (``cp.async.bulk.tensor...global.shared::cta``), and may
    load it through the same map when beta != 0. With a declared ``signature`` the maps go
    where its ``tmap_X`` entries say instead."""
    signature: tuple[Param, ...] | None = None
    """The declared parameter list (``signature = [...]``, harness.kernels.signature); None:
    the common GEMM ABI (:data:`DEFAULT_SIGNATURE`)."""
    tmaps: dict[str, TensorMapSpec] = field(default_factory=dict)
    """``[tmaps.X]``: operand -> its tensor map as the kernel wants it (rank 1..5, shape,
    strides, box, ...), for a signature's ``tmap_X``."""
    cluster: tuple[expr.Expr, ...] = ()
    """Thread-block cluster dimensions (``cluster_dims = ["2", "1", "1"]``, formulas over the
    parameters), or those of ``__cluster_dims__(x, y, z)`` in a .cu source when the spec
    says nothing; empty: no cluster."""
    cluster_from: str = ""
    """Where :attr:`cluster` came from: ``spec``, ``source`` (``__cluster_dims__``) or ``""``."""
    block_order: str = "default"
    """``block_order``: one of :data:`BLOCK_ORDERS`; anything but ``default`` is launched with
    the cluster scheduling-policy launch attribute."""
    macros: bool | tuple[str, ...] | None = None
    """``macros``: which parameters a .cu file is compiled with as ``-DNAME=VALUE`` (NVRTC):
    true (all), false (none), a list of [params] names, or None (not declared: the rule of
    :meth:`passes_as_macro`)."""
    template_params: frozenset[str] = frozenset()
    """The [params] names the entry's template arguments use (``gemm<BM, BN>``): their values
    reach the kernel through the name NVRTC instantiates."""
    macro_tested: frozenset[str] = frozenset()
    """Of :attr:`template_params`, those the source tests in a preprocessor directive
    (``#if``, ``#ifdef``, ``#ifndef``, ``#elif``): it uses them as macros too."""

    def passes_as_macro(self, name: str) -> bool:
        """Whether the parameter ``name`` is passed to a .cu file as ``-DNAME=VALUE``. Declared
        ``macros`` decides; without it every parameter is a macro except those the entry's
        template arguments name (a ``template <int BM>`` kernel named ``gemm<BM>`` would read
        ``template <int 128>`` with ``-DBM=128``), unless the source tests them with ``#if``."""
        if self.macros is None:
            return name not in self.template_params or name in self.macro_tested
        if isinstance(self.macros, bool):
            return self.macros
        return name in self.macros

    @property
    def has_d(self) -> bool:
        """Whether the kernel writes a separate output D (C is then input only)."""
        return any(p.name in ("D", "tmap_D") for p in self.abi)

    @property
    def abi(self) -> tuple[Param, ...]:
        """The kernel's parameters in order: the declared signature or the common ABI."""
        return self.signature if self.signature is not None else DEFAULT_SIGNATURE

    @property
    def has_beta(self) -> bool:
        """Whether the kernel takes beta. Without it the kernel computes alpha A B with
        beta = 0 (C not read): the check battery skips its beta checks for that reason."""
        return has_beta(self.abi)

    @property
    def no_beta_reason(self) -> str:
        """Why the beta checks are skipped for this kernel; empty when it takes beta."""
        return ("" if self.has_beta else "its signature has no beta: it computes beta = 0 "
                "and does not read C")

    @property
    def has_alpha(self) -> bool:
        """Whether the kernel takes alpha (absent: alpha = 1)."""
        return has_alpha(self.abi)

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def entry_is_cxx(self) -> bool:
        """Whether ``entry`` is a C++ name (namespace, template arguments) that NVRTC lowers to
        the kernel's symbol, rather than the symbol itself."""
        return not _NAME.match(self.entry)

    @property
    def language(self) -> str:
        """``cu`` (NVRTC) or ``ptx`` (nvJitLink)."""
        return self.path.suffix.lstrip(".")

    @property
    def launch_parameters(self) -> tuple[tuple[str, int], ...]:
        """What a launch passes the kernel, in order: each parameter's label (``M i32``) and
        bytes. A ceiling kernel's ``(u64 sink, u32 iterations)``; the declared signature; or the
        common ABI followed by the [tma] maps (A, B, C order)."""
        if self.kind == "ceiling":
            return (("sink u64", 8), ("iterations u32", 4))
        params = [(param_label(p), param_bytes(p)) for p in self.abi]
        if self.signature is None:
            params += [(f"tmap_{o} (from [tma])", TMAP_BYTES) for o in TMA_OPERANDS
                       if o in self.tma]
        return tuple(params)

    def parameter_problem(self, cubin: bytes, symbol: str, ptx: str | None = None
                          ) -> str | None:
        """How the compiled kernel's parameters differ in count or sizes from what a launch
        passes (:attr:`launch_parameters`), with both lists; None when they agree or the
        compiled code does not say. ``ptx``: a .ptx kernel's text, whose ``.entry`` is read
        (names and types); otherwise the cubin's parameter records (sizes)."""
        found = ptx_entry_parameters(ptx, symbol) if ptx is not None else None
        where = f".entry {symbol} of the PTX"
        if found is None:
            sizes = cubin_parameter_sizes(cubin, symbol)
            if sizes is None:
                return None
            found = tuple(("", b) for b in sizes)
            where = f"{symbol} in the cubin (bytes each)"
        declared = self.launch_parameters
        difference = parameter_mismatch(declared, found)
        if difference is None:
            return None
        origin = ("the ceiling ABI" if self.kind == "ceiling"
                  else "its signature = [...]" if self.signature is not None
                  else "the common GEMM ABI" + (" and its [tma] maps" if self.tma else "")
                  + " (no signature declared)")
        return (f"{self.path}: the kernel's parameters do not match what the harness passes "
                f"from {origin}: {difference}\n"
                f"  declared {show_parameters(declared)}\n"
                f"  found    {show_parameters(found)} ({where})\n"
                "Make the kernel take the declared parameters, or declare its own in order "
                "with signature = [...] (README, 'Other signatures'); a launch with the wrong "
                "parameters reads garbage.")


def read_spec(path: Path) -> KernelSpec:
    """Parse and validate the spec block of the kernel file at ``path``."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the kernel file: {exc.strerror}") from None
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError(f"{path}:{line}: the kernel file is not UTF-8 (byte 0x{raw[exc.start]:02x} "
                        f"at offset {exc.start}); save it as UTF-8") from None
    return parse_spec(source, path)


def normalize_text(source: str) -> str:
    """``source`` without a leading UTF-8 byte-order mark, its line ends made ``\\n`` (CRLF
    and lone CR, as Windows and old Mac editors save them): what the spec is read from."""
    return source.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def parse_spec(source: str, path: Path) -> KernelSpec:
    """Parse the spec block of ``source`` (the text of the file at ``path``)."""
    if path.suffix not in (".cu", ".ptx"):
        raise SpecError(f"{path}: expected a .cu or .ptx kernel file, found {path.suffix!r}")
    source = normalize_text(source)
    match = _SPEC_BLOCK.match(source)
    if not match:
        raise SpecError(_misplaced_spec_block(source, path) or _no_spec_block(source, path))
    try:
        table = tomllib.loads(match["body"])
    except tomllib.TOMLDecodeError as exc:
        # tomllib counts lines from the start of the block's body, and its message says so
        where = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        body_line = int(where[1]) if where else 1
        first = source[: match.start("body")].count("\n")
        line = first + body_line
        ran_on = next((first + i for i, text in enumerate(match["body"].split("\n"), 1)
                       if _CODE_LINE.match(text)), None)
        if ran_on is not None and ran_on <= line:
            raise SpecError(_unclosed(source, path, ran_on)) from None
        what = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        column = f", column {where[2]}" if where else ""
        raise SpecError(f"{path}:{line}: the spec block is not valid TOML{column}: {what}: "
                        f"{_line(source, line)!r}") from None

    def fail(message: str) -> SpecError:
        return SpecError(f"{path}: spec: {message}")

    unknown = sorted(set(table) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise fail("unknown key(s) " + ", ".join(_with_nearest(k, _REQUIRED + _OPTIONAL)
                                                 for k in unknown)
                   + f"; allowed keys: {', '.join(_REQUIRED + _OPTIONAL)}")
    kind = table.get("kind", "gemm")
    if kind not in KINDS:
        raise fail(f"kind must be one of {', '.join(KINDS)}, found {kind!r}")
    required = _REQUIRED
    if kind == "ceiling":
        required = tuple(k for k in _REQUIRED if k != "grid") + ("ceiling",)
        gemm_only = sorted(set(table) - set(_CEILING_KEYS))
        if gemm_only:
            raise fail(f"a ceiling kernel takes no {', '.join(gemm_only)}: it has no problem "
                       "size, and its grid is [ceiling] blocks_per_sm x the SM count; remove "
                       f"them (keys of a ceiling kernel: {', '.join(_CEILING_KEYS)})")
    elif "ceiling" in table:
        raise fail('[ceiling] belongs to ceiling microbenchmarks: add kind = "ceiling", or '
                   "remove the table from this GEMM kernel")
    missing = [k for k in required if k not in table]
    if missing:
        raise fail(f"missing required key(s) {', '.join(missing)}")
    for key in ("entry", "summary", "precision", "min_arch", "layout_a", "layout_b", "layout_c",
                "c_type", "predicted"):
        if key in table and not isinstance(table[key], str):
            raise fail(f"{key} must be a string, found {table[key]!r}")

    entry = table["entry"]
    if not _NAME.match(entry):
        if path.suffix != ".cu" or not CXX_ENTRY.match(entry):
            raise fail(f"entry must be a C identifier (an extern \"C\" kernel or a .entry), or "
                       "in a .cu file a C++ name such as 'ns::kernel<128, BN>' (template "
                       f"arguments may name [params]), found {entry!r}")
    _check_entry_defined(source[match.end():], entry, path)
    precision = table["precision"]
    if precision not in PRECISIONS:
        raise fail(f"precision must be one of {', '.join(PRECISIONS)}, found {precision!r}")
    layout_b = table.get("layout_b", "row")
    if layout_b not in LAYOUTS:
        raise fail(f"layout_b must be 'row' or 'col', found {layout_b!r}")
    for key in ("layout_a", "layout_c"):
        if table.get(key, "row") not in LAYOUTS:
            raise fail(f"{key} must be 'row' or 'col', found {table[key]!r}")
    if table["min_arch"] not in ARCHS:
        raise fail(f"min_arch {table['min_arch']!r} is not an architecture the harness knows; "
                   f"expected one of {', '.join(ARCHS)}")
    c_type = table.get("c_type", "fp32")
    if c_type not in C_TYPES:
        raise fail(f"c_type must be one of {', '.join(C_TYPES)}, found {c_type!r}")
    if c_type not in ("fp32", precision):
        allowed = "\"fp32\"" + (f" or \"{precision}\"" if precision in C_TYPES[1:] else "")
        raise fail(f"c_type {c_type!r} with {precision} inputs: a 16-bit C must be the inputs' "
                   f"own type, the pairs cuBLAS (the baseline) offers; use c_type = {allowed}")
    fp32_via = table.get("fp32_via", "")
    if fp32_via and (precision != "fp32" or fp32_via not in FP32_VIA):
        raise fail(f"fp32_via {fp32_via!r}: an FP32 kernel that computes on tensor cores names "
                   f"how, one of {', '.join(FP32_VIA)}" if precision == "fp32" else
                   f"fp32_via is for precision = \"fp32\" kernels; this one is {precision}")
    for key in ("blas_strict", "nondeterministic"):
        if not isinstance(table.get(key, False), bool):
            raise fail(f"{key} must be true or false, found {table[key]!r}")
    carveout = table.get("carveout_pct")
    if carveout is not None and (
        isinstance(carveout, bool) or not isinstance(carveout, int) or not 0 <= carveout <= 100
    ):
        raise fail(f"carveout_pct must be an integer percent 0..100, found {carveout!r}")

    params = _int_table(table.get("params", {}), "params", fail)
    variants = _param_sets(table.get("variants", {}), "variants", params, fail)
    for name in variants:
        if not _NAME.match(name):
            raise fail(f"variant name {name!r} must be letters, digits and '_'")
    representative = table.get("representative")
    if representative is not None and (not isinstance(representative, str)
                                       or representative not in variants):
        raise fail(f"representative {representative!r} is not one of the variants "
                   f"({', '.join(variants) or 'none declared'})")

    tune = {}
    raw_tune = table.get("tune", {})
    if not isinstance(raw_tune, dict):
        raise fail(f"tune must be a table of NAME = [values], found {raw_tune!r}")
    for name, values in raw_tune.items():
        if name not in params:
            raise fail(f"tune.{name}: {name} is not declared in [params]")
        if (not isinstance(values, list) or not values
                or any(isinstance(v, bool) or not isinstance(v, int) for v in values)):
            raise fail(f"tune.{name} must be a non-empty list of integers, found {values!r}")
        tune[name] = tuple(values)
    tuned = _param_sets(table.get("tuned", {}), "tuned", params, fail)
    for arch_name in tuned:
        if arch_name not in ARCHS:
            raise fail(f"[tuned.{arch_name}]: {arch_name!r} is not an architecture the harness "
                       f"knows; expected one of {', '.join(ARCHS)}")

    raw_model = table.get("model", {})
    if (not isinstance(raw_model, dict)
            or set(raw_model) - set(MODEL_KEYS) - set(MODEL_WAVEFRONT_KEYS)
            or (raw_model and set(MODEL_KEYS) - set(raw_model))):
        raise fail(f"model must be a table with keys {', '.join(MODEL_KEYS)} (and optionally "
                   f"{', '.join(MODEL_WAVEFRONT_KEYS)}), found {raw_model!r}")
    for op in ("ld", "st"):
        pair = {f"smem_{op}_requests", f"smem_{op}_wavefronts"}
        if len(pair & set(raw_model)) == 1:
            raise fail(f"model: {' and '.join(sorted(pair))} go together (wavefronts per "
                       f"request is their ratio); found only {(pair & set(raw_model)).pop()}")
    model = {key: _one_formula(value, frozenset(params), fail, f"model.{key}")
             for key, value in raw_model.items()}

    def formulas(key: str, *, names: frozenset[str], compare: bool = False) -> tuple:
        raw = table.get(key, [])
        if not isinstance(raw, list):
            raise fail(f"{key} must be a list, found {raw!r}")
        parsed = []
        for item in raw:
            try:
                e = expr.parse(item, allow_compare=compare)
            except SpecError as exc:
                raise fail(f"{key}: {exc}") from None
            unknown_names = sorted(e.names - names)
            if unknown_names:
                raise fail(f"{key}: formula {e.text!r} uses {', '.join(unknown_names)}; it may "
                           f"use only {', '.join(sorted(names))}")
            parsed.append(e)
        return tuple(parsed)

    param_names = frozenset(params)
    block = formulas("block", names=param_names)
    grid = formulas("grid", names=param_names | SHAPE_NAMES | {"SMS"})
    for key, dims in (("block", block), ("grid", grid))[: 1 if kind == "ceiling" else 2]:
        if not 1 <= len(dims) <= 3:
            raise fail(f"{key} must list 1 to 3 dimensions (x, y, z), found {len(dims)}")
    constraints = formulas("constraints", names=param_names | SHAPE_NAMES, compare=True)
    dynamic_smem = _one_formula(table.get("dynamic_smem_bytes", "0"), param_names | SHAPE_NAMES,
                                fail)

    tma = _tma_table(table.get("tma", {}), param_names, fail)
    signature, tmaps = _signature_and_maps(table, param_names | SHAPE_NAMES, tma, fail)
    if signature is not None and host_keys(signature):
        why = missing_setup(path, host_keys(signature))
        if why is not None:
            raise fail(why)
    cluster, cluster_from = _cluster(table, source[match.end():], path, param_names, fail)
    block_order = table.get("block_order", "default")
    if block_order not in BLOCK_ORDERS:
        raise fail(f"block_order must be one of {', '.join(BLOCK_ORDERS)}, found "
                   f"{block_order!r}")
    macros, template_params, macro_tested = _macros(table, entry, params,
                                                    source[match.end():], path, fail)

    return KernelSpec(
        path=path, entry=entry, summary=table["summary"].strip(), precision=precision,
        min_arch=table["min_arch"], block=block, grid=grid, dynamic_smem_bytes=dynamic_smem,
        layout_b=layout_b, c_type=c_type, blas_strict=table.get("blas_strict", False),
        fp32_via=fp32_via, nondeterministic=table.get("nondeterministic", False),
        constraints=constraints,
        carveout_pct=carveout,
        predicted=table.get("predicted", "").strip(), params=params, variants=variants,
        representative=representative,
        tune=tune, tuned=tuned, model=model, kind=kind,
        ceiling=(_ceiling_table(table["ceiling"], precision, source[match.end():], fail)
                 if kind == "ceiling" else None),
        tma=tma,
        budget=parse_budget(table.get("budget", {}), fail),
        layout_a=table.get("layout_a", "row"), layout_c=table.get("layout_c", "row"),
        signature=signature, tmaps=tmaps, cluster=cluster, cluster_from=cluster_from,
        block_order=block_order, macros=macros, template_params=template_params,
        macro_tested=macro_tested,
    )


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(?:if|ifdef|ifndef|elif)\b(?P<tested>.*)$", re.MULTILINE)
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


def _macros(table, entry: str, params: dict[str, int], body: str, path: Path, fail):
    """``macros`` checked (true, false or a list of [params] names; .cu files only), the
    [params] names the entry's template arguments use, and those of them the source tests in
    a preprocessor directive."""
    raw = table.get("macros")
    if raw is not None:
        if path.suffix != ".cu":
            raise fail("macros is for .cu files (NVRTC's -D); a .ptx kernel's [params] reach "
                       "its PTX macros (${NAME}, #if) always: remove the key")
        if isinstance(raw, list):
            if not all(isinstance(name, str) for name in raw):
                raise fail(f"macros must be true, false or a list of [params] names, found "
                           f"{raw!r}")
            unknown = sorted(set(raw) - set(params))
            if unknown:
                raise fail(f"macros names {', '.join(unknown)}, which [params] does not "
                           f"declare; declared: {', '.join(params) or 'none'}")
            raw = tuple(dict.fromkeys(raw))
        elif not isinstance(raw, bool):
            raise fail(f"macros must be true, false or a list of [params] names, found {raw!r}")
    arguments = entry.partition("<")[2] if "<" in entry else ""
    in_entry = frozenset(_IDENTIFIER.findall(arguments)) & set(params)
    tested = set()
    for directive in _DIRECTIVE.finditer(body):
        tested |= set(_IDENTIFIER.findall(directive["tested"]))
    return raw, in_entry, frozenset(in_entry & tested)


def _signature_and_maps(table, names: frozenset[str], tma: dict, fail):
    """``signature`` and ``[tmaps]``, checked against each other and [tma]: every ``tmap_X``
    has a map description ([tmaps.X], or [tma].X for a 2-D map of A, B or C), and every map
    described is passed."""
    if "signature" not in table:
        if "tmaps" in table:
            raise fail("[tmaps] describes tensor maps a declared signature passes (tmap_X); add "
                       "signature = [...] with them, or use [tma] for the common ABI")
        return None, {}
    signature = parse_signature(table["signature"], names, fail)
    tmaps = parse_tmaps(table.get("tmaps", {}), names, fail)
    passed = set(tensor_map_operands(signature))
    for operand in sorted(set(tma) & set(tmaps)):
        raise fail(f"tensor map {operand} is described twice, in [tma] and [tmaps.{operand}]; "
                   "keep one")
    for operand in sorted((set(tma) | set(tmaps)) - passed):
        raise fail(f"a tensor map of {operand} is described but the signature does not pass "
                   f"tmap_{operand}; add it where the kernel takes it, or remove the map")
    for operand in sorted(passed - set(tma) - set(tmaps)):
        raise fail(f"signature passes tmap_{operand} but no map describes it; add "
                   f"[tmaps.{operand}] (rank, shape, strides, box, ...) or [tma] {operand}")
    return signature, tmaps


_CLUSTER_DIMS = re.compile(r"__cluster_dims__\s*\(([^()]*)\)")


def _cluster(table, body: str, path: Path, names: frozenset[str], fail):
    """``cluster_dims`` from the spec (formulas over the parameters), else the
    ``__cluster_dims__(x, y, z)`` of a .cu source (its arguments as formulas: literals or
    [params] names, which the build passes as -D defines)."""
    if "cluster_dims" in table:
        raw = table["cluster_dims"]
        if not isinstance(raw, list) or not 1 <= len(raw) <= 3:
            raise fail(f"cluster_dims must list 1 to 3 dimensions (x, y, z), found {raw!r}")
        return tuple(_one_formula(d, names, fail, "cluster_dims") for d in raw), "spec"
    if path.suffix != ".cu":
        return (), ""
    found = {tuple(a.strip() for a in m[1].split(",")) for m in _CLUSTER_DIMS.finditer(body)}
    if not found:
        return (), ""
    if len(found) > 1:
        raise fail("the source declares different __cluster_dims__ "
                   f"({'; '.join(', '.join(f) for f in sorted(found))}); say which with "
                   'cluster_dims = ["x", "y", "z"] in the spec')
    dims = found.pop()
    try:
        parsed = tuple(expr.parse(d) for d in dims)
    except SpecError:
        parsed = ()
    if not 1 <= len(parsed) <= 3 or any(e.names - names for e in parsed):
        raise fail(f"__cluster_dims__({', '.join(dims)}) in the source is not integers or "
                   '[params] names; declare cluster_dims = ["x", "y", "z"] in the spec')
    return parsed, "source"


_BOUNDS = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
_CU_ENTRY = re.compile(rf"__global__\s+{_BOUNDS}void\s+{_BOUNDS}([A-Za-z_]\w*)\s*\(")
_PTX_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)")


def _opening_line(source: str) -> int:
    return source[: source.index("/*")].count("\n") + 1


def _unclosed(source: str, path: Path, code_line: int | None) -> str:
    """The error for a spec block whose closing ``*/`` is missing (before ``code_line``, the
    first line of code it ran into, where one is known)."""
    opened = _opening_line(source)
    where = (f"before line {code_line} ({_line(source, code_line)!r}), where the code starts"
             if code_line else "anywhere in the file")
    return (f"{path}:{opened}: the spec block opened here ('/* harness') is not closed {where}; "
            "end it with '*/' on the line after its last TOML line")


def _misplaced_spec_block(source: str, path: Path) -> str | None:
    """The error for a spec block that is there but cannot be read as one: never closed, a
    first line with more than '/* harness', or not at the top of the file. None when the file
    has no '/* harness' line at all."""
    opener = _SPEC_OPENER.match(source)
    if opener:
        if opener["rest"].strip():
            return (f"{path}:{_opening_line(source)}: the spec block's first line must be "
                    f"'/* harness' alone, found {_line(source, _opening_line(source))!r}; put "
                    "the TOML on the lines after it and '*/' on a line of its own")
        if "*/" not in source[opener.end():]:
            first = source[: opener.end()].count("\n") + 1
            code = next((i for i, text in enumerate(source.split("\n"), 1)
                         if i > first and _CODE_LINE.match(text)), None)
            return _unclosed(source, path, code)
        return None
    later = _SPEC_OPENER_ANYWHERE.search(source)
    if later is None:
        head = source.split("*/", 1)[0] if "*/" in source else ""
        entry = re.search(r"^[ \t]*entry[ \t]*=", head, re.MULTILINE)
        if re.match(r"\A\s*/\*[ \t]*harness\b", source, re.IGNORECASE) or (
                entry and re.match(r"\A\s*/\*", source)):
            return (f"{path}:{_opening_line(source)}: the spec block's first line must be "
                    f"'/* harness' (lower case, alone), found "
                    f"{_line(source, _opening_line(source))!r}")
        if entry:
            line = head[: entry.start()].count("\n") + 1
            return (f"{path}:{line}: this looks like a spec block without its first line "
                    "('entry = ...' before a closing '*/'): start the file with '/* harness' "
                    "on a line of its own")
        return None
    line = source[: later.start()].count("\n") + 1
    first = next(i for i, text in enumerate(source.split("\n"), 1) if text.strip())
    return (f"{path}:{line}: the spec block ('/* harness') must open the file, with only blank "
            f"lines before it; line {first} comes first ({_line(source, first)!r}): move the "
            "block to the top")


def _no_spec_block(source: str, path: Path) -> str:
    """The error for a file with no spec block: what one looks like, filled with the entry
    symbols found in the file, ready to paste at its top."""
    found = list(dict.fromkeys((_PTX_ENTRY if path.suffix == ".ptx" else _CU_ENTRY)
                               .findall(source)))
    entry = found[0] if found else "my_kernel"
    seen = (f"  # found in the file: {', '.join(found)}" if found
            else "  # no __global__ function / .entry found: name yours")
    mangled = ""
    if path.suffix == ".cu" and found and 'extern "C"' not in source:
        mangled = ("\nDeclare the kernel extern \"C\" so that its symbol is its name (C++ "
                   "mangles it otherwise).")
    return (f"{path}: no spec block: a kernel file starts with a block comment whose first "
            "line is '/* harness' and whose body is TOML, ended by '*/'. A minimal one to paste "
            "at the top (README, 'Adding a kernel', has every key):\n\n"
            "/* harness\n"
            f'entry = "{entry}"{seen}\n'
            'summary = "What this kernel does."\n'
            'precision = "fp32"                     # inputs: fp32, tf32, bf16 or fp16\n'
            'min_arch = "sm_80"\n'
            'block = ["16", "16"]                   # threads per block (x, y, z)\n'
            'grid = ["cdiv(N, 16)", "cdiv(M, 16)"]  # blocks, in M, N, K and [params]\n'
            "*/\n\n"
            "The kernel takes the common GEMM ABI, row-major, C = alpha A B + beta C:\n"
            "(int M, int N, int K, float alpha, const T* A, const T* B, float beta, float* C)"
            + mangled)


def _with_nearest(key: str, allowed) -> str:
    """``key``, with the closest allowed key when one is close (a misspelling)."""
    # ties go to the key listed first (layout_b before the rarer layout_a, layout_c)
    scored = [(difflib.SequenceMatcher(None, key, a).ratio(), -i, a)
              for i, a in enumerate(allowed)]
    score, _, best = max(scored)
    return f"{key!r} (did you mean {best!r}?)" if score >= 0.6 else repr(key)


def _line(source: str, number: int) -> str:
    lines = source.splitlines()
    return lines[number - 1].strip() if 0 < number <= len(lines) else ""


def parse_budget(raw, fail=SpecError) -> dict[str, int]:
    """A ``[budget]`` table (or the keyword arguments of ``harness.testing.assert_builds``)
    checked: keys among :data:`BUDGET_KEYS`, values non-negative integers (a percent at most
    100 for ``min_occupancy_pct``). ``fail(message)`` makes the exception raised."""
    if not isinstance(raw, dict):
        raise fail(f"budget must be a table with keys among {', '.join(BUDGET_KEYS)}, found "
                   f"{raw!r}")
    unknown = sorted(set(raw) - set(BUDGET_KEYS))
    if unknown:
        raise fail("budget: unknown key(s) " + ", ".join(_with_nearest(k, BUDGET_KEYS)
                                                         for k in unknown)
                   + f"; allowed keys: {', '.join(BUDGET_KEYS)}")
    for key, value in raw.items():
        top = 100 if key == "min_occupancy_pct" else None
        if (isinstance(value, bool) or not isinstance(value, int) or value < 0
                or (top is not None and value > top)):
            what = "an integer percent 0..100" if top else "a non-negative integer"
            raise fail(f"budget.{key} must be {what}, found {value!r}")
    return {key: raw[key] for key in BUDGET_KEYS if key in raw}


def budget_problems(build_row: Mapping[str, Any] | Any, budget: Mapping[str, int]) -> list[str]:
    """Every limit of ``budget`` (keys of ``[budget]``) that the build exceeds, one line each,
    e.g. ``"registers 168 > max_registers 128"``. ``build_row``: a row of
    :func:`harness.compiler.offline.build_row` (or a record with ``to_dict()``, the API's Build);
    a row that did not build has nothing to judge (no problems)."""
    budget = parse_budget(dict(budget), HarnessError)
    row = build_row.to_dict() if hasattr(build_row, "to_dict") else build_row
    if row.get("registers") is None:
        return []
    problems = []
    limit = budget.get("max_registers")
    if limit is not None and row["registers"] > limit:
        problems.append(f"registers {row['registers']} > max_registers {limit}")
    limit = budget.get("max_spill_bytes")
    stores, loads = row["spill_store_bytes"], row["spill_load_bytes"]
    if limit is not None and stores + loads > limit:
        problems.append(f"spill bytes {stores + loads} > max_spill_bytes {limit} "
                        f"(stores {stores}, loads {loads})")
    limit = budget.get("max_smem_bytes")
    static, dynamic = row["static_smem_bytes"], row["dynamic_smem_bytes"]
    if limit is not None and static + dynamic > limit:
        size = "x".join(map(str, row.get("size") or ()))
        problems.append(f"smem bytes {static + dynamic} > max_smem_bytes {limit} "
                        f"(static {static} + dynamic {dynamic} at {size})")
    limit = budget.get("min_occupancy_pct")
    if limit is not None and row["occupancy_pct"] < limit:
        problems.append(f"occupancy {row['occupancy_pct']:g}% < min_occupancy_pct {limit} "
                        f"(limited by {row['limiter']})")
    return problems


def _tma_table(raw, names: frozenset[str], fail) -> dict[str, TmaMap]:
    """[tma]: OPERAND = [inner box, outer box] (formulas over the parameters; 128-byte swizzle),
    or OPERAND = { box = [inner, outer], swizzle = "128B" | "64B" | "32B" | "none" }."""
    if not isinstance(raw, dict) or set(raw) - set(TMA_OPERANDS):
        raise fail(f"tma must be a table with keys among {', '.join(TMA_OPERANDS)} (the "
                   f"operands to pass as tensor maps), found {raw!r}")
    maps = {}
    for operand in TMA_OPERANDS:
        if operand not in raw:
            continue
        value, swizzle = raw[operand], "128B"
        if isinstance(value, dict):
            extra = sorted(set(value) - {"box", "swizzle"})
            if extra or "box" not in value:
                raise fail(f"tma.{operand} as a table takes box = [inner, outer] and optionally "
                           f"swizzle; found keys {', '.join(sorted(value)) or 'none'}")
            swizzle = value.get("swizzle", "128B")
            if swizzle not in TMA_SWIZZLES:
                raise fail(f"tma.{operand}.swizzle must be one of "
                           f"{', '.join(map(repr, TMA_SWIZZLES))}, found {swizzle!r}")
            value = value["box"]
        if not isinstance(value, list) or len(value) != 2:
            raise fail(f"tma.{operand} must be [inner, outer]: the box in elements along the "
                       f"contiguous dimension and across rows, found {value!r}")
        box = tuple(_one_formula(b, names, fail, f"tma.{operand}") for b in value)
        maps[operand] = TmaMap(box, swizzle)
    return maps


def _ceiling_table(raw, precision: str, body: str, fail) -> CeilingSpec:
    """The [ceiling] table: an mma instruction the file issues, of the spec's precision."""
    if not isinstance(raw, dict):
        raise fail(f"ceiling must be a table with keys {', '.join(CEILING_TABLE_KEYS)}, found "
                   f"{raw!r}")
    unknown = sorted(set(raw) - set(CEILING_TABLE_KEYS))
    missing = [k for k in CEILING_TABLE_KEYS if k not in raw]
    if unknown or missing:
        raise fail(f"ceiling must have exactly the keys {', '.join(CEILING_TABLE_KEYS)}; "
                   f"found unknown {', '.join(unknown) or 'none'}, missing "
                   f"{', '.join(missing) or 'none'}")
    instruction = raw["instruction"]
    if not isinstance(instruction, str) or not _MMA.match(instruction):
        raise fail("ceiling.instruction must be an mma.sync or wgmma.mma_async instruction "
                   "with its shape, e.g. 'mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32' "
                   "or 'wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16', found "
                   f"{instruction!r}")
    want = _MMA_TYPES.get(precision)
    if want is None or want not in instruction + ".":
        raise fail(f"ceiling.instruction {instruction!r} does not take {precision} inputs: "
                   f"expected its operand types to read {want or 'an mma input type'!r} "
                   "(precision and instruction must agree)")
    included = re.search(r"^\s*#\s*include\b", body, re.MULTILINE)
    if instruction not in body and not included:  # an included body: compiling shows it
        raise fail(f"ceiling.instruction {instruction!r} does not appear in the kernel's code; "
                   "name the instruction the kernel issues, spelled as in the file")
    for key in ("mma_per_iteration", "blocks_per_sm"):
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise fail(f"ceiling.{key} must be a positive integer, found {value!r}")
    return CeilingSpec(instruction, raw["mma_per_iteration"], raw["blocks_per_sm"])


def _one_formula(raw, names: frozenset[str], fail, key: str = "dynamic_smem_bytes") -> expr.Expr:
    return expr.parse_using(raw, names, fail, key)


def _param_sets(raw, key: str, params: dict[str, int], fail) -> dict[str, dict[str, int]]:
    """A table of named parameter sets ([variants], [tuned]) over the declared [params]."""
    if not isinstance(raw, dict):
        raise fail(f"{key} must be a table of named parameter sets, found {raw!r}")
    sets = {}
    for name, values in raw.items():
        values = _int_table(values, f"{key}.{name}", fail)
        extra = sorted(set(values) - set(params))
        if extra:
            raise fail(f"{key}.{name} sets {', '.join(extra)}, which [params] does not "
                       "declare; declare a default for every parameter in [params]")
        sets[name] = values
    return sets


def _int_table(raw, where: str, fail) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise fail(f"{where} must be a table of NAME = integer, found {raw!r}")
    for name, value in raw.items():
        if not _NAME.match(name) or name in SHAPE_NAMES:
            raise fail(f"{where}: parameter name {name!r} must be a C identifier other than "
                       "M, N, K")
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(f"{where}.{name} must be an integer, found {value!r}")
    return dict(raw)


def _check_entry_defined(body: str, entry: str, path: Path) -> None:
    if path.suffix == ".ptx" and re.search(r"^\s*#\s*include\b", body, re.MULTILINE):
        return  # the entry may be in the included body; compiling finds it or says it is missing
    if path.suffix == ".ptx":
        pattern = rf"\.entry\s+{re.escape(entry)}\b"
        how = f"'.visible .entry {entry}(...)'"
    elif entry.startswith("_Z"):
        return  # a mangled symbol: the compiler's report finds it or says it is missing
    elif not _NAME.match(entry):  # a C++ name: its last identifier is a __global__ function
        base = re.sub(r"<.*$", "", entry).split("::")[-1].strip()
        pattern = rf"__global__[^;{{]*\b{re.escape(base)}\s*\("
        how = f"'__global__ void {base}(...)' (a template, or in a namespace)"
    else:
        pattern = rf"__global__[^;{{]*\b{re.escape(entry)}\s*\("
        how = f"'extern \"C\" __global__ void {entry}(...)'"
    if not re.search(pattern, body):
        raise SpecError(f"{path}: spec: entry symbol {entry!r} is not defined in the file; "
                        f"expected {how}")
