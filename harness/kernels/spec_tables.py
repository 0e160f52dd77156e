"""The tables and keys of a spec that need more than a type check: ``[tma]`` and its maps'
layouts, ``[ceiling]``, formulas, parameter sets, ``macros``, ``signature`` with ``[tmaps]``,
and ``cluster_dims`` (or the source's ``__cluster_dims__``). Each takes the spec's ``fail``
(a SpecError naming the file) and returns what KernelSpec holds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.archs import ARCHS
from harness.errors import SpecError
from harness.kernels import expr
from harness.kernels.signature import parse_signature, tensor_map_operands
from harness.kernels.spec_text import NAME
from harness.kernels.tmap_spec import parse_tmaps

SHAPE_NAMES = frozenset({"M", "N", "K"})
TMA_OPERANDS = ("A", "B", "C")
"""Operands a kernel may take as TMA tensor maps ([tma]), passed after C in this order."""
TMA_SWIZZLES = ("128B", "64B", "32B", "none")
"""Shared-memory layouts of a tensor map's box (``CU_TENSOR_MAP_SWIZZLE_*``): 16-byte chunk c of
row r at c ^ (r % (S / 16)) within each S-byte row span; ``none``: rows back to back."""
CEILING_TABLE_KEYS = ("instruction", "mma_per_iteration", "blocks_per_sm")
# the operand types an mma instruction names for each input precision (FP32 accumulate)
_MMA_TYPES = {"bf16": ".bf16.bf16.", "fp16": ".f16.f16.", "tf32": ".tf32.tf32.",
              "fp8": ".e4m3.e4m3."}
_MMA = re.compile(r"^(?P<family>mma\.sync|wgmma\.mma_async\.sync)\.aligned"
                  r"\.m(?P<m>\d+)n(?P<n>\d+)k(?P<k>\d+)\.[a-z0-9.]+$")
# warps that issue one instruction together: a wgmma is one warpgroup's (4 warps)
_WARPS_PER_MMA = {"mma.sync": 1, "wgmma": 4}


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


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(?:if|ifdef|ifndef|elif)\b(?P<tested>.*)$", re.MULTILINE)
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


def macros_of(table, entry: str, params: dict[str, int], body: str, path: Path, fail):
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


def signature_and_maps(table, names: frozenset[str], tma: dict, fail):
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


def cluster_of(table, body: str, path: Path, names: frozenset[str], fail):
    """``cluster_dims`` from the spec (formulas over the parameters), else the
    ``__cluster_dims__(x, y, z)`` of a .cu source (its arguments as formulas: literals or
    [params] names, which the build passes as -D defines)."""
    if "cluster_dims" in table:
        raw = table["cluster_dims"]
        if not isinstance(raw, list) or not 1 <= len(raw) <= 3:
            raise fail(f"cluster_dims must list 1 to 3 dimensions (x, y, z), found {raw!r}")
        return tuple(one_formula(d, names, fail, "cluster_dims") for d in raw), "spec"
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


def tma_table(raw, names: frozenset[str], fail) -> dict[str, TmaMap]:
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
        box = tuple(one_formula(b, names, fail, f"tma.{operand}") for b in value)
        maps[operand] = TmaMap(box, swizzle)
    return maps


def ceiling_table(raw, precision: str, body: str, fail) -> CeilingSpec:
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


def one_formula(raw, names: frozenset[str], fail, key: str = "dynamic_smem_bytes") -> expr.Expr:
    return expr.parse_using(raw, names, fail, key)


def param_sets(raw, key: str, params: dict[str, int], fail) -> dict[str, dict[str, int]]:
    """A table of named parameter sets ([variants], [tuned]) over the declared [params]."""
    if not isinstance(raw, dict):
        raise fail(f"{key} must be a table of named parameter sets, found {raw!r}")
    sets = {}
    for name, values in raw.items():
        values = int_table(values, f"{key}.{name}", fail)
        extra = sorted(set(values) - set(params))
        if extra:
            raise fail(f"{key}.{name} sets {', '.join(extra)}, which [params] does not "
                       "declare; declare a default for every parameter in [params]")
        sets[name] = values
    return sets


def int_table(raw, where: str, fail) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise fail(f"{where} must be a table of NAME = integer, found {raw!r}")
    for name, value in raw.items():
        if not NAME.match(name) or name in SHAPE_NAMES:
            raise fail(f"{where}: parameter name {name!r} must be a C identifier other than "
                       "M, N, K")
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(f"{where}.{name} must be an integer, found {value!r}")
    return dict(raw)


def tune_tables(table, params: dict[str, int], fail) -> tuple[dict[str, tuple[int, ...]],
                                                              dict[str, dict[str, int]]]:
    """A spec's ``[tune]`` (parameter -> the values ``harness tune`` sweeps) and its
    ``[tuned.<arch>]`` tables (the parameters pinned per arch), checked against ``params``."""
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
    tuned = param_sets(table.get("tuned", {}), "tuned", params, fail)
    for arch_name in tuned:
        if arch_name not in ARCHS:
            raise fail(f"[tuned.{arch_name}]: {arch_name!r} is not an architecture the harness "
                       f"knows; expected one of {', '.join(ARCHS)}")
    return tune, tuned
