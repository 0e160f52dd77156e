"""Operand contents no kernel can predict: A and B drawn afresh on the device before every timed
repetition, and the same values drawn here, element by element, for the checks (pure numpy).

A content is named by ``(secret, salt, content, operand)``: the run secret (keyed.py: 128
bits from os.urandom, never written down), a salt per timed launch (:data:`HOST_STREAM` for a
check's draw on the host, whose content is then the check's seed), a counter the device
advances before every repetition, and the operand (A or B); its 64-bit Philox key
(:func:`content_key`) is unrelated to its neighbours'. Element ``i`` of the operand's storage
is the content's Philox word ``i`` turned into a float in [-1, 1) on a grid of 2^-23 (exact in
FP32), then rounded to the kernel's input precision (TF32, BF16 round to nearest even as
:mod:`numerics` does; FP16 as numpy does); one TF32 element in 64 is then scaled by 2^17, past
FP16's range, so that a TF32 kernel cannot compute in FP16 wherever its inputs look small.
:data:`SOURCE` holds the device side (capture.py compiles it); :func:`elements` here gives the
same bits, and tests compare the two through a host build of the same C++ functions.
"""

from __future__ import annotations

import numpy as np

from harness.bench import keyed
from harness.bench.seeds import MASK, derive, mix32, new_seed  # noqa: F401 (used here and by

# the kind's modules as contents.*: their home before seeds.py)
from harness.bench.seeds import mix as _mix  # noqa: F401
from harness.kinds.gemm import numerics

KIND = {"fp32": 0, "tf32": 1, "bf16": 2, "fp16": 3, "e4m3": 4, "e5m2": 5}
"""The element kinds the device generator knows (its ``kind`` argument)."""
FP8_SPREAD = {"e4m3": 3, "e5m2": 6}
"""FP8 draws: exponents uniform in [-spread, spread], any mantissa, either sign (normal
values only: e4m3's NaN and e5m2's infinities are never drawn; the formats of
kinds/gemm/fp8/formats.py)."""
OPERAND = {"A": 0, "B": 1}
MAX_SLOTS = 32
"""Captured timed outputs a launch may keep (capture.py)."""
STATE_CONTENT, STATE_TIMED, STATE_TARGET = 0, 1, 2
STATE_SLOT_CONTENT = 3
STATE_SLOT_REP = STATE_SLOT_CONTENT + MAX_SLOTS
STATE_WORDS = STATE_SLOT_REP + MAX_SLOTS
"""The 64-bit words of a launch's device state: the content now in the operands, the timed
repetitions seen, this repetition's slot (-1: not kept), and each slot's content and
repetition."""

_FUNCTIONS = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;

