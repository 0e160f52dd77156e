"""Kernel specs: the TOML block at the top of every kernel file, parsed and validated.

A kernel file starts with a block comment whose first line is ``/* harness``; its body is TOML
(see README "Adding a kernel"). Formulas are parsed by ``harness.kernels.expr``, never evaluated
as code. The block is found (and what is wrong with it said) by spec_text.py, its harder tables
read by spec_tables.py, its ``[budget]`` by budget.py.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.archs import ARCHS
from harness.errors import HarnessError, SpecError
from harness.kernels import expr
from harness.kernels.budget import (  # noqa: F401 (BUDGET_KEYS, budget_problems: their old home)
    BUDGET_KEYS,
    budget_problems,
    parse_budget,
)
from harness.kernels.fp8_spec import Fp8Spec, fp8_table
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
    ptx_entry_parameters,
    show_parameters,
)
from harness.kernels.spec_tables import (
    SHAPE_NAMES,
    TMA_OPERANDS,
    CeilingSpec,
    TmaMap,
    ceiling_table,
    cluster_of,
    int_table,
    macros_of,
    one_formula,
    param_sets,
    signature_and_maps,
    tma_table,
    tune_tables,
)
from harness.kernels.spec_text import (
    CODE_LINE,
    CXX_ENTRY,
    NAME,
    SPEC_BLOCK,
    check_entry_defined,
    line_of,
    misplaced_spec_block,
    no_spec_block,
    normalize_text,
    read_source,
    unclosed,
    with_nearest,
)

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
CEILING_PRECISIONS = (*PRECISIONS, "fp8")
"""Ceiling kernels may issue FP8 (e4m3) mma; an FP8 GEMM is declared (fp8_spec.py) but not
yet judged by the runs (issue 36)."""
LAYOUTS = ("row", "col")
MODEL_KEYS = ("tile_m", "tile_n", "smem_loads", "fmas")
"""The napkin model's required keys ([model])."""
MODEL_WAVEFRONT_KEYS = ("smem_ld_requests", "smem_ld_wavefronts", "smem_st_requests",
                        "smem_st_wavefronts")
