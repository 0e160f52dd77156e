"""Kernel specs: the TOML block at the top of every kernel file, parsed and validated.

A kernel file starts with a block comment whose first line is ``/* harness``; its body is TOML
(see docs/spec.md). Formulas are parsed by ``harness.kernels.expr``, never evaluated
as code. The block is found (and what is wrong with it said) by spec_text.py, its harder tables
read by spec_tables.py, its ``[budget]`` by budget.py.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import SpecError
from harness.kernels import expr
from harness.kernels.budget import (  # noqa: F401 (BUDGET_KEYS, budget_problems: their old home)
    BUDGET_KEYS,
    budget_problems,
    parse_budget,
)
from harness.kernels.compiled_params import (
    cubin_parameter_sizes,
    parameter_mismatch,
    ptx_entry_parameters,
    show_parameters,
)
from harness.kernels.fp8_spec import Fp8Spec
from harness.kernels.signature import (
    DEFAULT_SIGNATURE,
    TMAP_BYTES,
    Param,
    has_alpha,
    has_beta,
    param_bytes,
    param_label,
)
from harness.kernels.spec_tables import (
    TMA_OPERANDS,
    CeilingSpec,
    TmaMap,
)
from harness.kernels.spec_text import (
    CODE_LINE,
    NAME,
    SPEC_BLOCK,
    line_of,
    misplaced_spec_block,
    no_spec_block,
    normalize_text,
    read_source,
    unclosed,
)
from harness.kernels.tmap_spec import TensorMapSpec

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
                "with signature = [...] (docs/gemm.md#other-signatures); a launch with the wrong "
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

    name = table.get("kind", kinds.DEFAULT)
    if not isinstance(name, str) or name not in kinds.names():
        raise fail(f"kind must be one of {', '.join(kinds.names())}, found {name!r}")
    kind = kinds.get(name)
    return KernelSpec(**kind.parse_table(table, source, match, path, fail))