__host__ __device__ inline u32 mix32(u32 x) {
    x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
    return x;
}
@KEYED@__host__ __device__ inline u32 value_bits(u64 key, u32 index) {
    // a float in [-1, 1) on a grid of 2^-23: u * 2^-23 - 1 is exact in FP32
    return as_bits((float)(keyed_word(key, index) >> 8) * 1.1920928955078125e-07f - 1.0f);
}
__host__ __device__ inline u32 round_fp16(u32 x) {
    // FP32 bits to FP16 bits, round to nearest even (values here are finite and below 1)
    const u32 sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
    if (mag >= 0x47800000u) return sign | 0x7c00u;
    const u32 e = mag >> 23;
    if (e < 113u) {  // below 2^-14: an FP16 subnormal in units of 2^-24
        const u32 shift = 126u - e;
        if (shift > 31u) return sign;
        const u32 mant = (mag & 0x7fffffu) | 0x800000u;
        u32 q = mant >> shift;
        const u32 rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rest > half || (rest == half && (q & 1u))) ++q;
        return sign | q;
    }
    u32 q = ((e - 112u) << 10) | ((mag & 0x7fffffu) >> 13);
    const u32 rest = mag & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (q & 1u))) ++q;
    return sign | q;
}
__host__ __device__ inline u32 fp8_bits(u32 h, u32 kind) {
    // an FP8 code: exponent uniform in [-S, S] (S = 3 for e4m3, 6 for e5m2), any mantissa,
    // the sign from the top bit
    const u32 spread = kind == 4u ? 3u : 6u, bias = kind == 4u ? 7u : 15u;
    const u32 mbits = kind == 4u ? 3u : 2u;
    const u32 e = (h >> 8) % (2u * spread + 1u) + bias - spread;
    return ((h >> 31) << 7) | (e << mbits) | (h & ((1u << mbits) - 1u));
}
__host__ __device__ inline u32 stored_bits(u64 key, u32 index, u32 kind) {
    if (kind >= 4u) return fp8_bits(keyed_word(key, index), kind);             // e4m3, e5m2
    const u32 b = value_bits(key, index);
    if (kind == 1u) {  // TF32; one element in 64 times 2^17, past FP16's range
        const u32 t = (b + ((b >> 13) & 1u) + 0xfffu) & 0xffffe000u;
        return (keyed_word(key, index) & 63u) == 0u && (t & 0x7fffffffu) ? t + (17u << 23) : t;
    }
    if (kind == 2u) return (b + ((b >> 16) & 1u) + 0x7fffu) >> 16;          // BF16
    if (kind == 3u) return round_fp16(b);                                   // FP16
    return b;
}
"""

FUNCTIONS = _FUNCTIONS.replace("@KEYED@", keyed.SOURCE)
"""The element functions, the device's and the host build's: keyed.py's Philox, which every
input of a GEMM and of a buffers kernel (memory/draw.py) comes from, and a 32-bit mix for
what needs no secret (the reservoir's pick from its keyed secret, a seed's own mixing)."""

KERNELS = r"""
#define MAX_SLOTS @MAX_SLOTS@
#define STATE_CONTENT @STATE_CONTENT@
#define STATE_TIMED @STATE_TIMED@
#define STATE_TARGET @STATE_TARGET@
#define STATE_SLOT_CONTENT @STATE_SLOT_CONTENT@
#define STATE_SLOT_REP @STATE_SLOT_REP@
struct alignas(16) quad { u32 x, y, z, w; };

// before every repetition: the next content
extern "C" __global__ void fresh_tick(u64* state) { state[STATE_CONTENT] += 1ull; }

// draw the operand of the current content into ``dst`` (verify = 0); or, after a timed
// repetition that is kept (verify = 1), count the elements of ``dst`` that no longer hold it
extern "C" __global__ void fresh_draw(void* dst, u32 count, u32 kind, u32 s0, u32 s1, u32 s2,
                                      u32 s3, u32 salt, u32 operand, const u64* state,
                                      u32 verify, u32* mismatches) {
    if (verify && (long long)state[STATE_TARGET] < 0) return;
    const u64 key = keyed_content_key(s0, s1, s2, s3, salt, state[STATE_CONTENT], operand);
    u32 bad = 0;
    const u32 step = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        const u32 v = stored_bits(key, i, kind);
        if (kind < 2u) {
            u32* p = (u32*)dst;
            if (verify) bad += p[i] != v; else p[i] = v;
        } else if (kind >= 4u) {
            unsigned char* p = (unsigned char*)dst;
            if (verify) bad += p[i] != (unsigned char)v; else p[i] = (unsigned char)v;
        } else {
            u16* p = (u16*)dst;
            if (verify) bad += p[i] != (u16)v; else p[i] = (u16)v;
        }
    }
    if (bad) atomicAdd(mismatches, bad);
}

// the values of the content whose key is ``key`` into ``dst`` (``count`` elements of ``kind``):
// the device side of contents.draw, for launches the harness makes outside a timing
extern "C" __global__ void keyed_fill(void* dst, u32 count, u32 kind, u64 key) {
    const u32 step = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
        const u32 v = stored_bits(key, i, kind);
        if (kind < 2u) ((u32*)dst)[i] = v;
        else if (kind >= 4u) ((unsigned char*)dst)[i] = (unsigned char)v;
        else ((u16*)dst)[i] = (u16)v;
    }
}

