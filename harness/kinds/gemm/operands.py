"""A, B and C of one GEMM on the device, made from a seed, with their float64 values kept for the
reference; and the reference itself with its error scale, cached for the sizes every kernel is
checked at.

C is allocated with a guard after it, filled with the sentinel before every checked launch, so a
kernel that writes past the end of C (tiles that ignore M and N) is caught instead of silently
corrupting whatever lies beyond.

A kernel that declares ``layout_a = "col"`` gets A stored transposed (M x K column-major, which is
K x M row-major); one with ``layout_c = "col"`` has C's start values stored transposed and C read
back transposed (:func:`stored_a`, :func:`stored_c`, :func:`logical_c`). Everything outside this
module (references, comparisons, probes) sees the logical M x K A and M x N row-major C.

A kernel whose signature has a separate output D (``with_d``) writes D (same type and layout as
C, with the guard) and only reads C: :attr:`Operands.out` is the buffer a launch writes, D or C,
and what :meth:`Operands.result` reads back; C keeps its start values.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager

import numpy as np

from harness.bench.phases import PHASES
from harness.gpu.driver import Buffer, Stream
from harness.gpu.reference import WIDENED, Stored
from harness.kinds.gemm import contents, numerics

GUARD_ELEMENTS = 1 << 15
"""Elements of C's type after C, checked unchanged after every checked launch: a kernel that
ignores M and N on a 37 x 45 check shape writes at most a few thousand past the end."""


class Operands:
    """A, B, C on the device for one shape, with their float64 values kept for references."""

    def __init__(self, stream: Stream, m: int, n: int, k: int, precision: str, layout_b: str,
                 seed: int, with_c: bool = False, c_type: str = "fp32", layout_a: str = "row",
                 layout_c: str = "row", with_d: bool = False, draw: str = "uniform",
                 fp8=None):
        self.m, self.n, self.k, self.c_type = m, n, k, c_type
        self.precision, self.layout_b, self.seed = precision, layout_b, seed
        self.layout_a, self.layout_c, self.draw = layout_a, layout_c, draw
        self.fp8, self._stream = fp8, stream
        """An FP8 GEMM's formats and scales (kernels/fp8_spec.Fp8Spec), or None."""
        self.kinds = (fp8.a, fp8.b) if fp8 is not None else (precision, precision)
        """A's and B's storage kinds: the precision, or each one's FP8 format."""
        (a, self.a64, b, self.b64, self.c_start, self.c64,
         self.scales), self._refs = _host_operands(m, n, k, precision, seed, with_c, c_type,
                                                   draw, fp8)
        """``_refs``: the small references of these values by (alpha, beta), once computed."""
        self.c_word_bytes = numerics.c_bytes(c_type)
        if fp8 is None:
            self.a, self.b = Buffer(a.nbytes), Buffer(b.nbytes)
        else:  # the codes, then their scales (scale_offset)
            self.a, self.b = (Buffer(scale_offset(x.nbytes) + scale_offset(s.nbytes))
                              for x, s in zip((a, b), self.stored_scales, strict=True))
        self._unit: Buffer | None = None
        self.c = Buffer((m * n + GUARD_ELEMENTS) * self.c_word_bytes)
        self.d = Buffer((m * n + GUARD_ELEMENTS) * self.c_word_bytes) if with_d else None
        self.out = self.d if with_d else self.c
        """The buffer a launch writes: D for a kernel with a separate output, else C."""
        self._blas_out: Buffer | None = None
        self._norm: float | None = None
        self._stored = (a, b)
        self._kept: tuple[Buffer, Buffer] | None = None
        """A and B as drawn, copied on the device at the first ``restore``."""
        self._upload(a, b, stream)

    @property
    def blas_out(self) -> Buffer:
        """The output cuBLAS writes when it is timed beside a kernel: its own, so that the
        kernel never finds cuBLAS's result in its C (made the first time it is asked for)."""
        if self._blas_out is None:
            self._blas_out = Buffer(self.out.nbytes)
        return self._blas_out

    def restore(self, stream: Stream) -> None:
        """A and B back to the values drawn from ``seed`` (a timing draws others into them):
        uploaded the first time, and copied then on the device, whence later restores come
        (every kernel of a shape and types is timed on these operands: the uploads took 0.84
        s of a default run's main thread, the sampled run at 46eb87d)."""
        if self._kept is None:
            self._upload(*self._stored, stream)
            self._kept = (Buffer(self.a.nbytes), Buffer(self.b.nbytes))
            for kept, buf in zip(self._kept, (self.a, self.b), strict=True):
                kept.copy_from(buf, stream)
        else:
            for kept, buf in zip(self._kept, (self.a, self.b), strict=True):
                buf.copy_from(kept, stream)
        stream.synchronize("restore")

    def _drop_kept(self) -> None:
        for buf in self._kept or ():
            buf.close()
        self._kept = None

    def product_norm(self) -> float:
        """numerics.product_norm of A and B's float64 values, computed once (every kernel of a
        run checks on the same timing operands: 30 ms each at 4096)."""
        if self._norm is None:
            self._norm = numerics.product_norm(self.a64, self.b64)
        return self._norm

    @property
    def unrounded(self) -> bool:
        """TF32 inputs given as FP32 values TF32 cannot hold (the ``wide`` draw)."""
        return self.precision == "tf32" and self.draw == "wide"

    @property
    def codes(self) -> tuple[np.ndarray, np.ndarray]:
        """A (M x K) and B (K x N) in their storage form, logical shapes (an FP8 GEMM's
        codes)."""
        return self._stored

    @property
    def scale_addresses(self) -> tuple[int, int]:
        """The device addresses of A's and B's FP32 scales (an FP8 GEMM's ``scale_a`` and
        ``scale_b``): each right after its operand's codes (:func:`scale_offset`)."""
        return (self.a.address + scale_offset(self.m * self.k),
                self.b.address + scale_offset(self.k * self.n))

    @property
    def stored_scales(self) -> tuple[np.ndarray, np.ndarray]:
        """A's and B's scales as the device holds them, FP32: one each per tensor; per block,
        A's [KB][M] (k-block major) and B's [KB][NB] (KB = ceil(K / 128), NB = ceil(N / 128))."""
        sa, sb = (np.asarray(s, dtype=np.float32) for s in self.scales)
        return np.ascontiguousarray(sa.T).reshape(-1), np.ascontiguousarray(sb).reshape(-1)

    @property
    def blas_fp8(self) -> tuple | None:
        """What the FP8 baseline takes beside the pointers (Cublas.gemm's ``fp8``), or None.
        cuBLASLt has per-tensor FP8 scales only: a block-scaled GEMM's baseline gets scales of
        1 (the same work on the same codes, another product; checks.check_baseline skips it)."""
        if self.fp8 is None:
            return None
        if self.fp8.scales != "block":
            return (self.fp8.a, self.fp8.b, *self.scale_addresses)
        if self._unit is None:
            self._unit = Buffer(4)
            self._unit.upload(np.ones(1, dtype=np.float32), self._stream)
        return (self.fp8.a, self.fp8.b, self._unit.address, self._unit.address)

    def _upload(self, a: np.ndarray, b: np.ndarray, stream: Stream) -> None:
        b = np.ascontiguousarray(b.T) if self.layout_b == "col" else b
        if self.fp8 is None:
            self.a.upload(stored_a(a, self.layout_a), stream)
            self.b.upload(b, stream)
            return
        for buf, codes, scale in zip((self.a, self.b), (a, b), self.stored_scales, strict=True):
            buf.upload_at(codes, 0, stream)  # the codes, then their scales after them
            buf.upload_at(scale, scale_offset(codes.nbytes), stream)

    def redraw(self, seed: int, stream: Stream) -> None:
        """New A and B from ``seed`` in the same device buffers; C is left as it is (the stale-C
        probe: a kernel must not find its last result there and keep it)."""
        (a, self.a64, b, self.b64, _, _, self.scales), self._refs = _host_operands(
            self.m, self.n, self.k, self.precision, seed, False, self.c_type, self.draw,
            self.fp8)
        self.seed, self._stored, self._norm = seed, (a, b), None
        self._drop_kept()
        self._upload(a, b, stream)

    @contextmanager
    def a_rows_reversed(self, stream: Stream) -> Iterator[None]:
        """A's rows in reverse order in the same buffer while inside (then C's rows are the
        reference's reversed), A as it was after: one launch that no result kept from earlier
        launches can answer."""
        # rows of the logical A (columns of the stored array when A is column-major)
        a = self._stored[0]
        self.a.upload_at(stored_a(np.ascontiguousarray(a[::-1]), self.layout_a), 0, stream)
        try:
            yield
        finally:
            self.a.upload_at(stored_a(a, self.layout_a), 0, stream)

    def poison_c(self, stream: Stream, nan: bool = False) -> None:
        """C and its guard (and D, where the kernel has one) filled with the sentinel (or NaN),
        then C's start values when beta is tested."""
        word = (numerics.NAN_BITS if nan else numerics.SENTINEL)[self.c_type]
        self.c.fill(word, self.c_word_bytes, stream)
        if self.d is not None:
            self.d.fill(word, self.c_word_bytes, stream)
        if self.c_start is not None:
            self.c.upload_at(stored_c(self.c_start, self.layout_c), 0, stream)

    def poison_blas(self, stream: Stream) -> None:
        """cuBLAS's own output (``blas_out``) filled with the sentinel."""
        self.blas_out.fill(numerics.SENTINEL[self.c_type], self.c_word_bytes, stream)

    def start_output(self, stream: Stream) -> None:
        """C's start values into the output buffer too (cuBLAS computes in place: on a kernel
        with D it is given D holding C's values)."""
        if self.d is not None and self.c_start is not None:
            self.d.upload_at(stored_c(self.c_start, self.layout_c), 0, stream)

    def initial(self) -> np.ndarray:
        """The output's bits before a launch (after :meth:`poison_c` without NaN)."""
        if self.c_start is not None and self.d is None:
            return self.c_start
        dtype = numerics.c_dtype(self.c_type)
        return np.full((self.m, self.n), numerics.SENTINEL[self.c_type],
                       dtype=np.uint32 if dtype.itemsize == 4 else np.uint16).view(dtype)

    def result(self, stream: Stream) -> tuple[np.ndarray, int]:
        """The output (C, or D) after the launches queued on ``stream`` (M x N row-major
        whatever its layout), and how many guard elements past its end no longer hold the
        sentinel."""
        stream.synchronize("kernel run")
        dtype = numerics.c_dtype(self.c_type)
        whole = self.out.download(dtype, (self.m * self.n + GUARD_ELEMENTS,), stream)
        guard = numerics.bits(whole[self.m * self.n:])
        changed = int(np.count_nonzero(guard != numerics.SENTINEL[self.c_type]))
        return logical_c(whole[: self.m * self.n], self.layout_c, self.m, self.n), changed

    def placed_copy(self, stream: Stream) -> Operands:
        """The same operands in device memory of their own (a timing's placements): A and B
        (an FP8 GEMM's codes and scales with them) copied on the device, C and D allocated
        (poisoned before every launch), the host values shared. Made from the host, each
        copy's transposes and pageable uploads took about 3.6 s of a default run's main
        thread (issue 37, the sampled run at f65d793)."""
        twin = copy.copy(self)
        twin.a, twin.b = Buffer(self.a.nbytes), Buffer(self.b.nbytes)
        twin.a.copy_from(self.a, stream)
        twin.b.copy_from(self.b, stream)
        twin.c = Buffer(self.c.nbytes)
        twin.d = Buffer(self.d.nbytes) if self.d is not None else None
        twin.out = twin.d if twin.d is not None else twin.c
        twin._blas_out = twin._unit = twin._kept = None
        return twin

    def close(self) -> None:
        self._drop_kept()
        for buf in (self.a, self.b, self.c, self.d, self._blas_out, self._unit):
            if buf is not None:
                buf.close()


