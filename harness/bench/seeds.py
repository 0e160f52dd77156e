"""A run's seed and what every input is drawn from: the hash the device's draws share
(``mix32``, as the kernels in kinds/gemm/contents.py compute it), a new
seed, and seeds derived from it (pure numpy).

Kind-neutral: every kind draws its inputs from :func:`derive` of the run's seed, so one
recorded seed replays a run.
"""

from __future__ import annotations

import secrets

import numpy as np

MASK = 0xFFFFFFFF


def mix32(x: np.ndarray) -> np.ndarray:
    """The device's ``mix32`` over a uint32 array (wrapping arithmetic)."""
    x = np.asarray(x, dtype=np.uint32).copy()
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def mix(x: int) -> int:
    return int(mix32(np.array([x & MASK], dtype=np.uint32))[0])


def new_seed() -> int:
    """A run's seed, drawn from the operating system (31 bits, so it reads as a plain
    number)."""
    return secrets.randbits(31)


def derive(seed: int, *parts: int | str) -> int:
    """A 31-bit seed from the run's seed and ``parts`` (sizes, names): what every input of a
    run is drawn from, so one recorded seed replays the run."""
    h = mix(seed ^ 0x2545F491)
    for part in parts:
        if isinstance(part, str):
            for byte in part.encode():
                h = mix(h ^ byte)
        else:
            h = mix(h ^ (int(part) & MASK))
            h = mix(h ^ ((int(part) >> 32) & MASK))
    return h & 0x7FFFFFFF
