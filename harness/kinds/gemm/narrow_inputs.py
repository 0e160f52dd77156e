"""Whether an FP32 claim's error is a narrower scheme's: a test of FP32 accuracy that does not
fade with K (issue 57 item 4; notes/verification.md, "FP32 at every depth").

The 2x-FP32 multiple compares norms: BF16x3 loses about 2^-18 of each product whatever K,
while FP32's accumulation error grows like u32 K, so the multiple falls as 1/sqrt(K) (13x at
K = 256, 1.7x at 16384: a pass). Here the error ``e = out - ref`` is regressed on what each
known narrower scheme S would make of the same inputs, its representation error
``E_S = S(A, B) - A B`` (the parts' products summed exactly):

    beta_S = <e, E_S> / <E_S, E_S>,   sigma_S = ||e - beta_S E_S|| / (||E_S|| sqrt(N)),

over N outputs. A kernel computing with S carries E_S whole: beta_S = 1 (its accumulation
error, uncorrelated with E_S, is the noise). FP32 accumulation in any order rounds partial
sums, whose errors do not follow any scheme's split of the inputs: beta_S is noise of
deviation sigma_S ~ ||e_acc|| / (||E_S|| sqrt(N)). At K = 16384 BF16x3's E_S is about 1.3
times FP32's accumulation error, so over 64 x 64 outputs sigma ~ 0.012: the scheme reads
some 80 deviations out; the noise grows as sqrt(K), so at K = 2^20 still 10. A scheme fails
when beta_S > :data:`BETA_FAIL` and beta_S > :data:`SIGMAS` sigma_S.

The schemes: BF16x3 and BF16x2 (splits rounded or truncated), TF32 and TF32x3 (rounded or
truncated), BF16 and FP16 inputs. An accumulator narrower than FP32 fails the K-deep bound
already; a scheme not listed here is held to the 2x-FP32 multiple alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

BETA_FAIL = 0.5
SIGMAS = 6.0
BLOCK = 64
"""Rows and columns of the output the test reads at most (a random block)."""


def _cut(x64: np.ndarray, bits: int, rounded: bool) -> np.ndarray:
    """FP32 values (as float64) with ``bits`` significant bits, to nearest even or toward
    zero."""
    raw = np.ascontiguousarray(x64, dtype=np.float32).view(np.uint32).astype(np.uint64)
    drop = 24 - bits
    if rounded:
        raw = raw + ((raw >> np.uint64(drop)) & np.uint64(1)) + np.uint64((1 << (drop - 1)) - 1)
    raw = (raw & np.uint64((0xFFFFFFFF >> drop) << drop)).astype(np.uint32)
    return raw.view(np.float32).astype(np.float64)


def _split(bits: int, parts: int, rounded: bool) -> Callable:
    """A scheme that splits each input in ``parts`` parts of ``bits`` bits and sums the part
    products whose indices add up to less than ``parts`` (hi hi, hi lo, lo hi for three of
    two parts' four; the parts: x = p0 + p1 + ...)."""
    def pieces(x: np.ndarray) -> list[np.ndarray]:
        out, rest = [], x
        for _ in range(2 if parts > 1 else 1):
            p = _cut(rest, bits, rounded)
            out.append(p)
            rest = rest - p
        return out

    def scheme(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        pa, pb = pieces(a), pieces(b)
        if parts == 1:
            return pa[0] @ pb[0]
        if parts == 2:  # hi hi + hi lo
            return pa[0] @ pb[0] + pa[0] @ pb[1]
        return pa[0] @ pb[0] + pa[0] @ pb[1] + pa[1] @ pb[0]
    return scheme


SCHEMES: dict[str, Callable] = {
    "bf16x3": _split(8, 3, True), "bf16x3 (truncated split)": _split(8, 3, False),
    "bf16x2": _split(8, 2, True), "tf32x3": _split(11, 3, True),
    "tf32x3 (truncated split)": _split(11, 3, False), "tf32": _split(11, 1, True),
    "tf32 (truncated)": _split(11, 1, False), "bf16": _split(8, 1, True),
    "fp16": lambda a, b: (a.astype(np.float16).astype(np.float64)
                          @ b.astype(np.float16).astype(np.float64)),
}
"""Each scheme's product of A and B (float64, the parts' products summed exactly)."""


def regress(err: np.ndarray, sig: np.ndarray) -> tuple[float, float]:
    """(beta, sigma) of ``err`` on ``sig`` (module docstring); (0, inf) where sig is zero."""
    t2 = float(np.vdot(sig, sig))
    if t2 == 0.0:
        return 0.0, math.inf
    beta = float(np.vdot(err, sig)) / t2
    rest = err - beta * sig
    return beta, math.sqrt(float(np.vdot(rest, rest)) / t2 / sig.size)


def verdict(out64: np.ndarray, ref: np.ndarray, a64: np.ndarray, b64: np.ndarray,
            alpha: float = 1.0, seed: int = 0) -> tuple[str, float, float]:
    """The first scheme ``out64`` (finite, float64) computes with, against ``ref`` = alpha A B,
    on a random block of at most :data:`BLOCK` x BLOCK outputs (``seed`` picks it): its name,
    beta and sigma; ``""`` where none."""
    m, n = ref.shape
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(m, size=min(m, BLOCK), replace=False))
    cols = np.sort(rng.choice(n, size=min(n, BLOCK), replace=False))
    a, b = a64[rows], b64[:, cols]
    exact = a @ b
    err = out64[np.ix_(rows, cols)] - ref[np.ix_(rows, cols)]
    for name, scheme in SCHEMES.items():
        beta, sigma = regress(err, alpha * (scheme(a, b) - exact))
        if beta > BETA_FAIL and beta > SIGMAS * sigma:
            return name, beta, sigma
    return "", 0.0, 0.0


def story(name: str, beta: float, sigma: float) -> str:
    return (f"less accurate than FP32: its error is {name}'s (regressed on what {name} makes "
            f"of the same inputs: {beta:.2f} +- {sigma:.3f}, where FP32 accumulation in any "
            f"order gives 0 and {name} 1): it computes with fewer bits than FP32; a kernel "
            "that does declares how with fp32_via in its spec")