// after every timed repetition (one thread): reservoir sampling over the timed repetitions,
// so every one is equally likely to be kept however many the timing takes
extern "C" __global__ void fresh_decide(u64* state, u32 slots, u32 secret) {
    const u64 t = state[STATE_TIMED];
    state[STATE_TIMED] = t + 1ull;
    long long slot = -1;
    if (t < slots) {
        slot = (long long)t;
    } else {
        const u64 pick = (u64)mix32(mix32((u32)t ^ secret) ^ (u32)(t >> 32)) % (t + 1ull);
        if (pick < slots) slot = (long long)pick;
    }
    state[STATE_TARGET] = (u64)slot;
    if (slot >= 0) {
        state[STATE_SLOT_CONTENT + slot] = state[STATE_CONTENT];
        state[STATE_SLOT_REP + slot] = t;
    }
}

// after every timed repetition: the output (and its guard) into the slot chosen, if any
extern "C" __global__ void fresh_capture(const unsigned char* src, u64 nbytes,
                                         unsigned char* slots, u64 stride, const u64* state) {
    const long long slot = (long long)state[STATE_TARGET];
    if (slot < 0) return;
    unsigned char* dst = slots + (u64)slot * stride;
    const u64 step = (u64)gridDim.x * blockDim.x, first = blockIdx.x * blockDim.x + threadIdx.x;
    const u64 quads = nbytes / 16u;
    for (u64 i = first; i < quads; i += step) ((quad*)dst)[i] = ((const quad*)src)[i];
    for (u64 i = quads * 8u + first; i < nbytes / 2u; i += step)
        ((u16*)dst)[i] = ((const u16*)src)[i];
}

// the sampled block of each kept output: block b takes slot index[b][0], its lines
// index[b][2..2+lines) (rows of a row-major C, columns of a column-major one) and, in each,
// the elements at index[b][2+lines..2+lines+across); into ``out``, block by block, line by line
extern "C" __global__ void fresh_gather(const unsigned char* kept, u64 stride, const u32* index,
                                        u32 blocks, u32 lines, u32 across, u64 line_len,
                                        u32 word_bytes, unsigned char* out) {
    const u64 per = (u64)lines * across, words = 2u + lines + across;
    const u64 step = (u64)gridDim.x * blockDim.x;
    for (u64 i = blockIdx.x * blockDim.x + threadIdx.x; i < blocks * per; i += step) {
        const u32* ix = index + (i / per) * words;
        const u64 r = (i % per) / across, c = i % across;
        const unsigned char* at = kept + (u64)ix[0] * stride
                                  + ((u64)ix[2 + r] * line_len + ix[2 + lines + c]) * word_bytes;
        if (word_bytes == 4u) ((u32*)out)[i] = *(const u32*)at;
        else ((u16*)out)[i] = *(const u16*)at;
    }
}

