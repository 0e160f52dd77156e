"""An FP8 GEMM's declaration (issue 36): ``precision = "fp8"`` with an ``[fp8]`` table naming
A's and B's formats, the kind of scales and how often the kernel promotes its tensor-core sums
into FP32. Parsed and checked here; the runs judge per-tensor scales and skip block scales
for now (notes/fp8_plan.md).

    precision = "fp8"
    layout_b = "col"            # K-major: 8-bit wgmma has no transpose, cuBLASLt's FP8 is TN
    c_type = "bf16"             # or "fp32"
    signature = ["M", "N", "K", "A", "B", "C", "scale_a", "scale_b"]
    [fp8]
    a = "e4m3"
    b = "e4m3"                  # or "e5m2"
    scales = "tensor"           # or "block": 1 x 128 per row of A, 128 x 128 per tile of B
    promote = 128               # products per tensor-core run before FP32 (block: at most 128)
"""

from __future__ import annotations

from dataclasses import dataclass

FP8_TYPES = ("e4m3", "e5m2")
SCALE_KINDS = ("tensor", "block")
BLOCK_K = 128
K_STEP = 32
_KEYS = ("a", "b", "scales", "promote")
FP8_C_TYPES = ("bf16", "fp32")


@dataclass(frozen=True)
class Fp8Spec:
    """A's and B's formats, the scales' kind, the promotion interval (None: all of K)."""

    a: str
    b: str
    scales: str
    promote: int | None


def fp8_table(table: dict, precision: str, fail) -> Fp8Spec | None:
    """The ``[fp8]`` table of an FP8 GEMM, checked with what the rest of its spec must say;
    None for other precisions (which may not have one)."""
    raw = table.get("fp8")
    if precision != "fp8":
        if raw is not None:
            raise fail(f'[fp8] belongs to precision = "fp8" kernels; this one is {precision}')
        return None
    if not isinstance(raw, dict):
        raise fail('precision = "fp8" needs an [fp8] table: a = "e4m3" or "e5m2", b likewise, '
                   'scales = "tensor" or "block", and optionally promote (notes/fp8_plan.md)')
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise fail(f"[fp8] has no key {', '.join(unknown)}; its keys: {', '.join(_KEYS)}")
    for key in ("a", "b"):
        if raw.get(key) not in FP8_TYPES:
            raise fail(f"[fp8] {key} must be one of {', '.join(FP8_TYPES)}, found "
                       f"{raw.get(key)!r}")
    scales = raw.get("scales")
    if scales not in SCALE_KINDS:
        raise fail(f"[fp8] scales must be one of {', '.join(SCALE_KINDS)}, found {scales!r}")
    promote = raw.get("promote", BLOCK_K if scales == "block" else None)
    if promote is not None and (isinstance(promote, bool) or not isinstance(promote, int)
                                or promote < K_STEP or promote % K_STEP):
        raise fail(f"[fp8] promote must be a multiple of {K_STEP} (the products of one wgmma "
                   f"step), found {promote!r}")
    if scales == "block" and BLOCK_K % promote:
        raise fail(f"[fp8] promote {promote} with block scales: a run on the tensor core must "
                   f"stay inside one {BLOCK_K}-deep scale block (32, 64 or 128)")
    if table.get("layout_a", "row") != "row" or table.get("layout_b", "row") != "col":
        raise fail('an FP8 GEMM takes A and B K-major: layout_a = "row", layout_b = "col" '
                   "(8-bit wgmma has no transpose, and cuBLASLt's FP8 on Hopper is TN)")
    if table.get("c_type", "fp32") not in FP8_C_TYPES:
        raise fail(f"c_type {table.get('c_type')!r} for an FP8 GEMM: one of "
                   f"{', '.join(FP8_C_TYPES)}")
    names = [e if isinstance(e, str) else e.get("name") if isinstance(e, dict) else None
             for e in table.get("signature", [])]
    missing = [n for n in ("scale_a", "scale_b") if n not in names]
    if missing:
        raise fail(f"an FP8 GEMM declares its signature with its scales ({', '.join(missing)} "
                   "missing): the common ABI has none")
    return Fp8Spec(raw["a"], raw["b"], scales, promote)
