"""A large check's comparison sums on the GPU (issue 37): the sums over C that a passing check
needs (kinds/gemm/chunked.py: elements not finite, outside their bound, unwritten among those, the
squared error, reference, scale and C's rounding, the largest error), read from the kernel's
output where it lies, against the reference and error scale kept on the device beside the
host's copies (:class:`Twins`). At 4096 one comparison read 0.4 GB through a dozen float64
passes on the host's cores, about a second of one core, while the device's timing waited on
the interpreter those threads shared; here it reads the same bytes once, in well under a
millisecond.

Exactness: each element's test is the host's, in the same IEEE float64 operations in the
same order (the source is compiled without fused multiply-adds), so the three counts and the
largest error are the host's exactly; only the four squared sums are added in another order
(a relative difference near 1e-16 of the sum, which chunked.MARGIN leaves room for). A
comparison whose sums say it may fail is compared again whole on the host, by the path that
names the cause; the device decides no failure and no finding.
"""

from __future__ import annotations

import ctypes
import weakref

import numpy as np

from harness.gpu import own_kernels
from harness.gpu.driver import Buffer, LaunchShape, Stream

_SOURCE = rb"""
// one comparison's sums over C (kinds/gemm/chunked.py's _block, element by element): per block
// eight values: [not finite, outside the bound, unwritten among those, sum d^2, max |d|,
// sum ref^2, sum scale^2, sum (round_C(ref) - ref)^2]
#define THREADS 256
__device__ double as_double(const void* out, int kind, unsigned long long at,
                            unsigned int* raw) {
    if (kind == 0) {
        unsigned int u = ((const unsigned int*)out)[at];
        *raw = u;
        return (double)__uint_as_float(u);
    }
    unsigned short h = ((const unsigned short*)out)[at];
    *raw = h;
    float f;
    if (kind == 1) {
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    } else {
        f = __uint_as_float((unsigned int)h << 16);
    }
    return (double)f;
}
// numerics.half_ulp: half the spacing of C's type at x >= 0
__device__ double half_ulp(double x, int kind) {
    double top = __longlong_as_double(__double_as_longlong(x) & 0x7FF0000000000000ll);
    double spacing = (isfinite(x) ? top : 0.5) * (kind == 1 ? 0x1p-10 : 0x1p-7);
    double least = kind == 1 ? 0x1p-24 : 0x1p-133;
    return x > 0.0 ? 0.5 * fmax(spacing, least) : 0.0;
}
// numerics.stored then to_float64: float64 to float32 (nearest even), then to C's type
__device__ double rounded(double r, int kind) {
    float f = __double2float_rn(r);
    if (kind == 1) {
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
        float back;
        asm("cvt.f32.f16 %0, %1;" : "=f"(back) : "h"(h));
        return (double)back;
    }
    unsigned int u = __float_as_uint(f);
    unsigned int top = (u + (((u >> 16) & 1u) + 0x7FFFu)) >> 16;
    return (double)__uint_as_float(top << 16);
}
extern "C" __global__ void __launch_bounds__(THREADS)
compare_sums(const void* out, int kind, int col_major, const double* ref, const float* scale,
             int has_initial, unsigned int initial, double factor, unsigned long long m,
             unsigned long long n, double* partial) {
    double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    unsigned long long total = m * n;
    for (unsigned long long i = blockIdx.x * (unsigned long long)THREADS + threadIdx.x;
         i < total; i += (unsigned long long)gridDim.x * THREADS) {
        unsigned long long at = col_major ? (i % n) * m + i / n : i;
        unsigned int raw;
        double o = as_double(out, kind, at, &raw);
        double r = ref[i];
        double sc = (double)scale[i];
        bool finite = isfinite(o);
        double local = factor * sc;
        double limit = kind == 0 ? local : local + half_ulp(fabs(r) + local, kind);
        double d = finite ? o - r : 0.0;
        double diff = finite ? fabs(d) : __longlong_as_double(0x7FF0000000000000ll);
        bool bad = diff > limit;
        s[0] += finite ? 0.0 : 1.0;
        s[1] += bad ? 1.0 : 0.0;
        s[2] += (has_initial && bad && raw == initial) ? 1.0 : 0.0;
        s[3] += d * d;
        s[4] = fmax(s[4], diff);
        s[5] += r * r;
        s[6] += sc * sc;
        if (kind != 0) {
            double e = rounded(r, kind) - r;
            s[7] += e * e;
        }
    }
    __shared__ double shared[8][THREADS];
    for (int j = 0; j < 8; ++j) shared[j][threadIdx.x] = s[j];
    __syncthreads();
    for (int step = THREADS / 2; step > 0; step >>= 1) {
        if (threadIdx.x < step) {
            for (int j = 0; j < 8; ++j) {
                double other = shared[j][threadIdx.x + step];
                shared[j][threadIdx.x] = j == 4 ? fmax(shared[j][threadIdx.x], other)
                                                : shared[j][threadIdx.x] + other;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x < 8) partial[blockIdx.x * 8 + threadIdx.x] = shared[threadIdx.x][0];
}
// a keyed checksum of ``count`` 32-bit words (a twin's reference and scale): the sum of each
// (index, word) pair mixed under ``key`` (splitmix64's finaliser); order-free, so the atomics'
// order does not change it, and a kernel that writes into the words cannot keep the sum
// without the key (a launch argument it never sees)
extern "C" __global__ void __launch_bounds__(THREADS)
twin_checksum(const unsigned int* words, unsigned long long count, unsigned long long key,
              unsigned long long* out) {
    unsigned long long s = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)THREADS + threadIdx.x;
         i < count; i += (unsigned long long)gridDim.x * THREADS) {
        unsigned long long x = ((i << 32) | words[i]) ^ key;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        s += x ^ (x >> 31);
    }
    atomicAdd(out, s);
}
"""
THREADS = 256
KINDS = {"fp32": 0, "fp16": 1, "bf16": 2}
"""C's types the device compares, by the kernel's code (the storage of each: numerics)."""
SOURCE = own_kernels.Source(_SOURCE, "compare_sums.cu", "the comparisons' sums",
                            ("--fmad=false",))
