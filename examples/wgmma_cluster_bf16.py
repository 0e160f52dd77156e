"""Host set-up of examples/wgmma_cluster_bf16.cu: its tile schedule, in Hilbert-curve order.

The kernel's clusters (CLUSTER blocks stacked in M) walk units of CLUSTER x 1 tiles of
BM x BN; schedule entry u is a unit, ``unit_row * cdiv(N, BN) + unit_column``, and cluster c
takes entries c, c + clusters, ... At any moment the running clusters hold a run of consecutive
entries: along a Hilbert curve those are a compact patch of C, whose A rows and B columns they
share in L2 (fast.cu's matmul_12 orders its tiles the same way, for the same reason).
"""

import numpy as np


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def hilbert_order(rows: int, cols: int) -> np.ndarray:
    """Every cell of a rows x cols grid once, as ``row * cols + col``, in the order of a
    Hilbert curve over the smallest power-of-two square that covers the grid (cells outside
    the grid are skipped, so a non-square grid's order jumps where the curve leaves it)."""
    if rows <= 0 or cols <= 0:
        return np.zeros(0, np.int32)
    side = 1 << max(0, (max(rows, cols) - 1).bit_length())
    y, x = np.divmod(np.arange(rows * cols, dtype=np.int64), cols)
    d = np.zeros_like(x)
    s = side // 2
    while s > 0:
        rx = (x & s) > 0
        ry = (y & s) > 0
        d += s * s * ((3 * rx.astype(np.int64)) ^ ry.astype(np.int64))
        # rotate the quadrant so that the curve's sub-square is in standard orientation
        flip = ~ry & rx
        x = np.where(flip, side - 1 - x, x)
        y = np.where(flip, side - 1 - y, y)
        swap = ~ry
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        s //= 2
    return np.argsort(d, kind="stable").astype(np.int32)


def setup(launch):
    """The schedule (workspace, int32 unit numbers) and its length (``tiles``)."""
    p = launch.params
    rows = _cdiv(_cdiv(launch.m, p["BM"]), p["CLUSTER"])
    cols = _cdiv(launch.n, p["BN"])
    order = hilbert_order(rows, cols)
    return {"workspace": order, "tiles": int(order.size)}