def for_kernel(stream: Stream, spec, m: int, n: int, k: int, seed: int,
               with_c: bool = False, draw: str = "uniform") -> Operands:
    """Fresh operands with ``spec``'s types and layouts (and a D where its signature has one),
    drawn ``draw`` (numerics.random_operand)."""
    return Operands(stream, m, n, k, spec.precision, spec.layout_b, seed, with_c=with_c,
                    c_type=spec.c_type, layout_a=spec.layout_a, layout_c=spec.layout_c,
                    with_d=spec.has_d, draw=draw, fp8=getattr(spec, "fp8", None))


def fp8_key(spec) -> tuple:
    """What tells apart two FP8 GEMMs of the same precision in a cache key: their formats
    and scales (empty for other precisions)."""
    fp8 = getattr(spec, "fp8", None)
    return () if fp8 is None else (fp8.a, fp8.b, fp8.scales)


BLOCK = 128
"""The extent of a block scale: 1 x 128 of A, 128 x 128 of B (fp8_spec.BLOCK_K)."""


def scale_offset(nbytes: int) -> int:
    """Where an FP8 operand's scales start in its buffer: after its ``nbytes`` of codes, at the
    next 256-byte boundary (only an FP8 GEMM's operands have them; ``scale_a`` and ``scale_b``
    of its signature point there)."""
    return -(-nbytes // 256) * 256


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


def stored_a(a: np.ndarray, layout: str) -> np.ndarray:
    """The logical M x K A as the kernel reads it: itself when row-major; for ``"col"`` its
    transpose as a contiguous K x M array (M x K column-major, lda = M)."""
    return a if layout == "row" else np.ascontiguousarray(a.T)


def stored_c(c: np.ndarray, layout: str) -> np.ndarray:
    """The logical M x N C (start values) as the kernel reads it: itself when row-major; for
    ``"col"`` its transpose as a contiguous N x M array (ldc = M)."""
    return c if layout == "row" else np.ascontiguousarray(c.T)


def logical_c(c: np.ndarray, layout: str, m: int, n: int) -> np.ndarray:
    """C as M x N row-major from its first ``m * n`` stored elements: reshaped when row-major;
    for ``"col"`` read as N x M and transposed (a contiguous copy)."""
    flat = c.reshape(-1)[: m * n]
    if layout == "row":
        return flat.reshape(m, n)
    return np.ascontiguousarray(flat.reshape(n, m).T)


_HOST: dict[tuple, tuple] = {}
CACHE_BYTES = 6 << 30
"""Host memory each of the two caches below may hold: every timed size of a default run
(1024, 2048, 4096) in every precision fits, so no kernel redraws what the one before drew."""


def _keep(cache: dict, key, value, nbytes: int) -> None:
    """Put ``value`` in ``cache``, dropping the oldest entries while it would exceed
    CACHE_BYTES (``nbytes`` per entry, counted at insertion)."""
    cache[key] = (value, nbytes)
    while sum(n for _, n in cache.values()) > CACHE_BYTES and len(cache) > 1:
        cache.pop(next(iter(cache)))


def _host_operands(m: int, n: int, k: int, precision: str, seed: int, with_c: bool,
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
        _keep(_HOST, key, made, sum(x.nbytes for x in made[:6] if x is not None))
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
    """The host values of operands about to be made (:func:`for_kernel`'s arguments) drawn on
    ``executor`` beside other work (the device timing the last kernel, the host idle), and,
    with ``reference`` (alpha, beta), their float64 reference and error scale on the host
    (a check small enough that the host computes it): the Operands made with the same
    arguments takes them instead of drawing."""
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


_REFERENCES: dict[tuple, tuple] = {}
ReferenceEngine = Callable[[np.ndarray, np.ndarray, float, float, np.ndarray | None],
                           tuple[np.ndarray, np.ndarray]]
"""What computes a reference instead of numpy: (A, B, alpha, beta, C) to the reference and its
error scale, as :func:`numerics.reference` and :func:`numerics.error_scale` give them (a
session's cuBLAS DGEMM, gpu/reference.py)."""


def reference(ops: Operands, key: tuple, alpha: float, beta: float,
              engine: ReferenceEngine | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The float64 reference and its error scale (numerics.error_scale, what the tolerance is
    measured in), reused by every kernel checked on the same inputs (same shape, seed and
    precision give the same operands) at large sizes: at 8192 each costs seconds. ``engine``
    computes them instead of numpy (references.reference_of passes the session's GPU for large
    ones); the cache keeps either, since they differ by float64 rounding only."""
    with PHASES("references"):
        if ops.m * ops.n < 1 << 20:  # kept with its operands (a check's repeats, a probe)
            kept = getattr(ops, "_refs", {})
            if (alpha, beta) not in kept:
                kept[alpha, beta] = _reference_and_scale(ops, alpha, beta, engine)
            return kept[alpha, beta]
        if key not in _REFERENCES:
            ref, scale = _reference_and_scale(ops, alpha, beta, engine)
            _keep(_REFERENCES, key, (ref, scale), ref.nbytes + scale.nbytes)
        return _REFERENCES[key][0]


def _as_stored(ops: Operands) -> tuple:
    """A and B for a reference engine: their codes where the device widens their kind
    (gpu/reference.Stored: a quarter of float64's bytes for 16-bit inputs), else float64."""
    kinds, codes = getattr(ops, "kinds", None), getattr(ops, "codes", None)
    if getattr(ops, "fp8", None) is None and codes is not None and kinds is not None \
            and all(kind in WIDENED for kind in kinds):
        return tuple(Stored(c, kind) for c, kind in zip(codes, kinds, strict=True))
    return ops.a64, ops.b64


def _reference_and_scale(ops: Operands, alpha: float, beta: float,
                         engine: ReferenceEngine | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
    if engine is not None:
        return engine(*_as_stored(ops), alpha, beta, ops.c64)
    return (numerics.reference(ops.a64, ops.b64, alpha, beta, ops.c64),
            numerics.error_scale(ops.a64, ops.b64, alpha, beta, ops.c64))
