"""Inputs of a buffers kernel drawn on the device before every launch, the same values drawn
here in numpy, and the timed repetitions' outputs kept by a secret reservoir.

Element ``i`` of buffer ``b`` for content ``c`` is ``lo + span * u + shift``, all in FP32 with
no contraction (``__fmul_rn``, ``__fadd_rn``; numpy's float32 operations round alike): ``u``
in [0, 1) on a grid of 2^-24 from the content's word ``i``, ``shift`` in [0, span / 4) from
the key alone, so that every content has its own mean (a sum kept from an earlier input is
off by about N span / 8, far past its bound); then rounded to the buffer's type (BF16 and FP16
to nearest even). ``u`` and the shift are Philox words of the content's 64-bit key
(keyed.py), ``key = content_key(seed, salt, c, b)`` under the run secret, which no launch
sees: the values of one content say nothing of the next (issue 57). The content
counter lives on the device (a graph replays the same launches; the device advances it), and
so does the reservoir: after every timed repetition a one-thread kernel decides, with a secret
keyed from the run secret, whether its output is kept, and in which slot.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from harness.bench import keyed
from harness.gpu import own_kernels
from harness.gpu.driver import Buffer, LaunchShape, Stream
from harness.kinds.gemm import contents

KIND = {"f32": 0, "bf16": 2, "f16": 3}
SLOT_BASE = 3
"""Device state words: 0 the content now in the inputs, 1 the timed repetitions seen, 2 this
repetition's slot (-1: not kept), then each slot's content."""

_F = contents.FUNCTIONS
SOURCE = (_F[:_F.index("__host__ __device__ inline u32 value_bits")]
          + _F[_F.index("__host__ __device__ inline u32 round_fp16"):
               _F.index("__host__ __device__ inline u32 stored_bits")]) + r"""
#define SHIFT_WORD (1ull << 40)
#define BUFFER_PART 0x200u
__device__ inline u32 drawn_bits(u64 key, u64 index, float lo, float span, u32 kind) {
    const float u = (float)(keyed_word(key, index) >> 8) * 5.9604644775390625e-08f;
    const float shift = __fmul_rn(__fmul_rn(span, 0.25f),
                                  (float)(keyed_word(key, SHIFT_WORD) >> 8)
                                  * 5.9604644775390625e-08f);
    const float v = __fadd_rn(__fadd_rn(lo, __fmul_rn(span, u)), shift);
    const u32 b = __float_as_uint(v);
    if (kind == 2u) return (b + ((b >> 16) & 1u) + 0x7fffu) >> 16;
    if (kind == 3u) return round_fp16(b);
    return b;
}

extern "C" __global__ void draw_tick(u64* state) { state[0] += 1ull; }

// the inputs of the current content into dst (verify = 0), or count the elements of dst that
// no longer hold them (verify = 1)
extern "C" __global__ void draw_fill(void* dst, u64 count, u32 kind, u32 seed, u32 salt,
                                     u32 buffer, const u64* state, float lo, float span,
                                     u32 verify, u32* mismatches, u32 s0, u32 s1, u32 s2,
                                     u32 s3) {
    const u64 key = keyed_content_key(s0, s1, s2, s3, salt ^ mix32(seed), state[0],
                                      BUFFER_PART + buffer);
    u32 bad = 0;
    const u64 step = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        const u32 v = drawn_bits(key, i, lo, span, kind);
        if (kind == 0u) {
            u32* p = (u32*)dst;
            if (verify) bad += p[i] != v; else p[i] = v;
        } else {
            u16* p = (u16*)dst;
            if (verify) bad += p[i] != (u16)v; else p[i] = (u16)v;
        }
    }
    if (verify && bad) atomicAdd(mismatches, bad);
}

// after a timed repetition: keep it (Algorithm R over the repetitions seen) or not
extern "C" __global__ void draw_decide(u64* state, u32 secret, u32 slots) {
    const u64 n = state[1]++;
    long long j = (long long)n;
    if (n >= slots) {
        const u32 h = mix32(secret ^ mix32((u32)n ^ mix32((u32)(n >> 32))));
        j = (long long)(h % (u32)(n + 1ull < 0xffffffffull ? n + 1ull : 0xffffffffull));
        if (j >= (long long)slots) j = -1;
    }
    state[2] = (u64)j;
    if (j >= 0) state[3 + j] = state[0];
}

// copy the output of a kept repetition into its slot
extern "C" __global__ void draw_keep(const u32* src, u32* slots, u64 words, u64 stride,
                                     const u64* state) {
    const long long j = (long long)state[2];
    if (j < 0) return;
    u32* dst = slots + (u64)j * stride;
    const u64 step = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += step) dst[i] = src[i];
}
"""
def _unit(h: np.ndarray) -> np.ndarray:
    return ((h >> np.uint32(8)).astype(np.float64) * 2.0**-24).astype(np.float32)


def drawn(seed: int, salt: int, content: int, buffer: int, count: int, dtype: str,
          lo: float, span: float, start: int = 0) -> np.ndarray:
    """Elements ``start .. start + count`` of a buffer's draw, in its type (numpy's float32,
    bfloat16 as uint16 bits, float16): the device's ``draw_fill``."""
    key = content_key(seed, salt, content, buffer)
    index = np.arange(start, start + count, dtype=np.uint64)
    u = _unit(keyed.words(key, index))
    quarter = np.float32(np.float32(span) * np.float32(0.25))
    shift = np.float32(quarter * _unit(keyed.words(key, np.array([SHIFT_WORD])))[0])
    v = (np.float32(lo) + np.float32(span) * u).astype(np.float32) + shift
    v = v.astype(np.float32)
    if dtype == "f32":
        return v
    if dtype == "f16":
        return v.astype(np.float16)
    bits = v.view(np.uint32)
    return ((bits + ((bits >> np.uint32(16)) & np.uint32(1)) + np.uint32(0x7FFF))
            >> np.uint32(16)).astype(np.uint16)


