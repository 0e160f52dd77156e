"""FP8 operands (issue 36): the two OCP formats' values, draws of exactly representable values
over a spread of exponents, and a model of how wgmma accumulates their products, fitted to the
H100's own answers (notes/fp8_accumulation.md).

The model: one wgmma k32 step aligns the FP32 accumulator and its 32 products to the largest
exponent among them, keeps :data:`WINDOW_PLACES` binary places below it, truncates each term
toward zero there, and adds what is left exactly. It gives every output of the probe
(experiments/fp8_accumulation.py) bit for bit (tests/test_fp8.py reads the committed log).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

WINDOW_PLACES = 13
"""Binary places kept below a k32 step's anchor (a 14-bit window), and below its sum's leading
bit (14 significant bits)."""
K_STEP = 32
"""Products a wgmma with FP8 operands adds in one step (m64nNk32)."""
FINDINGS = ("ignores the scale of A", "ignores the scale of B", "reads A as e4m3",
            "reads A as e5m2", "reads B as e4m3", "reads B as e5m2",
            "less accurate than the tensor core's FP8 accumulation",
            "not the tensor core's accumulation")
"""What the check of an FP8 GEMM can find beyond the others (fp8_check.py)."""


@dataclass(frozen=True)
class Fp8Format:
    """An 8-bit float: sign, ``exponent_bits``, ``mantissa_bits``, ``bias``."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    has_inf: bool
    """e5m2 keeps IEEE infinities and NaNs in its top exponent; e4m3 (OCP E4M3FN) has no
    infinity and one NaN pattern per sign (S.1111.111), so its top exponent holds values."""

    @cached_property
    def values(self) -> np.ndarray:
        """The value of each of the 256 codes (NaN for NaN codes, +-inf for e5m2's)."""
        out = np.empty(256)
        top = (1 << self.exponent_bits) - 1
        for code in range(256):
            sign = -1.0 if code & 0x80 else 1.0
            e = (code >> self.mantissa_bits) & top
            m = code & ((1 << self.mantissa_bits) - 1)
            if self.has_inf and e == top:
                out[code] = sign * math.inf if m == 0 else math.nan
            elif not self.has_inf and e == top and m == (1 << self.mantissa_bits) - 1:
                out[code] = math.nan
            elif e == 0:
                out[code] = sign * m / (1 << self.mantissa_bits) * 2.0 ** (1 - self.bias)
            else:
                out[code] = sign * (1 + m / (1 << self.mantissa_bits)) * 2.0 ** (e - self.bias)
        return out

    @property
    def max_finite(self) -> float:
        return float(np.nanmax(np.where(np.isfinite(self.values), self.values, np.nan)))

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (1 - self.bias - self.mantissa_bits)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """The exact values of ``codes`` (uint8), in float64."""
        return self.values[np.asarray(codes, dtype=np.uint8)]

    @cached_property
    def _grid(self) -> tuple[np.ndarray, np.ndarray]:
        """The finite non-negative values in increasing order, and their codes."""
        finite = np.isfinite(self.values) & (self.values >= 0)
        codes = np.flatnonzero(finite)
        order = np.argsort(self.values[codes], kind="stable")
        return self.values[codes][order], codes[order]

    @cached_property
    def _by_top_bits(self) -> np.ndarray:
        """The code of each finite value, indexed by the top 16 bits of its float64 (sign,
        exponent and four mantissa bits: enough for either format's values to differ)."""
        table = np.zeros(1 << 16, dtype=np.uint8)
        codes = np.flatnonzero(np.isfinite(self.values))
        table[self.values[codes].view(np.uint64) >> np.uint64(48)] = codes
        return table

    def encode(self, x: np.ndarray) -> np.ndarray:
        """``x`` rounded to the nearest value of the format, ties to the even code, beyond the
        largest finite value saturated to it (cuBLASLt's and the PTX ``.satfinite`` choice),
        NaN to the NaN code. Values the format holds exactly (the operands a check draws
        again on the host) are looked up by their bits; the others are rounded."""
        x = np.asarray(x, dtype=np.float64)
        flat = x.reshape(-1)
        out = self._by_top_bits[flat.view(np.uint64) >> np.uint64(48)]
        exact = self.values[out] == flat  # NaN and values between the format's are not
        if not exact.all():
            out[~exact] = self._rounded(flat[~exact])
        return out.reshape(x.shape)

    def _rounded(self, x: np.ndarray) -> np.ndarray:
        grid, codes = self._grid
        mag = np.minimum(np.abs(np.nan_to_num(x, nan=0.0)), grid[-1])
        hi = np.clip(np.searchsorted(grid, mag), 1, len(grid) - 1)
        lo = hi - 1
        below, above = mag - grid[lo], grid[hi] - mag
        pick = np.where(below < above, lo, np.where(above < below, hi,
                                                    np.where(codes[lo] % 2 == 0, lo, hi)))
        out = codes[pick].astype(np.uint8) | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
        nan_code = 0x7F if not self.has_inf else 0x7E
        return np.where(np.isnan(x), np.uint8(nan_code), out).astype(np.uint8)

    def draw(self, rng: np.random.Generator, shape: tuple[int, ...], spread: int = 0
             ) -> np.ndarray:
        """Codes of finite values drawn uniformly among the format's codes of magnitude in
        [2^-spread, 2^(spread + 1)) (all finite non-zero values for ``spread`` < 0), with a
        random sign: every value exactly representable, exponents spread as asked."""
        mags = self.values[:128]
        ok = np.isfinite(mags) & (mags > 0)
        if spread >= 0:
            ok &= (mags >= 2.0 ** -spread) & (mags < 2.0 ** (spread + 1))
        pool = np.flatnonzero(ok).astype(np.uint8)
        codes = rng.choice(pool, size=shape)
        return codes | (rng.integers(0, 2, size=shape, dtype=np.uint8) << 7)