// counts[0]: elements of the output still holding the sentinel; counts[1]: non-finite ones;
// counts[2]: guard elements after it that no longer hold the sentinel
extern "C" __global__ void fresh_scan(const void* base, u32 elements, u32 guard, u32 word_bytes,
                                      u32 sentinel, u32 exponent_mask, u32* counts) {
    u32 same = 0, nonfinite = 0, moved = 0;
    const u32 step = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < elements + guard; i += step) {
        const u32 bits = word_bytes == 4u ? ((const u32*)base)[i] : ((const u16*)base)[i];
        if (i < elements) {
            same += bits == sentinel;
            nonfinite += (bits & exponent_mask) == exponent_mask;
        } else {
            moved += bits != sentinel;
        }
    }
    if (same) atomicAdd(counts, same);
    if (nonfinite) atomicAdd(counts + 1, nonfinite);
    if (moved) atomicAdd(counts + 2, moved);
}
"""

DEVICE_BITS = r"""
__host__ __device__ inline unsigned int as_bits(float f) { return __float_as_uint(f); }
"""

SOURCE = (DEVICE_BITS + FUNCTIONS + KERNELS).replace(
    "@MAX_SLOTS@", str(MAX_SLOTS))
for _name, _value in (("STATE_CONTENT", STATE_CONTENT), ("STATE_TIMED", STATE_TIMED),
                      ("STATE_TARGET", STATE_TARGET), ("STATE_SLOT_CONTENT", STATE_SLOT_CONTENT),
                      ("STATE_SLOT_REP", STATE_SLOT_REP)):
    SOURCE = SOURCE.replace(f"@{_name}@", str(_value))
"""The device generator, capture and scan kernels (CUDA C++ for NVRTC)."""

HOST_SOURCE = ("#include <cstring>\n#define __host__\n#define __device__\n"
               "inline unsigned int as_bits(float f) { unsigned int u; "
               "std::memcpy(&u, &f, 4); return u; }\n" + FUNCTIONS)
"""The same element functions for a host C++ compiler (the tests' cross-check)."""

EXPONENT_MASK = {"fp32": 0x7F800000, "bf16": 0x7F80, "fp16": 0x7C00}
"""Bits that are all set in a non-finite value of each output type."""


def content_key(secret: keyed.Secret, salt: int, content: int, operand: str | int) -> int:
    """The 64-bit key of one operand's content (the device's ``keyed_content_key``): salt
    names the timing (or :data:`HOST_STREAM` a check's draw), content the draw in it."""
    part = OPERAND[operand] if isinstance(operand, str) else operand
    return keyed.content_key(secret, salt, content, part)


def _grid(h: np.ndarray) -> np.ndarray:
    """FP32 bits of the family's values for words ``h``: [-1, 1) on a grid of 2^-23."""
    values = ((h >> np.uint32(8)).astype(np.float64) * 2.0**-23 - 1.0).astype(np.float32)
    return values.view(np.uint32)


def value_bits(key: int, index: np.ndarray) -> np.ndarray:
    """FP32 bits of the values at storage indices ``index`` (before rounding to the
    precision)."""
    return _grid(keyed.words(key, index))


def stored_bits(key: int, index: np.ndarray, precision: str) -> np.ndarray:
    """The operand's storage at ``index`` for ``precision``: uint32 words for FP32/TF32,
    uint16 for BF16/FP16 (the device's ``stored_bits``). TF32 operands have one element in 64
    times 2^17: a TF32 kernel that computes in FP16 where it sees values within [-1, 1) meets
    values FP16 cannot hold in every timed repetition."""
    return stored_of_words(keyed.words(key, index), precision)


def stored_of_words(h: np.ndarray, precision: str) -> np.ndarray:
    """:func:`stored_bits` from the content's words ``h``: the one value family."""
    if precision in FP8_SPREAD:
        return fp8_bits(h, precision)
    bits = _grid(h)
    if precision == "fp16":
        return bits.view(np.float32).astype(np.float16).view(np.uint16)
    stored = numerics.stored(bits.view(np.float32), precision).view(
        np.uint16 if precision == "bf16" else np.uint32)
    if precision == "tf32":
        wide = ((h & np.uint32(63)) == 0) & ((stored & np.uint32(0x7FFFFFFF)) != 0)
        stored = np.where(wide, stored + np.uint32(17 << 23), stored).astype(np.uint32)
    return stored


def fp8_bits(h: np.ndarray, precision: str) -> np.ndarray:
    """The device's ``fp8_bits``: FP8 codes (uint8) from element hashes."""
    h = np.asarray(h, dtype=np.uint32)
    spread, bias, mbits = FP8_SPREAD[precision], {"e4m3": 7, "e5m2": 15}[precision], \
        {"e4m3": 3, "e5m2": 2}[precision]
    e = (h >> np.uint32(8)) % np.uint32(2 * spread + 1) + np.uint32(bias - spread)
    code = ((h >> np.uint32(31)) << np.uint32(7)) | (e << np.uint32(mbits)) | (
        h & np.uint32((1 << mbits) - 1))
    return code.astype(np.uint8)


def elements(key: int, index: np.ndarray, precision: str) -> np.ndarray:
    """The exact float64 values at storage indices ``index``."""
    if precision in FP8_SPREAD:
        from harness.kinds.gemm.fp8.formats import FORMATS

        return FORMATS[precision].decode(stored_bits(key, index, precision))
    raw = stored_bits(key, index, precision)
    stored = raw.view({"fp32": np.float32, "tf32": np.float32, "fp16": np.float16,
                       "bf16": np.uint16}[precision])
    return numerics.to_float64(stored, precision)


def a_rows(secret: keyed.Secret, salt: int, content: int, precision: str, layout: str, m: int,
           k: int, rows: np.ndarray) -> np.ndarray:
    """Rows ``rows`` of the logical M x K A drawn for ``content``, as float64."""
    key = content_key(secret, salt, content, "A")
    r = np.asarray(rows, dtype=np.int64)[:, None]
    c = np.arange(k, dtype=np.int64)[None, :]
    index = r * k + c if layout == "row" else c * m + r
    return elements(key, index.astype(np.uint32), precision)


def b_cols(secret: keyed.Secret, salt: int, content: int, precision: str, layout: str, k: int,
           n: int, cols: np.ndarray) -> np.ndarray:
    """Columns ``cols`` of the logical K x N B drawn for ``content`` (K x len(cols)), as
    float64."""
    key = content_key(secret, salt, content, "B")
    r = np.arange(k, dtype=np.int64)[:, None]
    c = np.asarray(cols, dtype=np.int64)[None, :]
    index = r * n + c if layout == "row" else c * k + r
    return elements(key, index.astype(np.uint32), precision)


HOST_STREAM = 0xFFFFFFFF
"""The salt of every draw made on the host for a check (timings' salts are below 2^31)."""
PART = {"A": 0, "B": 1, "C": 2}
WIDE_PART = 16
"""Added to an operand's part: the words that pick a wide draw's exponents."""


def draw(key: int, shape: tuple[int, ...], kind: str) -> np.ndarray:
    """The storage codes of the content whose key is ``key`` (:func:`content_key`), elements
    in storage order: what the device's ``keyed_fill`` writes (uint32 words for FP32/TF32,
    uint16 for BF16/FP16, uint8 for FP8)."""
    return stored_of_words(keyed.run(key, 0, int(np.prod(shape))), kind).reshape(shape)


def check_operand(seed: int, which: str, shape: tuple[int, int], precision: str,
                  kind: str = "uniform", secret: keyed.Secret | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """A check's operand ``which`` (A, B or C's start values) drawn from the run secret and
    the check's seed, in the one family the timed repetitions' inputs come from, in the form
    numerics.random_operand gives (storage array, exact float64). ``kind = "wide"``: the same
    values times 2^e, e uniform in [-E, E] (numerics.WIDE_EXPONENT), TF32 left unrounded."""
    secret = secret or keyed.run_secret()
    key = content_key(secret, HOST_STREAM, seed, PART[which])
    if kind == "wide":
        spread = numerics.WIDE_EXPONENT[precision]
        base = draw(key, shape, "fp32").view(np.float32).astype(np.float64)
        other = content_key(secret, HOST_STREAM, seed, PART[which] + WIDE_PART)
        e = (draw(other, shape, "fp32") % np.uint32(2 * spread + 1)).astype(np.int64) - spread
        values = np.ldexp(base, e)
        if precision == "tf32":
            store = values.astype(np.float32)
            return store, store.astype(np.float64)
        store = numerics.stored(values, precision)
        return store, numerics.to_float64(store, precision)
    if kind != "uniform":
        from harness.errors import HarnessError

        raise HarnessError(f"operands are drawn {' or '.join(numerics.DRAWS)}, not {kind!r}")
    raw = draw(key, shape, precision)
    store = raw.view({"fp32": np.float32, "tf32": np.float32, "fp16": np.float16}.get(
        precision, raw.dtype))
    return store, numerics.to_float64(store, precision)
