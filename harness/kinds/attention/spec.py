"""The spec of a ``kind = "attention"`` kernel (docs/attention.md, "The spec").

Every attention kernel takes one ABI, so kernels and baselines are interchangeable::

    (const T* q, const T* k, const T* v, T* o, float* lse,
     int B, int H, int H_kv, int S_q, int S_kv, int D, float scale, int causal)

``T`` is the declared ``precision`` (BF16 or FP16), accumulation is FP32, ``lse`` is null for a
kernel that declares ``lse = false``, and ``causal`` is 1 for the bottom-right causal mask.
Grid, block and dynamic shared memory are formulas over the dims (``B, H, H_kv, S_q, S_kv, D``)
and ``[params]``; ``constraints`` restrict the shapes (``D == HEAD_DIM``), never the checks.
A kernel that loads by TMA declares ``[tmaps.q]`` (``k``, ``v``, ``o``): the harness encodes
each map over that tensor's buffer and passes them after the ABI, in q, k, v, o order, 128
bytes each by value (``const __grid_constant__ CUtensorMap``).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.archs import ARCHS
from harness.kernels import expr
from harness.kernels.budget import parse_budget
from harness.kernels.signature import TMAP_BYTES
from harness.kernels.spec_tables import int_table, macros_of, param_sets
from harness.kernels.spec_text import NAME, check_entry_defined, check_keys
from harness.kernels.tmap_spec import TensorMapSpec, parse_tmaps
from harness.kinds.attention.problem import DIMS
from harness.kinds.attention.reference import LAYOUTS, PRECISIONS

ABI = (("q u64", 8), ("k u64", 8), ("v u64", 8), ("o u64", 8), ("lse u64", 8), ("B i32", 4),
       ("H i32", 4), ("H_kv i32", 4), ("S_q i32", 4), ("S_kv i32", 4), ("D i32", 4),
       ("scale f32", 4), ("causal i32", 4))
"""The parameters every attention launch passes, in order: label and bytes."""
TENSORS = ("q", "k", "v", "o")
"""The tensors a ``[tmaps.X]`` may describe, in the order their maps follow the ABI."""
P_TYPES = ("input", "fp32")
KEYS = ("kind", "entry", "summary", "predicted", "min_arch", "precision", "layout", "lse",
        "causal", "head_dims", "p_type", "block", "grid", "dynamic_smem_bytes", "constraints",
        "params", "variants", "representative", "carveout_pct", "budget", "baseline",
        "nondeterministic", "macros", "tmaps")
REQUIRED = ("entry", "summary", "min_arch", "precision", "layout", "block", "grid")


@dataclass(frozen=True)
class AttentionSpec:
    """What an attention kernel declares beyond the common keys (``KernelSpec.kind_spec``)."""

    layout: str
    """``bhsd`` (Q[b][h][s][d]) or ``bshd`` (Q[b][s][h][d]); K, V and O alike."""
    lse: bool
    """Whether it writes the log-sum-exp (FP32, natural log, ``[B][H][S_q]``)."""
    causal: bool
    """Whether it takes the causal mask (``causal = 1``); every kernel takes none (0)."""
    head_dims: tuple[int, ...]
    """The head dims it runs; () for any."""
    p_type: str
    """``input``: P is rounded to the input type before P V (mma.sync); ``fp32``: kept."""
    baseline: str
    tmaps: tuple[tuple[str, TensorMapSpec], ...] = ()
    """The tensor maps it takes after the ABI, in :data:`TENSORS` order: (tensor, map)."""

    @property
    def launch_parameters(self) -> tuple[tuple[str, int], ...]:
        """The attention ABI (:data:`ABI`) and a 128-byte tensor map per ``[tmaps.X]``, which
        KernelSpec.launch_parameters reports."""
        return ABI + tuple((f"tmap_{t} (from [tmaps.{t}])", TMAP_BYTES) for t, _ in self.tmaps)

    def p_precision(self, precision: str) -> str:
        return precision if self.p_type == "input" else "fp32"


def parse_table(table, source: str, match, path, fail) -> dict:
    """The KernelSpec fields of a ``kind = "attention"`` file."""
    check_keys(table, KEYS, REQUIRED, ("entry", "summary", "min_arch", "precision", "layout",
                                       "predicted", "p_type", "baseline"),
               "an attention kernel", "docs/attention.md", fail)
    entry = table["entry"]
    if not NAME.match(entry):
        raise fail(f"entry must be a C identifier (an extern \"C\" kernel), found {entry!r}")
    body = source[match.end():]
    check_entry_defined(body, entry, path)
    if table["min_arch"] not in ARCHS:
        raise fail(f"min_arch {table['min_arch']!r} is not an architecture the harness knows; "
                   f"expected one of {', '.join(ARCHS)}")
    precision = table["precision"]
    if precision not in PRECISIONS:
        raise fail(f"precision must be one of {', '.join(PRECISIONS)} (inputs and output; "
                   f"accumulation is FP32), found {precision!r}")
    layout = table["layout"]
    if layout not in LAYOUTS:
        raise fail(f"layout must be one of {', '.join(LAYOUTS)}, found {layout!r}")
    for key in ("lse", "causal", "nondeterministic"):
        if not isinstance(table.get(key, False), bool):
            raise fail(f"{key} must be true or false, found {table[key]!r}")
    head_dims = table.get("head_dims", [])
    if not isinstance(head_dims, list) or any(
            isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in head_dims):
        raise fail(f"head_dims must list positive integers (as [64, 128]), found {head_dims!r}")
    p_type = table.get("p_type", "input")
    if p_type not in P_TYPES:
        raise fail(f"p_type must be one of {', '.join(P_TYPES)} (the type P meets V in), "
                   f"found {p_type!r}")
    carveout = table.get("carveout_pct")
    if carveout is not None and (isinstance(carveout, bool) or not isinstance(carveout, int)
                                 or not 0 <= carveout <= 100):
        raise fail(f"carveout_pct must be an integer percent 0..100, found {carveout!r}")
    params = int_table(table.get("params", {}), "params", fail)
    clash = sorted(set(params) & set(DIMS))
    if clash:
        raise fail(f"{', '.join(clash)} is both a dim and a [params] name: rename the "
                   "parameter")
    variants = param_sets(table.get("variants", {}), "variants", params, fail)
    representative = table.get("representative")
    if representative is not None and representative not in variants:
        raise fail(f"representative {representative!r} is not one of the variants "
                   f"({', '.join(variants) or 'none declared'})")
    names = frozenset(DIMS) | frozenset(params)

    block = expr.formula_list(table, "block", frozenset(params), fail)
    grid = expr.formula_list(table, "grid", names | {"SMS"}, fail)
    for key, dims in (("block", block), ("grid", grid)):
        if not 1 <= len(dims) <= 3:
            raise fail(f"{key} must list 1 to 3 dimensions (x, y, z), found {len(dims)}")
    constraints = expr.formula_list(table, "constraints", names, fail, compare=True)
    dynamic_smem = expr.parse_using(table.get("dynamic_smem_bytes", "0"), names, fail,
                                    "dynamic_smem_bytes")
    macros, template_params, macro_tested = macros_of(table, entry, params, body, path, fail)
    tmaps = parse_tmaps(table.get("tmaps", {}), names, fail, TENSORS)
    kind_spec = AttentionSpec(layout, table.get("lse", False), table.get("causal", False),
                              tuple(head_dims), p_type, table.get("baseline", "cudnn_sdpa"),
                              tuple((t, tmaps[t]) for t in TENSORS if t in tmaps))
    return dict(
        path=path, entry=entry, summary=table["summary"].strip(), precision=precision,
        min_arch=table["min_arch"], block=block, grid=grid, dynamic_smem_bytes=dynamic_smem,
        nondeterministic=table.get("nondeterministic", False), constraints=constraints,
        carveout_pct=carveout, predicted=table.get("predicted", "").strip(), params=params,
        variants=variants, representative=representative, kind="attention",
        kind_spec=kind_spec, budget=parse_budget(table.get("budget", {}), fail),
        macros=macros, template_params=template_params, macro_tested=macro_tested,
        c_type=precision)

