"""A check's verdict from sums over row blocks of C, taken by a pool of threads (numpy lets go
of the GIL inside its loops): what :func:`harness.kinds.gemm.comparison.compare` needs to pass a
check, without the masks and messages only a failure needs.

At 4096 one comparison reads C, the reference and the error scale through a dozen full passes
in float64; one after another they cost the default run's worker about 30 s of its 190
(issue 37). Here every pass runs on a block of rows that stays in cache, and the blocks run in
parallel; a check that fails is compared again whole, by the one path that explains it."""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from harness.bench.threads import host_threads
from harness.kinds.gemm import comparison, narrow_inputs, numerics
from harness.kinds.gemm.numerics import (
    ELEMENT_SAFETY,
    CheckResult,
    Tolerance,
    _relative,
    accumulation_bound,
    bits,
    half_ulp,
    stored,
    to_float64,
)

BLOCK_ELEMENTS = 1 << 18
"""Elements of C per block (2 MiB of float64): a block's passes stay in L2 of the host."""
_POOLS: dict[bool, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


@dataclass(frozen=True)
class Sums:
    """What the blocks add up to."""

    nan: int = 0
    bad: int = 0
    unwritten: int = 0
    err2: float = 0.0
    max_abs: float = 0.0
    ref2: float = 0.0
    scale2: float = 0.0
    rounding2: float = 0.0

    def __add__(self, other: Sums) -> Sums:
        return Sums(self.nan + other.nan, self.bad + other.bad,
                    self.unwritten + other.unwritten, self.err2 + other.err2,
                    max(self.max_abs, other.max_abs), self.ref2 + other.ref2,
                    self.scale2 + other.scale2, self.rounding2 + other.rounding2)


def pool_threads() -> int:
    """Threads of each of :func:`pool`'s pools: half of :func:`host_threads`. Each block
    takes the interpreter between its numpy calls, and so does the main thread for every
    driver call it makes (issue 37: notes/verification.md, "Fewer comparing threads").
    ``HARNESS_COMPARE_THREADS`` sets another count (experiments)."""
    asked = os.environ.get("HARNESS_COMPARE_THREADS", "")
    return int(asked) if asked.isdigit() and int(asked) > 0 else max(1, host_threads() // 2)


def pool() -> ThreadPoolExecutor:
    """The process's threads for work split in blocks of rows (numpy lets go of the GIL);
    work submitted from one of them must not wait on another's. The main thread, which drives
    the device, and the battery's threads (a kernel's check battery: no size is launched
    before its verdict) have threads of their own: behind the comparisons made beside the
    timing (a 4096 size's, its kept launches') their blocks waited their turn."""
    here = threading.current_thread()
    main = here is threading.main_thread() or here.name.startswith("harness-battery")
    if main not in _POOLS:
        with _POOLS_LOCK:
            if main not in _POOLS:
                _POOLS[main] = ThreadPoolExecutor(
                    max_workers=pool_threads(),
                    thread_name_prefix="harness-urgent" if main else "harness-compare")
    return _POOLS[main]


def _block(out: np.ndarray, ref: np.ndarray, scale: np.ndarray, initial: np.ndarray | None,
           c_type: str, factor: float) -> Sums:
    out64 = to_float64(out, c_type)
    finite = np.isfinite(out64)
    local = factor * scale.astype(np.float64)
    limit = local if c_type == "fp32" else local + half_ulp(np.abs(ref) + local, c_type)
    d = np.where(finite, out64 - ref, 0.0)
    diff = np.where(finite, np.abs(d), np.inf)
    bad_mask = diff > limit
    unwritten = 0
    if initial is not None:
        unwritten = int(np.count_nonzero((bits(out) == bits(initial)) & bad_mask))
    rounding2 = 0.0
    if c_type != "fp32":
        rounding2 = float(np.square(to_float64(stored(ref, c_type), c_type) - ref).sum())
    return Sums(int(out64.size - np.count_nonzero(finite)), int(np.count_nonzero(bad_mask)),
                unwritten, float(np.square(d).sum()), float(diff.max()) if diff.size else 0.0,
                float(np.square(ref).sum()), float(np.square(scale.astype(np.float64)).sum()),
                rounding2)


def sums(out: np.ndarray, ref: np.ndarray, scale: np.ndarray, initial: np.ndarray | None,
         c_type: str, factor: float) -> Sums:
    """The sums over C of one comparison: elements not finite, outside ``factor`` times their
    error scale (plus half an ulp of a 16-bit C), unwritten among those, the squared error,
    reference, scale and C's rounding of the reference, and the largest error."""
    rows = max(1, BLOCK_ELEMENTS // max(1, ref.shape[1]))
    if ref.shape[0] <= rows:
        return _block(out, ref, scale, initial, c_type, factor)
    starts = range(0, ref.shape[0], rows)
    parts = pool().map(lambda i: _block(
        out[i:i + rows], ref[i:i + rows], scale[i:i + rows],
        None if initial is None else initial[i:i + rows], c_type, factor), starts)
    total = Sums()
    for part in parts:
        total = total + part
    return total


MARGIN = 1e-6
"""A pass here leaves this much relative room under the norm bound, which the whole-array
path computes with another order of additions; nearer, the whole path decides."""


def element_factor(k: int, input_unit: float) -> float:
    """An element's bound per unit of its error scale (numerics.element_limit's)."""
    return ELEMENT_SAFETY * accumulation_bound(k) + 2.0 * input_unit


def input_unit(spec, ops) -> float:
    """The relative error u_in of the inputs a check's kernel multiplies (its ``fp32_via``,
    or TF32 operands left unrounded), 0 where they are exact (numerics.Tolerance)."""
    via = getattr(spec, "fp32_via", "")
    return (numerics.FP32_VIA_UNIT[via] if via else
            numerics.TF32_UNROUNDED_UNIT if ops.unrounded else 0.0)


def of_device(values) -> Sums:
    """:class:`Sums` from the device's eight (gpu/compare_sums.py, in this order)."""
    nan, bad, unwritten, err2, max_abs, ref2, scale2, rounding2 = (float(v) for v in values)
    return Sums(int(nan), int(bad), int(unwritten), err2, max_abs, ref2, scale2, rounding2)


def passed_quickly(out: np.ndarray, ref: np.ndarray, precision: str, scale: np.ndarray, k: int,
                   seed: int, alpha: float, beta: float, c_type: str,
                   initial: np.ndarray | None, yardstick: float | None,
                   max_multiple: float | None, input_unit: float, input_norm: float,
                   total: Sums | None = None) -> CheckResult | None:
    """The result of :func:`~harness.kinds.gemm.comparison.compare` when the check passes (its
    arguments), from :func:`sums` (``total``: made on the device already, for ``out``
    against ``ref`` and ``scale`` with ``initial``); None when it may fail (or C is not
    ``ref``'s shape)."""
    if ref.ndim != 2 or out.shape != ref.shape or scale.shape != ref.shape or (
            initial is not None and initial.shape != ref.shape):
        return None
    Tolerance.of_norms(precision, k, c_type, 0.0, 0.0, 0.0)  # an unknown type fails here
    if total is None:
        total = sums(out, ref, scale, initial, c_type, element_factor(k, input_unit))
    tol = Tolerance.of_norms(precision, k, c_type, math.sqrt(total.scale2),
                             math.sqrt(total.ref2), math.sqrt(total.rounding2), input_unit,
                             input_norm)
    err_norm = math.sqrt(total.err2)
    if total.nan or total.bad or err_norm > tol.norm_abs * (1.0 - MARGIN):
        return None
    if yardstick:
        yardstick = math.hypot(yardstick, tol.c_rounding)
    multiple = err_norm / yardstick if yardstick else math.nan
    if max_multiple is not None and multiple > max_multiple * (1.0 - MARGIN):
        return None
    m, n = ref.shape
    return CheckResult(True, m, n, k, seed, alpha, beta, _relative(err_norm, tol.ref_norm),
                       total.max_abs, 0, 0, tol.norm_rel, "ok", "ok", 0, multiple)


def compare(out: np.ndarray, ref: np.ndarray, precision: str, *, scale: np.ndarray, k: int,
            seed: int, alpha: float, beta: float, c_type: str = "fp32",
            initial: np.ndarray | None = None, c64: np.ndarray | None = None,
            yardstick: float | None = None, max_multiple: float | None = None,
            input_unit: float = 0.0, input_norm: float = 0.0,
            total: Sums | None = None, operands: tuple | None = None) -> CheckResult:
    """:func:`harness.kinds.gemm.comparison.compare` (its arguments and result): a pass from
    :func:`passed_quickly` (``total``: its sums, made on the device), anything else compared
    whole, by the path that names the cause. ``operands`` (A and B, float64), with
    ``max_multiple``: a pass is also held to narrow_inputs.verdict (FP32 at every K)."""
    got = passed_quickly(out, ref, precision, scale, k, seed, alpha, beta, c_type, initial,
                         yardstick, max_multiple, input_unit, input_norm, total)
    if got is None:
        got = comparison.compare(out, ref, precision, scale=scale, k=k, seed=seed,
                                 alpha=alpha, beta=beta, c_type=c_type, initial=initial,
                                 c64=c64, yardstick=yardstick, max_multiple=max_multiple,
                                 input_unit=input_unit, input_norm=input_norm)
    if got.passed and yardstick and max_multiple is not None and operands is not None:
        name, slope, sigma = narrow_inputs.verdict(to_float64(out, c_type), ref, *operands,
                                                   alpha, seed)
        if name:
            return replace(got, passed=False, finding="less accurate than FP32",
                           message=narrow_inputs.story(name, slope, sigma))
    return got
