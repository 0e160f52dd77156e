"""A, B and C of one GEMM on the device, made from a seed, with their float64 values kept for the
reference (drawn on the host: host_values.py); and the reference itself with its error scale,
cached for the sizes every kernel is checked at.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from harness.bench.phases import PHASES
from harness.gpu.driver import Buffer, Stream
from harness.gpu.reference import WIDENED, Stored
from harness.kinds.gemm import host_values, numerics

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
         self.scales), self._refs = host_values.of(m, n, k, precision, seed, with_c, c_type,
                                                   draw, fp8)
        """``_refs``: the small references of these values by (alpha, beta), once computed."""
        self.c_word_bytes = numerics.c_bytes(c_type)
        if fp8 is None:
            self.a, self.b = Buffer(a.nbytes), Buffer(b.nbytes)
        else:  # the codes, then their scales (scale_offset)
            self.a, self.b = (Buffer(scale_offset(x.nbytes) + scale_offset(s.nbytes))
                              for x, s in zip((a, b), self.stored_scales, strict=True))
        self._lt_scales: tuple[Buffer, Buffer] | None = None
        """A block-scaled GEMM's scales as cuBLASLt reads them (``blas_fp8``), once asked."""
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
        """What the FP8 baseline takes beside the pointers (Cublas.gemm's ``fp8``), or None: the
        formats and the scales' addresses, and for a block-scaled GEMM ``"block"`` and its
        scales again in the layouts cuBLASLt's 1 x 128 / 128 x 128 modes read
        (cublaslt.block_scale_layouts, in buffers of their own): the same product as the
        kernel's. Before issue 62 it got scales of 1, another product on the same codes."""
        if self.fp8 is None:
            return None
        if self.fp8.scales != "block":
            return (self.fp8.a, self.fp8.b, *self.scale_addresses)
        if self._lt_scales is None:
            from harness.gpu.cublaslt import block_scale_layouts

            laid = block_scale_layouts(*self.scales)
            self._lt_scales = tuple(Buffer(x.nbytes) for x in laid)
            for buf, x in zip(self._lt_scales, laid, strict=True):
                buf.upload(x, self._stream)
        a_lt, b_lt = self._lt_scales
        return (self.fp8.a, self.fp8.b, a_lt.address, b_lt.address, "block")

    def _drop_lt_scales(self) -> None:
        for buf in self._lt_scales or ():
            buf.close()
        self._lt_scales = None

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
        (a, self.a64, b, self.b64, _, _, self.scales), self._refs = host_values.of(
            self.m, self.n, self.k, self.precision, seed, False, self.c_type, self.draw,
            self.fp8)
        self.seed, self._stored, self._norm = seed, (a, b), None
        self._drop_kept()
        self._drop_lt_scales()
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
        twin._blas_out = twin._lt_scales = twin._kept = None
        return twin

    def close(self) -> None:
        self._drop_kept()
        self._drop_lt_scales()
        for buf in (self.a, self.b, self.c, self.d, self._blas_out):
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


def scale_offset(nbytes: int) -> int:
    """Where an FP8 operand's scales start in its buffer: after its ``nbytes`` of codes, at the
    next 256-byte boundary (only an FP8 GEMM's operands have them; ``scale_a`` and ``scale_b``
    of its signature point there)."""
    return -(-nbytes // 256) * 256


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
            host_values.keep(_REFERENCES, key, (ref, scale), ref.nbytes + scale.nbytes)
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
