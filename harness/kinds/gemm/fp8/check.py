"""The check of an FP8 GEMM (issue 36): its reference from the operands' exact values and their
scales, the bound a right kernel stays within, and the findings that name what a wrong one did.

A right kernel multiplies FP8 operands on the tensor cores, which add each k32 step's products in
a 14-bit window (harness/kinds/gemm/fp8/formats.py, notes/fp8_accumulation.md), and applies
the scales in
FP32: per tensor, once in the epilogue; per block (1 x 128 for A, 128 x 128 for B), to each
block's partial sum as it is promoted into an FP32 accumulator on the CUDA cores. Its error is
a random walk of the window's truncations, each under 2^-13 of the largest term of its step:

    walk(m, n)^2 = sum over steps j of 11 (2^-13 M_j)^2,   M_j = max(|P_j-1|, max |products_j|)

(33 terms a step, each off by a uniform part of its unit, of either sign: variance unit^2 / 3),
with P the exact partial sums in k order, restarted at every promotion. The norm of the error
is held to NORM_SAFETY times the walk's norm, each element to ELEMENT_SAFETY times its walk,
plus the output's rounding. The model of the window, run on the check's own inputs, stays
within both by a wide margin; a window of FP16's width (11 bits) does not
(tests/test_fp8_check.py). Within the bound, a sample of the outputs must hold the tensor
core's own sums for the declared promotion (or for more accurate runs), or FP32's
(:func:`accumulation`, issue 57): the bound alone took the kernel's word."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from harness.bench.threads import host_threads
from harness.kinds.gemm.chunked import pool
from harness.kinds.gemm.fp8.formats import FORMATS, K_STEP, WINDOW_PLACES, tensor_core_dot
from harness.kinds.gemm.numerics import half_ulp, stored, to_float64

BLOCK_K = 128
"""The k extent of a block scale (A: 1 x 128 per row, B: 128 x 128)."""
NORM_SAFETY = 3.0
ELEMENT_SAFETY = 8.0
FEWER_BITS = 16.0
"""An output within this many times the bounds everywhere, though outside them, accumulated
with fewer bits than the window (an FP16 accumulator: 3 bits, 8x, fewer); beyond, it is
wrong."""
OUTPUTS = ("bf16", "fp32")


@dataclass(frozen=True)
class Fp8Gemm:
    """One FP8 GEMM's inputs: codes, formats, scales, output type and how the kernel promotes.

    ``scale_a`` and ``scale_b``: floats (per tensor), or arrays of shape (M, K / 128) and (K / 128,
    N / 128) (per block; B's also (K / 128, N), one per column: :func:`subset`). ``promote``: the
    products a kernel adds on the tensor core before it promotes into FP32 (a multiple of 32; None:
    all of K, as per-tensor kernels do; block scales need a promotion at least every 128)."""

    a: np.ndarray
    b: np.ndarray
    a_format: str
    b_format: str
    scale_a: float | np.ndarray
    scale_b: float | np.ndarray
    out: str = "bf16"
    promote: int | None = None

    @property
    def blocked(self) -> bool:
        return np.ndim(self.scale_a) > 0

    def values(self) -> tuple[np.ndarray, np.ndarray]:
        """A and B's exact values, unscaled."""
        return FORMATS[self.a_format].decode(self.a), FORMATS[self.b_format].decode(self.b)

    def steps(self) -> int:
        """Products per run on the tensor core between promotions."""
        k = self.a.shape[1]
        run = self.promote or k
        if self.blocked:
            run = min(run, BLOCK_K)
        return run


def _block_scales(g: Fp8Gemm, start: int, stop: int, rows: slice = slice(None)
                  ) -> np.ndarray:
    """The scale of each output (of ``rows`` only) for the products of k in [start, stop) (one
    block's)."""
    if not g.blocked:
        return np.asarray(float(g.scale_a) * float(g.scale_b))
    blk = start // BLOCK_K
    sa = np.asarray(g.scale_a, dtype=np.float64)[rows, blk][:, None]
    sb = np.asarray(g.scale_b, dtype=np.float64)[blk]
    if sb.shape[0] != g.b.shape[1]:  # one per 128 columns, not one per column
        sb = np.repeat(sb, BLOCK_K)[:g.b.shape[1]]
    return sa * sb[None, :]


def reference(g: Fp8Gemm, a: np.ndarray | None = None, b: np.ndarray | None = None
              ) -> np.ndarray:
    """D = (A x scales) @ (B x scales) in float64 from the exact values (``a``, ``b``: other
    values of the operands, for the findings)."""
    av, bv = g.values()
    av, bv = (av if a is None else a), (bv if b is None else b)
    if not g.blocked:
        return (av @ bv) * float(g.scale_a) * float(g.scale_b)
    k = av.shape[1]
    out = np.zeros((av.shape[0], bv.shape[1]))
    for start in range(0, k, BLOCK_K):
        stop = min(k, start + BLOCK_K)
        out += (av[:, start:stop] @ bv[start:stop]) * _block_scales(g, start, stop)
    return out


SPLIT_WORK = 1 << 21
"""Outputs times k steps from which a walk is taken in blocks of rows on several threads."""


def walk(g: Fp8Gemm) -> np.ndarray:
    """Each output's random walk of the window's truncations (module docstring), in the
    output's units (its scales applied). In float32, a bound's size needs no more; a large
    one in blocks of rows on chunked.py's threads (numpy lets go of the GIL): the walk over
    K / 32 steps of the whole output is most of a check's host time."""
    return np.vstack(_by_rows(g, _walk))


def _rows(g: Fp8Gemm, lo: int, hi: int) -> Fp8Gemm:
    """Rows [lo, hi) of ``g``'s output: A's rows and, per block, their scales."""
    return replace(g, a=g.a[lo:hi], scale_a=g.scale_a[lo:hi] if g.blocked else g.scale_a)


def _by_rows(g: Fp8Gemm, work, *arrays: np.ndarray) -> list:
    """``work(rows of g, rows of each array)`` over blocks of the output's rows, on chunked.py's
    threads where the output is large enough (one block otherwise), in row order."""
    m, k = g.a.shape
    blocks = min(host_threads(), m // 32)
    if m * g.b.shape[1] * -(-k // K_STEP) < SPLIT_WORK or blocks < 2:
        return [work(g, *arrays)]
    edges = np.linspace(0, m, blocks + 1).astype(int)
    spans = list(zip(edges[:-1], edges[1:], strict=True))
    return list(pool().map(lambda span: work(_rows(g, *span),
                                             *(x[span[0]:span[1]] for x in arrays)), spans))


WALK_CHUNK = 1 << 15
"""Outputs per chunk of rows of a walk: its five working arrays (float32) stay in a core's
cache through the K steps, where a block of a thread's rows at once streamed them from memory
in every step (7 passes a step: 99 s of thread time over the two FP8 files' rows, issue 37)."""


def _walk(g: Fp8Gemm) -> np.ndarray:
    return walk_of_sums(g, walk_sums(g))


def walk_sums(g: Fp8Gemm) -> np.ndarray:
    """Each output's float32 sum over k32 steps of (scale M_j)^2 on the host, the scale
    applied per block (:func:`walk_of_sums` makes the walk of it); by chunks of rows that stay
    in a core's cache (:data:`WALK_CHUNK`)."""
    av, bv = (x.astype(np.float32) for x in g.values())
    (m, k), n = av.shape, bv.shape[1]
    run = g.steps()
    steps = -(-k // K_STEP)
    # each step's largest |A| per row and |B| per column, for all steps at once
    pad = steps * K_STEP - k
    a_max = np.abs(np.pad(av, ((0, 0), (0, pad)))).reshape(m, steps, K_STEP).max(axis=2)
    b_max = np.abs(np.pad(bv, ((0, pad), (0, 0)))).reshape(steps, K_STEP, n).max(axis=1)
    var = np.empty((m, n), dtype=np.float32)
    rows = max(1, WALK_CHUNK // max(n, 1))
    shape = (min(rows, m), n)
    partial, step, product = (np.empty(shape, dtype=np.float32) for _ in range(3))
    for lo in range(0, m, rows):
        hi = min(m, lo + rows)
        v, p, st, pr = var[lo:hi], partial[:hi - lo], step[:hi - lo], product[:hi - lo]
        v[:] = 0.0
        scale = None
        for j, start in enumerate(range(0, k, K_STEP)):
            stop = min(k, start + K_STEP)
            if start % run == 0:
                p[:] = 0.0  # promoted: the tensor core starts again from zero
            if g.blocked and start % BLOCK_K == 0:  # a block's scales, once per block
                scale = _block_scales(g, start, stop, slice(lo, hi)).astype(np.float32)
            np.multiply(a_max[lo:hi, j, None], b_max[None, j], out=st)
            np.abs(p, out=pr)
            np.maximum(st, pr, out=st)
            if scale is not None:
                st *= scale
            np.multiply(st, st, out=st)
            v += st
            np.matmul(av[lo:hi, start:stop], bv[start:stop], out=pr)
            p += pr
    return var


def walk_of_sums(g: Fp8Gemm, var: np.ndarray) -> np.ndarray:
    """The walk from each output's sum over steps of (scale M_j)^2 (``var``, float32, the
    scale applied per block; per tensor, here): the module docstring's formula, its factor
    and square root in float64 (also the GPU's sums, harness/gpu/fp8_walk.py)."""
    factor = 11.0 * ((1 + 2.0 ** -6) * 2.0 ** -WINDOW_PLACES) ** 2
    if not g.blocked:
        factor *= float(_block_scales(g, 0, g.a.shape[1])) ** 2
    return np.sqrt(var.astype(np.float64) * factor)


def walk_with(g: Fp8Gemm, sums) -> np.ndarray:
    """:func:`walk` of ``g`` with its sums made by ``sums`` (the GPU's:
    harness/gpu/fp8_walk.Fp8WalkKernels.sums), from the codes, each format's 256 values, the
    promotion run and, per block, the scales."""
    scales = (g.scale_a, g.scale_b) if g.blocked else (None, None)
    return walk_of_sums(g, sums(g.a, g.b, FORMATS[g.a_format].values,
                                FORMATS[g.b_format].values, g.steps(), *scales))


def model_output(g: Fp8Gemm, places: int = WINDOW_PLACES,
                 runs: list[tuple[int, int]] | None = None, floor: bool = False) -> np.ndarray:
    """What a right kernel stores (the window's model; ``places``: another window, for the
    tests), in the output type's exact values. ``runs``: the k ranges added on the tensor core
    before each promotion into FP32, in the order they are added (default: ``g``'s promotion
    runs from k = 0); ``floor``: terms truncated toward minus infinity (formats.window_step)."""
    av, bv = g.values()
    k = av.shape[1]
    if runs is None:
        run = g.steps()
        runs = [(start, min(k, start + run)) for start in range(0, k, run)]
    acc = np.zeros((av.shape[0], bv.shape[1]), dtype=np.float32)
    for start, stop in runs:
        part = tensor_core_dot(av[:, start:stop], bv[start:stop], places=places,
                               floor=floor)
        scales = (_block_scales(g, start, stop) if g.blocked else np.asarray(1.0))
        acc = (acc + part.astype(np.float64) * scales).astype(np.float32)
    if not g.blocked:
        acc = (acc.astype(np.float64) * float(g.scale_a) * float(g.scale_b)).astype(np.float32)
    return to_float64(stored(acc, g.out), g.out)


HW_SAMPLE = 32
"""Rows and columns (each, at random) of the outputs compared with the tensor core's own sums
(:func:`accumulation`): 1024 outputs, some 0.1 s of host time at K = 4096."""
HW_SLACK = 2.0 ** -20
"""An output matches a model of its sums where it is within this share of sum |a b| (the
scales applied) of the model's: FP32's rounding in another order of the same runs is some
2^-24 of it, and an output type's rounding in the other direction 2^-8 of the output or more."""
HW_MISMATCH = 0.02
"""The share of the sampled outputs that may differ from a model and still match it. A right
kernel differs in none (simulated: k order, split-K at tile boundaries, per tensor and block
scales, BF16 and FP32 outputs); a 13-bit window in 12-15% (BF16) and 93-98% (FP32), an FP16
register restarted every 64 k in 10-16% and 95-98%, no promotion where 128 was declared in
7-35% and 86-99% (experiments/fp8_hardware_match.py; notes/verification.md, "FP8 against the
hardware")."""
LESS_ACCURATE = "less accurate than the tensor core's FP8 accumulation"
OTHERWISE = "not the tensor core's accumulation"


def _runs_candidates(k: int, run: int) -> list[tuple[str, list[tuple[int, int]]]]:
    """The promotion runs a right kernel may use, as accurate as ``run`` (the declared) or
    more: shorter runs from k = 0, and K split into 2-8 parts of whole tiles of 32-256 k (each
    part's runs from its start, the parts added in order: split-K, as 22 and 20:n128k2)."""
    found, seen = [], set()

    def add(name, runs):
        key = tuple(runs)
        if key not in seen:
            seen.add(key)
            found.append((name, runs))

    add(f"promote = {run}" if run < k else "no promotion",
        [(s, min(k, s + run)) for s in range(0, k, run)])
    shorter = run // 2
    while shorter >= K_STEP:
        add(f"promote = {shorter}", [(s, min(k, s + shorter)) for s in range(0, k, shorter)])
        shorter //= 2
    for tile in (32, 64, 128, 256):
        for parts in range(2, 9):
            per = math.ceil(math.ceil(k / tile) / parts) * tile
            edges = [(s, min(k, s + per)) for s in range(0, k, per)]
            if len(edges) < 2:
                continue
            add(f"split-K into {len(edges)} parts of {per} k",
                [(s, min(e, s + run)) for lo, e in edges for s in range(lo, e, run)])
    return found


def _magnitude(g: Fp8Gemm) -> np.ndarray:
    """Each output's sum of |a b| with its scales' magnitudes."""
    av, bv = g.values()
    mags = replace(g, scale_a=np.abs(g.scale_a), scale_b=np.abs(g.scale_b))
    return reference(mags, np.abs(av), np.abs(bv))


def _mismatch(out: np.ndarray, model: np.ndarray, magnitude: np.ndarray) -> float:
    return float(np.mean(~(np.abs(out - model) <= HW_SLACK * magnitude)))


def accumulation(g: Fp8Gemm, out: np.ndarray, seed: int = 0, ref: np.ndarray | None = None
                 ) -> tuple[bool, str, str]:
    """Whether ``out`` (``g``'s output, exact values) holds the sums a right kernel makes:
    on HW_SAMPLE random rows by as many columns (from ``seed``), it matches (HW_MISMATCH) the
    tensor core's window summed in runs as accurate as the declared promotion or more
    (:func:`_runs_candidates`; terms truncated toward zero, or toward minus infinity: the
    H100's probes have not yet had mixed signs), or FP32 sums of the exact products (a kernel
    on the CUDA cores). Returned: (it does, the finding, the story). The norm bound cannot
    tell these apart: an FP16 register restarted every 64 k, a 13-bit window or no promotion
    where 128 was declared stayed within 0.15-0.22 of it (issue 57); their sums are not the
    tensor core's, and show in the outputs at every K."""
    m, n = out.shape
    k = g.a.shape[1]
    rng = np.random.default_rng([seed, m, n, k, 0x8A])
    rows = np.sort(rng.choice(m, size=min(m, HW_SAMPLE), replace=False))
    cols = np.sort(rng.choice(n, size=min(n, HW_SAMPLE), replace=False))
    part = Fp8Gemm(g.a[rows], g.b[:, cols], g.a_format, g.b_format,
                   *subset((g.scale_a, g.scale_b), rows, cols, n), g.out, g.promote)
    got = out[np.ix_(rows, cols)]
    magnitude = _magnitude(part)
    candidates = _runs_candidates(k, part.steps())
    declared_name, declared_runs = candidates[0]
    declared = model_output(part, runs=declared_runs)
    share = _mismatch(got, declared, magnitude)
    exact = reference(part) if ref is None else ref[np.ix_(rows, cols)]

    def models():
        yield model_output(part, runs=declared_runs, floor=True)
        yield to_float64(stored(exact, g.out), g.out)  # FP32 sums of the exact products
        for floor in (False, True):
            for _, runs in candidates[1:]:
                yield model_output(part, runs=runs, floor=floor)

    if share <= HW_MISMATCH or any(_mismatch(got, x, magnitude) <= HW_MISMATCH
                                   for x in models()):
        return True, "ok", "ok"
    near = [(f"a {places + 1}-bit window", places, declared_runs)
            for places in (WINDOW_PLACES - 2, WINDOW_PLACES - 1)]
    if declared_runs != [(0, k)]:
        near.append(("no promotion", WINDOW_PLACES, [(0, k)]))
    near = [(nm + (" (toward minus infinity)" if floor else ""),
             model_output(part, places, runs, floor))
            for nm, places, runs in near for floor in (False, True)]
    name, nearest = min(((nm, _mismatch(got, x, magnitude)) for nm, x in near),
                        key=lambda item: item[1])
    finding = (LESS_ACCURATE if np.linalg.norm(got - exact) > np.linalg.norm(declared - exact)
               else OTHERWISE)
    return False, finding, (
        f"{finding}: {share:.0%} of {got.size} sampled outputs differ from the tensor core's "
        f"sums with {declared_name} (a right kernel: none; at most {HW_MISMATCH:.0%}), and "
        f"they are no FP32 sums of the exact products, nor a shorter promotion or a split of "
        f"K; nearest: {name} ({nearest:.0%} differ)")


@dataclass(frozen=True)
class Fp8Verdict:
    passed: bool
    finding: str
    """"ok", "wrong values", "ignores the scale of A" (or B), "reads A as e4m3" (and the
    like), "less accurate than the tensor core's FP8 accumulation", "non-finite"."""
    error_norm: float
    norm_bound: float
    bad_elements: int
    message: str


def _bounds(g: Fp8Gemm, ref: np.ndarray) -> tuple[np.ndarray, float]:
    """Each element's bound and the norm's, for ``g`` whose reference is ``ref``."""
    w = walk(g)
    element, rounding = _element_bounds(g, ref, w)
    return element, NORM_SAFETY * float(np.linalg.norm(w)) + 2.0 * float(np.linalg.norm(rounding))


def _element_bounds(g: Fp8Gemm, ref: np.ndarray, w: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Each element's bound from its walk ``w`` and reference ``ref``: ELEMENT_SAFETY walks,
    twice the output's rounding and the reference's own float64 error; and that rounding (0
    for an FP32 output, whose rounding the walk holds)."""
    rounding = (half_ulp(np.abs(ref) + ELEMENT_SAFETY * w, g.out) if g.out != "fp32"
                else np.zeros_like(ref))
    return ELEMENT_SAFETY * w + 2.0 * rounding + np.abs(ref) * 2.0 ** -24, rounding


def _within(g: Fp8Gemm, out: np.ndarray, widen: float = 1.0, ref: np.ndarray | None = None,
            walked: np.ndarray | None = None) -> tuple[bool, float, float, int]:
    """Whether ``out`` is what a right kernel computing ``g`` (reference ``ref``, made if not
    given) may give, its bounds ``widen`` times wider: (it is, the error norm, the norm's
    bound, elements outside their own). By blocks of rows (:func:`_by_rows`): each block's
    walk (``walked``'s rows where it is given: :func:`walk` of ``g``, made on the GPU), bounds
    and error, and the sums of squares the norms are made of."""
    ref = reference(g) if ref is None else ref
    arrays = (out, ref) if walked is None else (out, ref, walked)

    def block(gb: Fp8Gemm, out_b: np.ndarray, ref_b: np.ndarray,
              walked_b: np.ndarray | None = None) -> tuple[float, ...]:
        w = _walk(gb) if walked_b is None else walked_b
        element, rounding = _element_bounds(g, ref_b, w)
        err = out_b - ref_b
        finite = np.where(np.isfinite(err), err, 0.0)
        bad = int(np.count_nonzero(~(np.abs(err) <= widen * element)))
        return (float(np.square(w).sum()), float(np.square(rounding).sum()),
                float(np.square(finite).sum()), bad)

    w2, r2, e2, bad = (sum(x) for x in zip(*_by_rows(g, block, *arrays), strict=True))
    norm_bound = widen * (NORM_SAFETY * math.sqrt(w2) + 2.0 * math.sqrt(r2))
    norm = math.sqrt(e2)
    return bad == 0 and norm <= norm_bound, norm, norm_bound, int(bad)


def judge(g: Fp8Gemm, out: np.ndarray, ref: np.ndarray | None = None,
          walked: np.ndarray | None = None, seed: int = 0) -> Fp8Verdict:
    """``out`` (the output's exact values) against the reference (``ref``, made if not given)
    and the bound (from ``walked``, ``g``'s :func:`walk`, where it is given); a failure named
    by the mistaken GEMM that ``out`` passes as instead. Within the bound, its sums must be
    the tensor core's, or FP32's (:func:`accumulation`, on a sample drawn from ``seed``)."""
    if not np.isfinite(out).all():
        n = int(np.count_nonzero(~np.isfinite(out)))
        return Fp8Verdict(False, "non-finite", math.inf, math.nan, n,
                          f"non-finite: {n} of {out.size} outputs are NaN or Inf")
    ok, norm, norm_bound, bad = _within(g, out, ref=ref, walked=walked)
    if ok:
        summed, finding, story = accumulation(g, out, seed, ref)
        return Fp8Verdict(summed, finding, norm, norm_bound, 0, story)
    finding, story = _explain(g, out, walked)
    return Fp8Verdict(False, finding, norm, norm_bound, bad,
                      f"{finding}: error norm {norm:.3g} against a bound of {norm_bound:.3g}, "
                      f"{bad} of {out.size} outputs outside theirs; {story}")


def _explain(g: Fp8Gemm, out: np.ndarray, walked: np.ndarray | None = None
             ) -> tuple[str, str]:
    """What ``out`` is instead: the GEMM of a known mistake it passes as, else how far off
    (``walked``: ``g``'s walk, where it is made; each mistake's own is made here)."""
    other = {"e4m3": "e5m2", "e5m2": "e4m3"}
    one_a = np.ones_like(g.scale_a) if g.blocked else 1.0
    one_b = np.ones_like(g.scale_b) if g.blocked else 1.0
    mistakes = [
        ("ignores the scale of A", "it is the product without A's scales",
         replace(g, scale_a=one_a)),
        ("ignores the scale of B", "it is the product without B's scales",
         replace(g, scale_b=one_b)),
        (f"reads A as {other[g.a_format]}",
         f"it is the product with A's bytes read as {other[g.a_format]}, not {g.a_format}",
         replace(g, a_format=other[g.a_format])),
        (f"reads B as {other[g.b_format]}",
         f"it is the product with B's bytes read as {other[g.b_format]}, not {g.b_format}",
         replace(g, b_format=other[g.b_format])),
    ]
    for finding, story, mistaken in mistakes:
        av, bv = mistaken.values()
        if np.isfinite(av).all() and np.isfinite(bv).all() and _within(mistaken, out)[0]:
            return finding, story
    if _within(g, out, widen=FEWER_BITS, walked=walked)[0]:
        return (LESS_ACCURATE,
                "its error is a few times what the 14-bit window allows on these inputs "
                "(an FP16 accumulator keeps 11 bits), but near the product: it accumulates "
                "with fewer bits than the tensor core")
    return "wrong values", "it is none of the known mistakes (scales, formats, accumulator)"


WHOLE_BUDGET = 1 << 27
"""Outputs times k32 steps up to which the walk is taken over the whole output; past it (the
timed sizes), over :data:`SAMPLE` random rows by as many random columns."""
SAMPLE = 256
SAMPLED_NORM_SLACK = 1.5
"""The whole output's error norm may be this many times the sample's bound scaled to the
whole (sqrt of the outputs' ratio): the sample's norm estimates the whole's within a few
percent at 256 x 256, so only a kernel wrong outside the sample gets near it."""


def subset(scales: tuple, rows: np.ndarray, cols: np.ndarray, n: int) -> tuple:
    """The scales of the outputs at ``rows`` x ``cols`` of an N-wide output: per tensor as
    they are; per block, A's rows and B's per column (K / 128 x len(cols))."""
    sa, sb = scales
    if not np.ndim(sa):
        return sa, sb
    sb = np.asarray(sb, dtype=np.float64)
    if sb.shape[1] != n:
        sb = np.repeat(sb, BLOCK_K, axis=1)[:, :n]
    return np.asarray(sa, dtype=np.float64)[rows], sb[:, cols]


def whole(m: int, n: int, k: int) -> bool:
    """Whether an m x n x k check takes its bound over the whole output (:func:`sample`)."""
    return m * n * -(-k // K_STEP) <= WHOLE_BUDGET


def sample(m: int, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows and columns the walk is taken over: all of them while the output is small
    enough (:data:`WHOLE_BUDGET`), else a random sample drawn from ``seed``."""
    if whole(m, n, k):
        return np.arange(m), np.arange(n)
    rng = np.random.default_rng([seed, m, n, k])
    return (np.sort(rng.choice(m, size=min(m, SAMPLE), replace=False)),
            np.sort(rng.choice(n, size=min(n, SAMPLE), replace=False)))


UNWRITTEN_CHECKED = 64
"""Outputs that kept C's bits checked against their own bounds (at random, where more did)."""


def _kept_and_wrong(out64: np.ndarray, a: np.ndarray, b: np.ndarray, fp8, scales, c_type: str,
                    same: np.ndarray, seed: int) -> tuple[tuple, int, int] | None:
    """Of the outputs at ``same`` (row, col pairs that kept C's bits), up to
    UNWRITTEN_CHECKED judged against their own bounds: (the first wrong one, how many were
    wrong, how many were checked), or None when none was wrong. An FP8 GEMM's outputs take
    few values (a BF16 C keeps 8 bits of sums of few distinct products), so a new output may
    equal the old one by chance; only a wrong one is unwritten."""
    if not len(same):
        return None
    if len(same) > UNWRITTEN_CHECKED:
        rng = np.random.default_rng([seed, len(same)])
        same = same[np.sort(rng.choice(len(same), UNWRITTEN_CHECKED, replace=False))]
    rows, cols = np.unique(same[:, 0]), np.unique(same[:, 1])
    g = Fp8Gemm(a[rows], b[:, cols], fp8.a, fp8.b, *subset(scales, rows, cols, b.shape[1]),
                out=c_type, promote=fp8.promote)
    ref = reference(g)
    element, _ = _bounds(g, ref)
    ri, ci = np.searchsorted(rows, same[:, 0]), np.searchsorted(cols, same[:, 1])
    wrong = ~(np.abs(out64[same[:, 0], same[:, 1]] - ref[ri, ci]) <= element[ri, ci])
    if not wrong.any():
        return None
    return tuple(int(i) for i in same[np.argmax(wrong)]), int(wrong.sum()), len(same)


def check(out: np.ndarray, a: np.ndarray, b: np.ndarray, fp8, scales: tuple,
          c_type: str, *, seed: int, initial: np.ndarray | None = None,
          ref: np.ndarray | None = None, walked: np.ndarray | None = None):
    """An FP8 GEMM's output ``out`` (M x N in ``c_type`` storage) as a check's result
    (numerics.CheckResult): A's (M x K) and B's (K x N) codes in ``fp8``'s formats (its
    kernels/fp8_spec.Fp8Spec), ``scales`` per tensor or per block (Fp8Gemm). Unwritten and
    non-finite outputs are found over the whole output; the bound and the findings (:func:`judge`)
    over all of it or a sample (:func:`sample`), and then, with ``ref`` (the whole float64
    reference), the whole output's error norm against the sample's bound scaled to it.
    ``walked``: the :func:`walk` over the rows and columns the bound is taken over (all, or
    :func:`sample`'s for ``seed``), made already (on the GPU: checks.walk_of)."""
    from harness.kinds.gemm.numerics import CheckResult, bits

    m, n = out.shape
    k = a.shape[1]
    out64 = to_float64(out, c_type)

    def failed(finding: str, message: str, bad: int) -> CheckResult:
        return CheckResult(False, m, n, k, seed, 1.0, 0.0, math.inf, math.nan, bad,
                           int(np.count_nonzero(~np.isfinite(out64))), math.nan, message,
                           finding, unwritten_elements=bad if finding == "unwritten" else 0)

    if initial is not None:
        same = bits(out) == bits(np.broadcast_to(initial, out.shape).astype(out.dtype))
        kept = _kept_and_wrong(out64, a, b, fp8, scales, c_type, np.argwhere(same), seed)
        if kept is not None:
            first, wrong, checked = kept
            return failed("unwritten", f"unwritten: {int(same.sum())} of {out.size} outputs "
                          f"hold what C held before the launch, and {wrong} of the {checked} "
                          f"of them checked are outside their bounds, first at (row, col) = "
                          f"{first}", int(same.sum()))
    if not np.isfinite(out64).all():
        bad = int(np.count_nonzero(~np.isfinite(out64)))
        return failed("non-finite", f"non-finite: {bad} of {out.size} outputs are NaN or Inf",
                      bad)
    rows, cols = sample(m, n, k, seed)
    g = Fp8Gemm(a[rows], b[:, cols], fp8.a, fp8.b, *subset(scales, rows, cols, n),
                out=c_type, promote=fp8.promote)
    whole_output = len(rows) == m and len(cols) == n
    part = out64 if whole_output else out64[np.ix_(rows, cols)]
    # the whole output: the reference given (the GPU's, at the sizes where it computes one)
    ref_part = ref if whole_output and ref is not None else reference(g)
    if walked is not None and walked.shape != (len(rows), len(cols)):
        raise ValueError(f"a walk of {walked.shape} for a bound over {len(rows)} rows by "
                         f"{len(cols)} columns")
    verdict = judge(g, part, ref_part, walked, seed)
    ref_norm = float(np.linalg.norm(ref_part)) or 1.0
    norm, bound = verdict.error_norm, verdict.norm_bound
    finding, message, passed = verdict.finding, verdict.message, verdict.passed
    where = "" if whole_output else (
        f" (over {len(rows)} random rows by {len(cols)} random columns)")
    if passed and ref is not None and where:
        whole = float(np.linalg.norm(out64 - ref))
        allowed = bound * math.sqrt(m * n / part.size) * SAMPLED_NORM_SLACK
        if whole > allowed:
            passed, finding = False, "wrong values"
            message = (f"wrong values: the whole output's error norm {whole:.3g} is above "
                       f"{allowed:.3g}, the sample's bound scaled to all {m * n} outputs: "
                       "wrong outside the sampled rows and columns")
    diff = np.abs(part - ref_part)
    return CheckResult(passed, m, n, k, seed, 1.0, 0.0, norm / ref_norm,
                       float(diff.max()) if diff.size else 0.0, verdict.bad_elements, 0,
                       bound / ref_norm, message + where if not passed else "ok", finding)
