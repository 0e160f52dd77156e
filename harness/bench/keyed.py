"""A keyed pseudo-random function no launch can predict: Philox4x32-10 (Salmon et al., SC'11,
"Parallel random numbers: as easy as 1, 2, 3"), in numpy here and in C++ for the device
(:data:`SOURCE`, the same text built for the host by the tests), bit for bit alike.

Every input a verdict reads (the battery's, the deep and wide checks', the timed size's
check, every timed repetition) is drawn from it, under a **run secret** of 128 bits from
``os.urandom`` (:class:`Secret`), never written to a report, a log or device memory: the
device kernels that draw take it as launch arguments. A content (one operand of one launch)
gets its own 64-bit Philox key, derived from the secret and the content's name (a stream, a
64-bit content number, a part): :func:`content_key`. Elements are the Philox words of that
key at their index. So

- nothing a kernel sees gives it the key: a content's values are Philox outputs under a key
  it never reads; recovering a 64-bit Philox key from its outputs has no known attack;
- the values of one content say nothing of the next: each content's key is itself a Philox
  output under the secret, keys of neighbouring contents are unrelated, and the content
  number (a counter on the device) enters only through the secret's PRF.

The API other modules use (and issue 58's primer decoys): :func:`content_key` (host) /
``keyed_content_key`` (device) to name a content, :func:`words` / :func:`run` /
``keyed_word`` for its raw 32-bit words at element indices, and ``contents.draw`` /
``keyed_fill`` (the device kernel, capture.FreshKernels.fill) for its values in the one
value family every launch shares.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
ROUNDS = 10
MASK = 0xFFFFFFFF
SECRET_ENV = "HARNESS_INPUT_SECRET"
"""32 hex digits: the run secret to use instead of a fresh one (replaying a run's exact
values while debugging a kernel; a run with it set says so, since its inputs are then known
to whoever set it)."""

SOURCE = r"""
// Philox4x32-10 (Random123's philox4x32_R with R = 10): counter c[4], key k[2]
__host__ __device__ inline void philox4x32_10(const u32* c, u32 k0, u32 k1, u32* out) {
    u32 x0 = c[0], x1 = c[1], x2 = c[2], x3 = c[3];
    for (int r = 0; r < 10; ++r) {
        if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
        const u64 p0 = (u64)0xD2511F53u * x0, p1 = (u64)0xCD9E8D57u * x2;
        const u32 y0 = (u32)(p1 >> 32) ^ x1 ^ k0, y2 = (u32)(p0 >> 32) ^ x3 ^ k1;
        x0 = y0; x1 = (u32)p1; x2 = y2; x3 = (u32)p0;
    }
    out[0] = x0; out[1] = x1; out[2] = x2; out[3] = x3;
}
// a content's 64-bit key from the run secret s[4] and its name (stream, content, part)
__host__ __device__ inline u64 keyed_content_key(u32 s0, u32 s1, u32 s2, u32 s3, u32 stream,
                                                 u64 content, u32 part) {
    const u32 c[4] = {(u32)content, (u32)(content >> 32), stream ^ s2, part ^ s3};
    u32 o[4];
    philox4x32_10(c, s0, s1, o);
    return ((u64)o[1] << 32) | o[0];
}
// word ``index`` of a content: word index % 4 of the Philox block at counter index / 4
__host__ __device__ inline u32 keyed_word(u64 key, u64 index) {
    const u32 c[4] = {(u32)(index >> 2), (u32)(index >> 34), 0u, 0u};
    u32 o[4];
    philox4x32_10(c, (u32)key, (u32)(key >> 32), o);
    return o[index & 3u];
}
"""


def philox(counter: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Philox4x32-10 of ``counter`` (n x 4 uint32) under ``key`` (two words): n x 4 uint32."""
    c = np.asarray(counter, dtype=np.uint32).reshape(-1, 4)
    x0, x1, x2, x3 = (np.ascontiguousarray(c[:, i]) for i in range(4))
    k0, k1 = int(key[0]) & MASK, int(key[1]) & MASK
    m0, m1, shift = np.uint64(M0), np.uint64(M1), np.uint64(32)
    for r in range(ROUNDS):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0 = x0.astype(np.uint64)
        p0 *= m0
        p1 = x2.astype(np.uint64)
        p1 *= m1
        y0 = (p1 >> shift).astype(np.uint32)
        y0 ^= x1
        y0 ^= np.uint32(k0)
        y2 = (p0 >> shift).astype(np.uint32)
        y2 ^= x3
        y2 ^= np.uint32(k1)
        x0, x1, x2, x3 = y0, p1.astype(np.uint32), y2, p0.astype(np.uint32)
    return np.stack([x0, x1, x2, x3], axis=1)