FORMATS = {"e4m3": Fp8Format("e4m3", 4, 3, 7, has_inf=False),
           "e5m2": Fp8Format("e5m2", 5, 2, 15, has_inf=True)}


def exponent_of(x: np.ndarray) -> np.ndarray:
    """floor(log2 |x|), and a value far below any other for 0."""
    with np.errstate(divide="ignore"):
        return np.where(x == 0, -1e4, np.floor(np.log2(np.where(x == 0, 1.0, np.abs(x)))))


def window_step(c: np.ndarray, products: np.ndarray, places: int = WINDOW_PLACES,
                floor: bool = False, anchors: np.ndarray | None = None) -> np.ndarray:
    """One k32 step of the tensor core as measured on the H100: ``c`` (FP32 accumulators, any
    shape) plus ``products`` (the same shape and a last axis of the step's products, exact in
    float64). Every term is truncated toward zero (``floor``: toward minus infinity, which the
    probe's mixed signs refute) at ``places`` below the anchor: the largest of ``c``'s exponent
    and the products' ``anchors``, the sums of their operands' exponents (a product's carry
    ignored; default: each product's own exponent, the same for powers of two). The terms are
    added exactly and the sum is truncated toward zero to ``places`` + 1 significant bits.
    Reproduces cuBLASLt's FP32 outputs on random e4m3 and e5m2 inputs exactly
    (reports/h100/fp8-tc-models-362163b; tests/test_fp8.py)."""
    c = np.asarray(c, dtype=np.float32).astype(np.float64)
    products = np.asarray(products, dtype=np.float64)
    marks = exponent_of(products) if anchors is None else np.where(products == 0, -1e4, anchors)
    top = np.maximum(exponent_of(c), np.max(marks, axis=-1))[..., None]
    terms = np.concatenate([c[..., None], products], axis=-1)
    unit = np.exp2(top - places)
    total = ((np.floor if floor else np.trunc)(terms / unit) * unit).sum(axis=-1)
    kept = np.where(total == 0, 1.0, np.exp2(exponent_of(total) - places))
    return (np.trunc(total / kept) * kept).astype(np.float32)


def tensor_core_dot(a: np.ndarray, b: np.ndarray, c: np.ndarray | float = 0.0,
                    places: int = WINDOW_PLACES, k_step: int = K_STEP,
                    floor: bool = False) -> np.ndarray:
    """``c + a @ b`` as wgmma accumulates it in order over K, a k32 step at a time
    (:func:`window_step`, each product anchored at its operands' exponents summed); ``a``
    (M x K) and ``b`` (K x N) hold the operands' exact values."""
    m, k = a.shape
    ea, eb = exponent_of(a), exponent_of(b)
    acc = np.broadcast_to(np.asarray(c, dtype=np.float32), (m, b.shape[1])).copy()
    for start in range(0, k, k_step):
        stop = start + k_step
        products = a[:, None, start:stop] * b.T[None, :, start:stop]
        anchors = ea[:, None, start:stop] + eb.T[None, :, start:stop]
        acc = window_step(acc, products, places, floor, anchors)
    return acc
