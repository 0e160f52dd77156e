"""Tensor maps as a kernel wants them: the ``[tmaps.X]`` tables of a spec, checked
(:func:`parse_tmaps`) into a :class:`TensorMapSpec` of formulas, and evaluated at one problem
size into a :class:`TensorMapDesc`, what ``harness.gpu.tensormaps`` encodes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.errors import SpecError
from harness.kernels import expr
from harness.kernels.signature import OPERANDS

TMAP_SWIZZLES = ("none", "32B", "64B", "128B")
TMAP_INTERLEAVES = ("none", "16B", "32B")
TMAP_L2_PROMOTIONS = ("none", "64B", "128B", "256B")
TMAP_OOB_FILLS = ("none", "nan")
"""``none``: zeros outside the tensor; ``nan``: NaN (``..._NAN_REQUEST_ZERO_FMA``)."""
_TMAP_KEYS = ("rank", "shape", "strides", "box", "element_strides", "swizzle", "interleave",
              "l2_promotion", "oob_fill")


@dataclass(frozen=True)
class TensorMapSpec:
    """One ``[tmaps.X]`` table: a tensor map of operand X as the kernel wants it, formulas
    over M, N, K and the parameters. Dimension 0 is the contiguous one."""

    rank: int
    shape: tuple[expr.Expr, ...]
    """Global extent of each dimension, in elements (``globalDim``)."""
    strides: tuple[expr.Expr, ...]
    """Distance between consecutive indices of dimensions 1..rank-1, in elements (the driver
    takes bytes: ``globalStrides``)."""
    box: tuple[expr.Expr, ...]
    """Box extent per dimension (``boxDim``), 1..256."""
    element_strides: tuple[expr.Expr, ...]
    """``elementStrides``, 1..8 each (all 1: every element)."""
    swizzle: str = "128B"
    interleave: str = "none"
    l2_promotion: str = "256B"
    oob_fill: str = "none"

    def evaluate(self, env: Mapping[str, int]) -> TensorMapDesc:
        def ints(formulas):
            return tuple(int(f(env)) for f in formulas)
        return TensorMapDesc(self.rank, ints(self.shape), ints(self.strides), ints(self.box),
                             ints(self.element_strides), self.swizzle, self.interleave,
                             self.l2_promotion, self.oob_fill)


@dataclass(frozen=True)
class TensorMapDesc:
    """A :class:`TensorMapSpec` at one problem size: what ``tensormaps.tensor_map`` encodes."""

    rank: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    swizzle: str = "128B"
    interleave: str = "none"
    l2_promotion: str = "256B"
    oob_fill: str = "none"


def parse_tmaps(raw, names: frozenset[str], fail=SpecError,
                operands: tuple[str, ...] = OPERANDS) -> dict[str, TensorMapSpec]:
    """``[tmaps.X]`` tables (X among ``operands``: a GEMM's A, B, C, D; attention's q, k, v,
    o) checked: rank 1..5, shape and box of rank entries, rank - 1 strides, element_strides
    (default all 1), and the enumerations."""
    if not isinstance(raw, dict):
        raise fail(f"tmaps must be a table of [tmaps.X] tables (X among {', '.join(operands)}), "
                   f"found {raw!r}")
    out = {}
    for operand, table in raw.items():
        where = f"tmaps.{operand}"
        if operand not in operands:
            raise fail(f"{where}: {operand!r} is not an operand; expected one of "
                       f"{', '.join(operands)}")
        if not isinstance(table, dict):
            raise fail(f"{where} must be a table, found {table!r}")
        unknown = sorted(set(table) - set(_TMAP_KEYS))
        if unknown:
            raise fail(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: "
                       f"{', '.join(_TMAP_KEYS)}")
        missing = [k for k in ("rank", "shape", "strides", "box") if k not in table]
        if missing:
            raise fail(f"{where}: missing {', '.join(missing)}")
        rank = table["rank"]
        if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= 5:
            raise fail(f"{where}.rank must be an integer 1..5, found {rank!r}")

        enums = {}
        for key, allowed, default in (("swizzle", TMAP_SWIZZLES, "128B"),
                                      ("interleave", TMAP_INTERLEAVES, "none"),
                                      ("l2_promotion", TMAP_L2_PROMOTIONS, "256B"),
                                      ("oob_fill", TMAP_OOB_FILLS, "none")):
            value = table.get(key, default)
            if value not in allowed:
                raise fail(f"{where}.{key} must be one of {', '.join(map(repr, allowed))}, "
                           f"found {value!r}")
            enums[key] = value
        lists = {key: _formulas(table.get(key, default), count, f"{where}.{key}", rank, names,
                                fail)
                 for key, count, default in (("shape", rank, None), ("strides", rank - 1, None),
                                             ("box", rank, None),
                                             ("element_strides", rank, ["1"] * rank))}
        out[operand] = TensorMapSpec(rank, **lists, **enums)
    return out


def _formulas(items, count: int, where: str, rank: int, names: frozenset[str], fail) -> tuple:
    if not isinstance(items, list) or len(items) != count:
        raise fail(f"{where} must list {count} formula(s) (rank {rank}), found {items!r}")
    parsed = []
    for item in items:
        try:
            e = expr.parse(item)
        except SpecError as exc:
            raise fail(f"{where}: {exc}") from None
        if e.names - names:
            raise fail(f"{where}: formula {e.text!r} uses {', '.join(sorted(e.names - names))}; "
                       f"it may use only {', '.join(sorted(names))}")
        parsed.append(e)
    return tuple(parsed)