"""Optional [model] keys, in pairs: shared-memory load (store) instructions a warp issues and
the wavefronts its layout predicts they take, over any one stretch of the kernel (a k step,
a tile); their ratio is the predicted wavefronts per request (1 = no bank conflicts), which
``harness profile`` sets beside Nsight Compute's."""
_REQUIRED = ("entry", "summary", "precision", "min_arch", "block", "grid")
_OPTIONAL = ("layout_b", "c_type", "blas_strict", "nondeterministic", "representative",
             "dynamic_smem_bytes", "constraints", "carveout_pct", "predicted", "params",
             "variants", "tune", "tuned", "model", "kind", "ceiling", "tma", "budget",
             "signature", "layout_a", "layout_c", "tmaps", "cluster_dims", "block_order",
             "fp32_via", "macros", "fp8")
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
    fp8: Fp8Spec | None = None
    """An FP8 GEMM's formats, scales and promotion (``[fp8]``, harness.kernels.fp8_spec)."""
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
    kind: str = ""
    """The kind's name (``kind = "..."``; harness.kinds finds it); every kind sets it."""
    ceiling: CeilingSpec | None = None
    """The ``[ceiling]`` table (kind = "ceiling" only)."""
    buffers: Any = None
    """Buffers, dims, args, reference and bytes (kind = "buffers" only)."""
    kind_spec: Any = None
    """What a kind parses from its own keys (harness.kinds.base.Kind.parse_table): its dims,
    buffers, reference; None for a kind that keeps nothing there."""
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
        return not NAME.match(self.entry)

    @property
    def language(self) -> str:
        """``cu`` (NVRTC) or ``ptx`` (nvJitLink)."""
        return self.path.suffix.lstrip(".")

    @property
    def launch_parameters(self) -> tuple[tuple[str, int], ...]:
        """What a launch passes the kernel, in order: each parameter's label (``M i32``) and
        bytes. A ceiling kernel's ``(u64 sink, u32 iterations)``; the declared signature; or the
        common ABI followed by the [tma] maps (A, B, C order); a kind whose spec part fixes
        its own ABI (``kind_spec.launch_parameters``, attention's) gives that."""
        own = getattr(self.kind_spec, "launch_parameters", None)
        if own is not None:
            return tuple(own)
        if self.ceiling is not None:
            return (("sink u64", 8), ("iterations u32", 4))
        if self.buffers is not None:
            return tuple((a.label, a.nbytes) for a in self.buffers.args)
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
        origin = (f"the {self.kind} ABI" if getattr(self.kind_spec, "launch_parameters", None)
                  else "the ceiling ABI" if self.ceiling is not None
                  else "its args = [...]" if self.buffers is not None
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
    return parse_spec(read_source(Path(path)), Path(path))


def parse_spec(source: str, path: Path) -> KernelSpec:
    """Parse the spec block of ``source`` (the text of the file at ``path``)."""
    if path.suffix not in (".cu", ".ptx"):
        raise SpecError(f"{path}: expected a .cu or .ptx kernel file, found {path.suffix!r}")
    source = normalize_text(source)
    match = SPEC_BLOCK.match(source)
    if not match:
        raise SpecError(misplaced_spec_block(source, path) or no_spec_block(source, path))
    try:
        table = tomllib.loads(match["body"])
    except tomllib.TOMLDecodeError as exc:
        # tomllib counts lines from the start of the block's body, and its message says so
        where = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        body_line = int(where[1]) if where else 1
        first = source[: match.start("body")].count("\n")
        line = first + body_line
        ran_on = next((first + i for i, text in enumerate(match["body"].split("\n"), 1)
                       if CODE_LINE.match(text)), None)
        if ran_on is not None and ran_on <= line:
            raise SpecError(unclosed(source, path, ran_on)) from None
        what = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        column = f", column {where[2]}" if where else ""
        raise SpecError(f"{path}:{line}: the spec block is not valid TOML{column}: {what}: "
                        f"{line_of(source, line)!r}") from None

    def fail(message: str) -> SpecError:
        return SpecError(f"{path}: spec: {message}")

    from harness import kinds

    try:
        kind = kinds.get(table.get("kind", kinds.DEFAULT))
    except HarnessError as exc:
        raise fail(f"kind: {exc}") from None
    return KernelSpec(**kind.parse_table(table, source, match, path, fail))


def gemm_shaped_fields(table: dict, source: str, match, path: Path, fail, *, kind: str,
                       ceiling: bool = False) -> dict:
    """The KernelSpec fields of a kernel launched as a GEMM is (block and grid formulas in the
    problem's M, N, K; the common keys): what the GEMM kind parses, and with ``ceiling`` a
    ceiling probe (no grid, no problem size, its ``[ceiling]`` table)."""
    unknown = sorted(set(table) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise fail("unknown key(s) " + ", ".join(with_nearest(k, _REQUIRED + _OPTIONAL)
                                                 for k in unknown)
                   + f"; allowed keys: {', '.join(_REQUIRED + _OPTIONAL)}")
    required = _REQUIRED
    if ceiling:
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
    if not NAME.match(entry):
        if path.suffix != ".cu" or not CXX_ENTRY.match(entry):
            raise fail(f"entry must be a C identifier (an extern \"C\" kernel or a .entry), or "
                       "in a .cu file a C++ name such as 'ns::kernel<128, BN>' (template "
                       f"arguments may name [params]), found {entry!r}")
    check_entry_defined(source[match.end():], entry, path)
    precision = table["precision"]
    if precision not in CEILING_PRECISIONS:
        raise fail(f"precision must be one of {', '.join(CEILING_PRECISIONS)}, found "
                   f"{precision!r}")
    fp8 = None if ceiling else fp8_table(table, precision, fail)
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
    if c_type not in ("fp32", precision) and fp8 is None:
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

    params = int_table(table.get("params", {}), "params", fail)
    variants = param_sets(table.get("variants", {}), "variants", params, fail)
    for name in variants:
        if not NAME.match(name):
            raise fail(f"variant name {name!r} must be letters, digits and '_'")
    representative = table.get("representative")
    if representative is not None and (not isinstance(representative, str)
                                       or representative not in variants):
        raise fail(f"representative {representative!r} is not one of the variants "
                   f"({', '.join(variants) or 'none declared'})")

    tune, tuned = tune_tables(table, params, fail)

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
    model = {key: one_formula(value, frozenset(params), fail, f"model.{key}")
             for key, value in raw_model.items()}

    def formulas(key: str, *, names: frozenset[str], compare: bool = False) -> tuple:
        return expr.formula_list(table, key, names, fail, compare)

    param_names = frozenset(params)
    block = formulas("block", names=param_names)
    grid = formulas("grid", names=param_names | SHAPE_NAMES | {"SMS"})
    for key, dims in (("block", block), ("grid", grid))[: 1 if ceiling else 2]:
        if not 1 <= len(dims) <= 3:
            raise fail(f"{key} must list 1 to 3 dimensions (x, y, z), found {len(dims)}")
    constraints = formulas("constraints", names=param_names | SHAPE_NAMES, compare=True)
    dynamic_smem = one_formula(table.get("dynamic_smem_bytes", "0"), param_names | SHAPE_NAMES,
                                fail)

    tma = tma_table(table.get("tma", {}), param_names, fail)
    signature, tmaps = signature_and_maps(table, param_names | SHAPE_NAMES, tma, fail)
    if signature is not None and host_keys(signature):
        why = missing_setup(path, host_keys(signature))
        if why is not None:
            raise fail(why)
    cluster, cluster_from = cluster_of(table, source[match.end():], path, param_names, fail)
    block_order = table.get("block_order", "default")
    if block_order not in BLOCK_ORDERS:
        raise fail(f"block_order must be one of {', '.join(BLOCK_ORDERS)}, found "
                   f"{block_order!r}")
    macros, template_params, macro_tested = macros_of(table, entry, params,
                                                    source[match.end():], path, fail)

    return dict(
        path=path, entry=entry, summary=table["summary"].strip(), precision=precision,
        min_arch=table["min_arch"], block=block, grid=grid, dynamic_smem_bytes=dynamic_smem,
        layout_b=layout_b, c_type=c_type, blas_strict=table.get("blas_strict", False),
        fp32_via=fp32_via, nondeterministic=table.get("nondeterministic", False), fp8=fp8,
        constraints=constraints,
        carveout_pct=carveout,
        predicted=table.get("predicted", "").strip(), params=params, variants=variants,
        representative=representative,
        tune=tune, tuned=tuned, model=model, kind=kind,
        ceiling=(ceiling_table(table["ceiling"], precision, source[match.end():], fail)
                 if ceiling else None),
        tma=tma,
        budget=parse_budget(table.get("budget", {}), fail),
        layout_a=table.get("layout_a", "row"), layout_c=table.get("layout_c", "row"),
        signature=signature, tmaps=tmaps, cluster=cluster, cluster_from=cluster_from,
        block_order=block_order, macros=macros, template_params=template_params,
        macro_tested=macro_tested,
    )