@dataclass(frozen=True)
class Secret:
    """A run's secret: four 32-bit words (128 bits). Never written anywhere: the host draws
    with it, the device kernels get it as launch arguments (kernel parameters, which no other
    launch can address)."""

    words: tuple[int, int, int, int]
    replayed: bool = False
    """Taken from :data:`SECRET_ENV` rather than drawn: the inputs are known to whoever set
    it."""

    @classmethod
    def fresh(cls) -> Secret:
        raw = os.urandom(16)
        return cls(tuple(int.from_bytes(raw[i:i + 4], "little") for i in range(0, 16, 4)))

    @classmethod
    def from_hex(cls, text: str) -> Secret:
        text = text.strip().lower().removeprefix("0x")
        if len(text) != 32 or any(ch not in "0123456789abcdef" for ch in text):
            from harness.errors import HarnessError

            raise HarnessError(f"{SECRET_ENV} holds {len(text)} characters {text[:8]!r}...: "
                               "expected 32 hex digits (128 bits); unset it to draw a fresh "
                               "secret")
        raw = bytes.fromhex(text)
        return cls(tuple(int.from_bytes(raw[i:i + 4], "little") for i in range(0, 16, 4)),
                   replayed=True)

    def __repr__(self) -> str:  # never the words: a log or a traceback must not carry them
        return f"Secret(sha256:{self.digest()}{', replayed' if self.replayed else ''})"

    def digest(self) -> str:
        """The first 16 hex digits of the secret's SHA-256: tells two secrets apart and gives
        nothing of the secret (for a log line of a replayed run)."""
        raw = b"".join(w.to_bytes(4, "little") for w in self.words)
        return hashlib.sha256(raw).hexdigest()[:16]


_RUN: list[Secret] = []


def run_secret() -> Secret:
    """This process's run secret: drawn from ``os.urandom`` the first time it is asked for
    (or taken from :data:`SECRET_ENV`), then the same for every draw of the process, host and
    device alike."""
    if not _RUN:
        text = os.environ.get(SECRET_ENV)
        _RUN.append(Secret.from_hex(text) if text else Secret.fresh())
    return _RUN[0]


def content_key(secret: Secret, stream: int, content: int, part: int) -> int:
    """The 64-bit key of one content (the device's ``keyed_content_key``): Philox under the
    secret's first two words of (content, stream, part), the last two whitened by the
    secret's other two words."""
    s0, s1, s2, s3 = secret.words
    counter = np.array([[content & MASK, (content >> 32) & MASK, (stream & MASK) ^ s2,
                         (part & MASK) ^ s3]], dtype=np.uint32)
    o = philox(counter, (s0, s1))[0]
    return (int(o[1]) << 32) | int(o[0])


def words(key: int, index: np.ndarray) -> np.ndarray:
    """The content's 32-bit words at element indices ``index`` (the device's ``keyed_word``),
    in ``index``'s shape."""
    index = np.asarray(index, dtype=np.uint64)
    flat = index.reshape(-1)
    if flat.size and _consecutive(flat):  # a whole buffer: its blocks once each, in order
        return run(key, int(flat[0]), flat.size).reshape(index.shape)
    unique, where = np.unique(flat >> np.uint64(2), return_inverse=True)
    out = philox(_counters(unique), (key, key >> 32))
    return out[where.reshape(-1), (flat & np.uint64(3)).astype(np.int64)].reshape(index.shape)


RUN_CHUNK = 1 << 20
"""Blocks per piece of a long run of words, computed on threads side by side (numpy lets go
of the GIL): an 8192 x 8192 operand is 16M blocks."""


def run(key: int, first: int, count: int) -> np.ndarray:
    """The content's words ``first .. first + count`` (a whole buffer's draw), long runs in
    pieces side by side."""
    lo, hi = first >> 2, (first + count - 1) >> 2
    pieces = [(b, min(b + RUN_CHUNK, hi + 1)) for b in range(lo, hi + 1, RUN_CHUNK)]

    def piece(span: tuple[int, int]) -> np.ndarray:
        blocks = np.arange(span[0], span[1], dtype=np.uint64)
        return philox(_counters(blocks), (key, key >> 32)).reshape(-1)

    if len(pieces) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(len(pieces), os.cpu_count() or 1)) as pool:
            out = np.concatenate(list(pool.map(piece, pieces)))
    else:
        out = piece(pieces[0])
    return out[first & 3: (first & 3) + count]


def _counters(blocks: np.ndarray) -> np.ndarray:
    counter = np.zeros((blocks.size, 4), dtype=np.uint32)
    counter[:, 0] = blocks.astype(np.uint32)
    counter[:, 1] = (blocks >> np.uint64(32)).astype(np.uint32)
    return counter


def _consecutive(flat: np.ndarray) -> bool:
    return int(flat[-1]) - int(flat[0]) == flat.size - 1 and bool(
        (np.diff(flat.astype(np.int64)) == 1).all())
