"""The host's values of a check's operands: A, B and C's start values drawn from a seed
(contents.check_operand), in their storage form and as float64, with an FP8 GEMM's scales
(:func:`of`); kept for the large sizes every kernel of a run is checked and timed at, and
drawn ahead on another thread beside other work (:func:`prefetch`). operands.py puts them on
the device."""

from __future__ import annotations

import threading
from concurrent.futures import Executor, Future

import numpy as np

from harness.kinds.gemm import contents, numerics

BLOCK = 128
"""The extent of a block scale: 1 x 128 of A, 128 x 128 of B (fp8_spec.BLOCK_K)."""

SCALE_EXPONENTS = (-6, -5, -4, -3, -2, -1, 1, 2, 3)
"""Per-tensor FP8 scales are 2^e for e drawn here, different for A and B and never 1: a
kernel that ignores one is off by a power of two, and a product of scales is exact."""


def _fp8_scales(rng: np.random.Generator, fp8, m: int, n: int, k: int) -> tuple:
    """Per tensor: 2^e for two different e of SCALE_EXPONENTS. Per block: 2^e for each row of
    A and 128-deep k block (M x KB, fp8_check's layout) and each 128 x 128 block of B (KB x NB),
    e drawn from SCALE_EXPONENTS."""
    if fp8.scales != "block":
        ea, eb = rng.choice(SCALE_EXPONENTS, size=2, replace=False)
        return 2.0 ** int(ea), 2.0 ** int(eb)
    kb, nb = -(-k // BLOCK), -(-n // BLOCK)
    return (np.exp2(rng.choice(SCALE_EXPONENTS, size=(m, kb)).astype(np.float64)),
            np.exp2(rng.choice(SCALE_EXPONENTS, size=(kb, nb)).astype(np.float64)))


def _per_element(scale, k_axis: int, k: int, n: int | None = None):
    """A scale per tensor as it is; block scales spread over the elements they scale (A's
    M x KB over M x K; B's KB x NB over K x N)."""
    if not np.ndim(scale):
        return scale
    out = np.repeat(scale, BLOCK, axis=k_axis)
    out = out[:, :k] if k_axis == 1 else out[:k]
    return out if n is None else np.repeat(out, BLOCK, axis=1)[:, :n]


_HOST: dict[tuple, tuple] = {}
CACHE_BYTES = 6 << 30
"""Host memory each of the two caches (this one, operands.py's references) may hold: every
timed size of a default run (1024, 2048, 4096) in every precision fits, so no kernel redraws
what the one before drew."""


def keep(cache: dict, key, value, nbytes: int) -> None:
    """Put ``value`` in ``cache``, dropping the oldest entries while it would exceed
    CACHE_BYTES (``nbytes`` per entry, counted at insertion)."""
    cache[key] = (value, nbytes)
    while sum(n for _, n in cache.values()) > CACHE_BYTES and len(cache) > 1:
        cache.pop(next(iter(cache)))


def of(m: int, n: int, k: int, precision: str, seed: int, with_c: bool,
       c_type: str, draw: str = "uniform", fp8=None) -> tuple[tuple, dict]:
    """A, B (and C's start values) drawn from ``seed``: their storage form and float64 values,
    and the scales of A and B (an FP8 GEMM's, already in the float64 values; 1 otherwise);
    with the references :func:`prefetch` computed beside (by (alpha, beta); else none).
    The large ones (a timed size, checked and timed for every kernel of a run on the same
    seed) are kept, since drawing them costs a second of CPU at 8192."""
    args = (m, n, k, precision, seed, with_c, c_type, draw, fp8)
    key = _host_key(*args)
    if key in _HOST:
        return _HOST[key][0], {}
    with _PENDING_LOCK:
        pending = _PENDING.pop(key, None)
    made, refs = pending.result() if pending is not None else (_drawn(*args), {})
    if m * n >= 1 << 20:
        keep(_HOST, key, made, sum(x.nbytes for x in made[:6] if x is not None))
    return made, dict(refs)


def _host_key(m, n, k, precision, seed, with_c, c_type, draw, fp8) -> tuple:
    return (m, n, k, precision, seed, with_c, c_type, draw,
            None if fp8 is None else (fp8.a, fp8.b, fp8.scales))


def _drawn(m, n, k, precision, seed, with_c, c_type, draw, fp8) -> tuple:
    # A, B and C's start values from the run secret (contents.check_operand): the one value
    # family of every launch, the timed repetitions' included; FP8 scales from the seed
    rng = np.random.default_rng(seed)
    if fp8 is None:
        a, a64 = contents.check_operand(seed, "A", (m, k), precision, draw)
        b, b64 = contents.check_operand(seed, "B", (k, n), precision, draw)
        scales = (1.0, 1.0)
    else:
        (a, a64), (b, b64) = (contents.check_operand(seed, "A", (m, k), fp8.a),
                              contents.check_operand(seed, "B", (k, n), fp8.b))
        scales = _fp8_scales(rng, fp8, m, n, k)
        a64, b64 = a64 * _per_element(scales[0], 1, k), b64 * _per_element(scales[1], 0, k, n)
    c_start = c64 = None
    if with_c:
        _, values = contents.check_operand(seed, "C", (m, n), "fp32")
        c_start = numerics.stored(values, c_type)
        c64 = numerics.to_float64(c_start, c_type)
    return a, a64, b, b64, c_start, c64, scales


_PENDING: dict[tuple, Future] = {}
"""Host operands being drawn beside other work (:func:`prefetch`), by their key."""
_PENDING_LOCK = threading.Lock()
PENDING_MOST = 256
"""Prefetches kept waiting for their Operands at most (the oldest are dropped past it)."""


def prefetch(executor: Executor, spec, m: int, n: int, k: int, seed: int,
             with_c: bool = False, draw: str = "uniform",
             reference: tuple[float, float] | None = None) -> None:
    """The host values of operands about to be made (:func:`operands.for_kernel`'s arguments)
    drawn on ``executor`` beside other work (the device timing the last kernel, the host
    idle), and, with ``reference`` (alpha, beta), their float64 reference and error scale on
    the host (a check small enough that the host computes it): the Operands made with the
    same arguments takes them instead of drawing."""
    args = (m, n, k, spec.precision, seed, with_c, spec.c_type, draw, getattr(spec, "fp8", None))
    key = _host_key(*args)
    with _PENDING_LOCK:
        if key in _HOST or key in _PENDING:
            return
        while len(_PENDING) >= PENDING_MOST:
            _PENDING.pop(next(iter(_PENDING))).cancel()
        _PENDING[key] = executor.submit(_drawn_with, args, reference)


def _drawn_with(args: tuple, reference: tuple[float, float] | None) -> tuple[tuple, dict]:
    made = _drawn(*args)
    if reference is None:
        return made, {}
    alpha, beta = reference
    a64, b64, c64 = made[1], made[3], made[5]
    return made, {reference: (numerics.reference(a64, b64, alpha, beta, c64),
                              numerics.error_scale(a64, b64, alpha, beta, c64))}