TWIN_BYTES = 3 << 30
"""Device memory the references' twins may hold (a 4096 reference and its scale: 201 MB; a
default run keeps about 2 GB)."""


class SumsKernels:
    """The comparison's kernel, built the first time it is needed."""

    def __init__(self, stream: Stream, sm_count: int):
        self.stream = stream
        self.module = own_kernels.module(SOURCE)
        self._sums = self.module.function("compare_sums")
        self.blocks = 4 * sm_count
        self.partial = Buffer(self.blocks * 8 * 8)
        self._checksum = self.module.function("twin_checksum")
        self.sum = Buffer(8)

    def checksum(self, buffers: tuple[Buffer, ...], key: int) -> int:
        """The keyed checksum (``twin_checksum``) of ``buffers``' words, each its own sum
        mixed into the next; ordered after the work on the stream, waits for it."""
        total = 0
        for buf in buffers:
            self.sum.fill_u32(0, self.stream)
            count = buf.nbytes // 4
            blocks = max(1, min(self.blocks, -(-count // THREADS)))
            self._checksum.launch(LaunchShape((blocks, 1, 1), (THREADS, 1, 1), 0), self.stream, (
                ctypes.c_uint64(buf.address), ctypes.c_uint64(count),
                ctypes.c_uint64((key ^ total) & 0xFFFFFFFFFFFFFFFF),
                ctypes.c_uint64(self.sum.address)))
            total = int(self.sum.download_at(0, np.uint64, 1, self.stream)[0])
        return total

    def sums(self, out: Buffer, c_type: str, layout_c: str, ref: Buffer, scale: Buffer,
             initial: int | None, factor: float, m: int, n: int) -> np.ndarray:
        """The eight sums (module docstring) of the m x n output in ``out`` (``layout_c`` as
        the kernel stores it) against ``ref`` (float64) and ``scale`` (float32), both
        row-major; ``initial``: the bit pattern of C before the launch, or None. Ordered
        after the work on the stream; waits for them."""
        blocks = max(1, min(self.blocks, -(-m * n // THREADS)))
        self._sums.launch(LaunchShape((blocks, 1, 1), (THREADS, 1, 1), 0), self.stream, (
            ctypes.c_uint64(out.address), ctypes.c_int32(KINDS[c_type]),
            ctypes.c_int32(layout_c != "row"), ctypes.c_uint64(ref.address),
            ctypes.c_uint64(scale.address), ctypes.c_int32(initial is not None),
            ctypes.c_uint32(initial or 0), ctypes.c_double(factor), ctypes.c_uint64(m),
            ctypes.c_uint64(n), ctypes.c_uint64(self.partial.address)))
        parts = self.partial.download_at(0, np.float64, blocks * 8, self.stream)
        parts = parts.reshape(blocks, 8)
        total = parts.sum(axis=0)
        total[4] = parts[:, 4].max()
        return total


class Twins:
    """The device copies of references computed on the device, found by their host arrays
    (as long as the host keeps the array, its twin stays, up to :data:`TWIN_BYTES`, the
    oldest given up first). Used and freed on the device's thread only."""

    def __init__(self, budget: int = TWIN_BYTES):
        self.budget = budget
        self._kept: dict[int, tuple[weakref.ref, Buffer, Buffer]] = {}
        self._sealed: dict[int, int | None] = {}
        self._retired: list[Buffer] = []

    def keep(self, ref: np.ndarray, ref_buf: Buffer, scale_buf: Buffer,
             checksum: int | None = None) -> None:
        """``checksum``: the twin's keyed checksum as made (SumsKernels.checksum), what
        :meth:`sealed` gives to compare it with around every launch that shares the device."""
        self._prune()
        self._drop(id(ref))
        self._kept[id(ref)] = (weakref.ref(ref), ref_buf, scale_buf)
        self._sealed[id(ref)] = checksum
        while sum(r.nbytes + s.nbytes for _, r, s in self._kept.values()) > self.budget \
                and len(self._kept) > 1:
            self._drop(next(iter(self._kept)))

    def of(self, ref: np.ndarray) -> tuple[Buffer, Buffer] | None:
        """``ref``'s twin on the device (its reference and scale buffers), or None."""
        found = self._kept.get(id(ref))
        if found is None or found[0]() is not ref:
            return None
        return found[1], found[2]

    def sealed(self, ref: np.ndarray) -> int | None:
        """The checksum ``ref``'s twin had when it was made (None: none was made)."""
        return self._sealed.get(id(ref)) if self.of(ref) is not None else None

    def forget(self, ref: np.ndarray) -> None:
        """``ref``'s twin given up (it changed: the host's reference serves from now on). Its
        memory stays allocated until :meth:`close`: a kernel that wrote there may write again,
        and freed memory would turn that into an illegal address, or into someone else's."""
        found = self._kept.pop(id(ref), None) if self.of(ref) is not None else None
        self._sealed.pop(id(ref), None)
        if found is not None:
            self._retired += found[1:]

    def close(self) -> None:
        for key in list(self._kept):
            self._drop(key)
        while self._retired:
            self._retired.pop().close()

    def _prune(self) -> None:
        for key in [key for key, (alive, _, _) in self._kept.items() if alive() is None]:
            self._drop(key)

    def _drop(self, key: int) -> None:
        found = self._kept.pop(key, None)
        self._sealed.pop(key, None)
        if found is not None:
            found[1].close()
            found[2].close()