def as_float64(values: np.ndarray, dtype: str) -> np.ndarray:
    """A buffer's elements (as :func:`drawn` or a download gives them) as float64."""
    if dtype == "bf16":
        return (values.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    return values.astype(np.float64)


SHIFT_WORD = 1 << 40
"""The content's word that gives its shift (past every element's index)."""
BUFFER_PART = 0x200
"""Added to a buffer's index: its part in keyed.content_key, apart from a GEMM's operands."""
KEPT_PART = 0x300


def content_key(seed: int, salt: int, content: int, buffer: int) -> int:
    """The 64-bit key of buffer ``buffer``'s content ``content`` (the device's): keyed.py's,
    under the run secret, named by the salt mixed with the seed."""
    stream = (salt ^ int(contents.mix32(np.array([seed & contents.MASK]))[0])) & contents.MASK
    return keyed.content_key(keyed.run_secret(), stream, content, BUFFER_PART + buffer)


@dataclass(frozen=True)
class Drawn:
    """One input buffer as the draw kernel fills it."""

    buffer: Buffer
    index: int
    dtype: str
    count: int
    lo: float
    span: float


DRAW_SOURCE = own_kernels.Source(SOURCE.encode(), "buffers_draw.cu", "the harness's draw kernels")


class Draws:
    """The draw, keep and tick kernels on one stream, and the device state they share."""

    def __init__(self, stream: Stream, arch: str, sm_count: int):
        self.module = own_kernels.module(DRAW_SOURCE, "buffers draw", arch)
        self.stream, self.sm_count = stream, sm_count
        self._tick = self.module.function("draw_tick")
        self._fill = self.module.function("draw_fill")
        self._decide = self.module.function("draw_decide")
        self._keep = self.module.function("draw_keep")
        self.state = Buffer(8 * (SLOT_BASE + 64))
        self.mismatches = Buffer(4)
        self.reset(0)

    def close(self) -> None:
        self.state.close()
        self.mismatches.close()

    def reset(self, content: int) -> None:
        """Content ``content`` next (the counter before a tick), no repetition seen."""
        words = np.zeros(SLOT_BASE + 64, dtype=np.uint64)
        words[0], words[2] = content, np.uint64(2**64 - 1)
        self.state.upload(words, self.stream)
        self.stream.synchronize("the draw state")

    def _grid(self, count: int) -> LaunchShape:
        blocks = max(1, min(-(-count // 256), 8 * self.sm_count))
        return LaunchShape((blocks, 1, 1), (256, 1, 1), 0)

    def tick(self) -> None:
        self._tick.launch(LaunchShape((1, 1, 1), (1, 1, 1), 0), self.stream,
                          (ctypes.c_uint64(self.state.address),))

    def fill(self, d: Drawn, seed: int, salt: int, verify: bool = False) -> None:
        self._fill.launch(self._grid(d.count), self.stream, (
            ctypes.c_uint64(d.buffer.address), ctypes.c_uint64(d.count),
            ctypes.c_uint32(KIND[d.dtype]), ctypes.c_uint32(seed & 0xFFFFFFFF),
            ctypes.c_uint32(salt & 0xFFFFFFFF), ctypes.c_uint32(d.index),
            ctypes.c_uint64(self.state.address), ctypes.c_float(d.lo), ctypes.c_float(d.span),
            ctypes.c_uint32(int(verify)), ctypes.c_uint64(self.mismatches.address),
            *map(ctypes.c_uint32, keyed.run_secret().words)))

    def decide(self, secret: int, slots: int) -> None:
        """``secret`` names the timing; the reservoir's own secret is keyed from the run
        secret and it (a kernel that knows the run's seed still cannot tell the slots)."""
        word = keyed.content_key(keyed.run_secret(), secret, 0, KEPT_PART) & 0xFFFFFFFF
        self._decide.launch(LaunchShape((1, 1, 1), (1, 1, 1), 0), self.stream, (
            ctypes.c_uint64(self.state.address), ctypes.c_uint32(word),
            ctypes.c_uint32(slots)))

    def keep(self, source: Buffer, slots: Buffer, nbytes: int, stride: int) -> None:
        """Copy ``nbytes`` of ``source`` into slot j of ``slots`` (at ``j * stride`` bytes, a
        multiple of 4) when the last decision kept the repetition."""
        words = -(-nbytes // 4)
        self._keep.launch(self._grid(words), self.stream, (
            ctypes.c_uint64(source.address), ctypes.c_uint64(slots.address),
            ctypes.c_uint64(words), ctypes.c_uint64(stride // 4),
            ctypes.c_uint64(self.state.address)))

    def read_state(self) -> np.ndarray:
        words = self.state.download(np.uint64, (SLOT_BASE + 64,), self.stream)
        return words

    def set_content(self, content: int) -> None:
        self.state.upload_at(np.array([content], dtype=np.uint64), 0, self.stream)
