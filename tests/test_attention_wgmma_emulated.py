"""attention_03_wgmma's addresses, descriptors, fragments, masks and pipeline run on the host:
its TMA boxes written into shared memory with the 128-byte swizzle, its wgmma operands read
back through the descriptors it builds, its accumulators and register fragments mapped to
rows and columns, its softmax, its deferred rescale and its stores, transliterated from the
.cu file onto this file's model of the PTX ISA (below), then judged by the kind's verdict.

The model, as the GEMM rungs that pass on the H100 use it (ptx/hgemm/wgmma_gemm.ptxh): the
128-byte swizzle XORs address bits 4-6 with bits 7-9 (1024-byte aligned tiles); a K-major
operand's element (row r, k) of a k16 step is at start + (r / 8) SBO + (r % 8) 128 + 2 k; an
N-major one's (k, n) at start + (n / 64) LBO + (k / 8) SBO + (k % 8) 128 + 2 (n % 64); the
m64nN accumulator gives warp w, lane 4 g + t, register 4 nb + 2 half + e the element
(16 w + g + 8 half, 8 nb + 2 t + e); the A fragment from registers is mma.m16n8k16's A per warp.
Without a GPU this is what can fail when an offset, a panel or a fragment is wrong; the GPU
test runs the kernel itself (tests/test_attention_gpu.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_attention_online_emulated import bf16

from harness.kinds.attention import battery
from harness.kinds.attention.numerics import Arithmetic, judge, reference

BLOCK_M, Q_PANEL = 128, 8192
W, LANE = np.meshgrid(np.arange(4), np.arange(32), indexing="ij")  # [warp, lane]
G, T = LANE // 4, LANE % 4


def swizzle(addr):
    return addr ^ (((addr >> 7) & 7) << 4)


def descriptor(addr, lbo, sbo):  # as the kernel's descriptor(): fields in 16-byte units
    return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (1 << 62)


def fields(desc):
    return (desc & 0x3FFF) << 4, ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4


class Smem:
    """Shared memory as BF16 values at byte addresses (2 bytes each)."""

    def __init__(self, nbytes):
        self.cells = np.zeros(nbytes // 2)

    def tma(self, dst, tensor, c0, c1, c2, box_cols, box_rows):
        """One box of a 3-D map over ``tensor`` [Z][rows][cols]: zeros outside it."""
        r, c = np.meshgrid(np.arange(box_rows), np.arange(box_cols), indexing="ij")
        rows, cols = c1 + r, c0 + c
        inside = (rows < tensor.shape[1]) & (cols < tensor.shape[2]) & (c2 < tensor.shape[0])
        values = np.where(inside, tensor[min(c2, tensor.shape[0] - 1),
                                         np.minimum(rows, tensor.shape[1] - 1),
                                         np.minimum(cols, tensor.shape[2] - 1)], 0.0)
        self.cells[swizzle(dst + r * 128 + c * 2) // 2] = values

    def k_major(self, desc, rows):
        start, _, sbo = fields(desc)
        r, k = np.meshgrid(np.arange(rows), np.arange(16), indexing="ij")
        return self.cells[swizzle(start + (r // 8) * sbo + (r % 8) * 128 + 2 * k) // 2]

    def n_major(self, desc, n):
        start, lbo, sbo = fields(desc)
        k, c = np.meshgrid(np.arange(16), np.arange(n), indexing="ij")
        return self.cells[swizzle(start + (c // 64) * lbo + (k // 8) * sbo + (k % 8) * 128
                                  + 2 * (c % 64)) // 2]


def acc_coords(nregs):
    """(row, column) of each accumulator register [warp, lane, i] of an m64nN tile."""
    i = np.arange(nregs)
    nb, half, e = i // 4, (i % 4) // 2, i % 2
    rows = 16 * W[..., None] + G[..., None] + 8 * half
    cols = 8 * nb + 2 * T[..., None] + e
    return rows, cols


def from_matrix(m, nregs):
    rows, cols = acc_coords(nregs)
    return m[rows, cols]


def to_matrix(regs, n):
    rows, cols = acc_coords(regs.shape[-1])
    out = np.zeros((64, n))
    out[rows, cols] = regs
    return out


def a_matrix(frag):
    """The 64 x 16 A operand from registers: frag [warp, lane, 4 registers, 2 halves]."""
    a = np.zeros((64, 16))
    for reg, (dr, dk) in enumerate(((0, 0), (8, 0), (0, 8), (8, 8))):
        for half in range(2):
            a[16 * W + G + dr, 2 * T + dk + half] = frag[:, :, reg, half]
    return a


def block(q, k, v, scale, causal, m0, b, h, heads, kv_heads, d, block_n, pv_panel_lbo=None):
    """Block (m0 / 128, h, b) of attention_03_wgmma (q [B * H][S_q][D], k, v [B * H_kv][S_kv][D]
    as its maps see them): {row: (o, lse)} as its two consumer warpgroups store them."""
    panels, kv_panel = d // 64, block_n * 128
    kv_bytes = panels * kv_panel
    q_bytes = 2 * panels * Q_PANEL
    smem = Smem(q_bytes + 2 * 2 * kv_bytes)
    sq, sk, sv = 0, q_bytes, q_bytes + 2 * kv_bytes
    s_q, s_kv = q.shape[1], k.shape[1]
    hk = h // (heads // kv_heads)
    shift = s_kv - s_q
    n_end = max(0, min(s_kv, m0 + BLOCK_M + shift)) if causal else s_kv
    tiles = -(-n_end // block_n)
    for w in range(2):  # the producer: Q once, then each tile into its stage
        for p in range(panels):
            smem.tma(sq + (w * panels + p) * Q_PANEL, q, p * 64, m0 + 64 * w, b * heads + h,
                     64, 64)

    def load(j):
        s = j % 2
        for p in range(panels):
            z = b * kv_heads + hk
            smem.tma(sk + s * kv_bytes + p * kv_panel, k, p * 64, j * block_n, z, 64, block_n)
            smem.tma(sv + s * kv_bytes + p * kv_panel, v, p * 64, j * block_n, z, 64, block_n)

    scale_log2 = np.float32(scale * 1.4426950408889634)
    lbo = kv_panel if pv_panel_lbo is None else pv_panel_lbo
    out = {}

    def warpgroup(cw):  # one consumer warpgroup: 64 rows
        wg_row0 = m0 + 64 * cw
        rows = [wg_row0 + 16 * W + G, wg_row0 + 16 * W + G + 8]
        q_tile = sq + cw * panels * Q_PANEL
        unmasked_end = min(s_kv, wg_row0 + shift + 1) if causal else s_kv
        o_acc = np.zeros((4, 32, d // 2))
        m_run = [np.full((4, 32), -np.inf), np.full((4, 32), -np.inf)]
        l_run = [np.zeros((4, 32)), np.zeros((4, 32))]

        def qk(stage):
            s = np.zeros((64, block_n))
            for ks in range(d // 16):
                step, within = ks // 4, (ks % 4) * 32
                a = smem.k_major(descriptor(q_tile + step * Q_PANEL + within, 16, 1024), 64)
                b = smem.k_major(descriptor(sk + stage * kv_bytes + step * kv_panel + within,
                                            16, 1024), block_n)
                s += a @ b.T
            return from_matrix(s, block_n // 2)

        def pv(o, p_frag, stage):
            m = to_matrix(o, d)
            for kk in range(block_n // 16):
                b = smem.n_major(descriptor(sv + stage * kv_bytes + kk * 2048, lbo, 1024), d)
                m += a_matrix(p_frag[:, :, kk]) @ b
            return from_matrix(m, d // 2)

        def softmax(s, n0, mask):
            alpha = []
            for half in range(2):
                idx = [4 * nb + 2 * half + e for nb in range(block_n // 8) for e in range(2)]
                x = s[:, :, idx]
                if mask:
                    key = n0 + np.array([nb * 8 + e for nb in range(block_n // 8)
                                         for e in range(2)])[None, None, :] + 2 * T[..., None]
                    late = key > rows[half][..., None] + shift
                    masked = (key >= s_kv) | (bool(causal) & late)
                    x = np.where(masked, -np.inf, x)
                mx = x.max(axis=2)
                mx = np.maximum(mx, mx[:, LANE[0] ^ 1])
                mx = np.maximum(mx, mx[:, LANE[0] ^ 2])
                m_new = np.maximum(m_run[half], mx)
                sub = np.where(m_new == -np.inf, 0.0, m_new * scale_log2)
                alpha.append(np.exp2(m_run[half] * scale_log2 - sub))
                m_run[half] = m_new
                x = np.exp2(x * scale_log2 - sub[..., None])
                s[:, :, idx] = x
                l_run[half] = l_run[half] * alpha[half] + x.sum(axis=2)
            return alpha

        def to_p(s):
            p = np.zeros((4, 32, block_n // 16, 4, 2))
            for kk in range(block_n // 16):
                for reg in range(4):
                    p[:, :, kk, reg, 0] = bf16(s[:, :, 8 * kk + 2 * reg])
                    p[:, :, kk, reg, 1] = bf16(s[:, :, 8 * kk + 2 * reg + 1])
            return p

        if tiles > 0:
            load(0)
            s_acc = qk(0)
            softmax(s_acc, 0, block_n > unmasked_end)
            p_frag = to_p(s_acc)
            for j in range(1, tiles):
                load(j)
                s_acc = qk(j % 2)
                o_acc = pv(o_acc, p_frag, (j - 1) % 2)
                alpha = softmax(s_acc, j * block_n, (j + 1) * block_n > unmasked_end)
                for nb in range(d // 8):
                    o_acc[:, :, 4 * nb: 4 * nb + 2] *= alpha[0][..., None]
                    o_acc[:, :, 4 * nb + 2: 4 * nb + 4] *= alpha[1][..., None]
                p_frag = to_p(s_acc)
            o_acc = pv(o_acc, p_frag, (tiles - 1) % 2)
        for half in range(2):
            l_row = l_run[half] + l_run[half][:, LANE[0] ^ 1]
            l_row = l_row + l_row[:, LANE[0] ^ 2]
            for w in range(4):
                for lane in range(32):
                    row = rows[half][w, lane]
                    if row >= s_q:
                        continue
                    inv = 1 / l_row[w, lane] if l_row[w, lane] > 0 else 0.0
                    o_row, lse = out.setdefault(row, (np.full(d, np.nan), [np.nan]))
                    for nb in range(d // 8):
                        for e in range(2):
                            o_row[nb * 8 + 2 * T[w, lane] + e] = bf16(
                                o_acc[w, lane, 4 * nb + 2 * half + e] * inv)
                    lse[0] = (m_run[half][w, lane] * scale + math.log(l_row[w, lane])
                              if l_row[w, lane] > 0 else -np.inf)

    for cw in range(2):
        warpgroup(cw)
    return out


def _emulated(name, d, block_n, **wrong):
    case = battery.CASES[[c.name for c in battery.CASES].index(name)]
    p = case.problem
    drawn = battery.draw(case, "bf16", np.random.default_rng(9))
    reps = -(-d // drawn.q.shape[-1])  # the battery's head dim may be smaller: tile it to D
    q, k, v = (np.concatenate([x] * reps, axis=-1)[..., :d] for x in (drawn.q, drawn.k, drawn.v))
    nb, heads, kv_heads = p["B"], p["H"], p["H_kv"]
    scale = 1 / math.sqrt(d)
    o = np.full((nb, heads, p["S_q"], d), np.nan)
    lse = np.full((nb, heads, p["S_q"]), np.nan)
    maps = [x.reshape(-1, *x.shape[2:]) for x in (q, k, v)]  # [B * heads][S][D], as the maps
    for b in range(nb):
        for h in range(heads):
            for m0 in range(0, p["S_q"], BLOCK_M):
                got = block(*maps, scale, p.causal, m0, b, h, heads, kv_heads, d, block_n,
                            **wrong)
                for row, (o_row, row_lse) in got.items():
                    o[b, h, row], lse[b, h, row] = o_row, row_lse[0]
    arithmetic = Arithmetic("bf16", "bf16")
    ref = reference(q, k, v, scale, p.causal, arithmetic)
    return judge(o, np.isnan(o), ref, arithmetic, p["S_kv"], lse=lse)


@pytest.mark.parametrize("name, d, block_n", [
    ("ragged", 64, 128), ("causal_s_q_gt_s_kv", 64, 128), ("causal_s_q_lt_s_kv", 128, 128),
    ("causal_square", 128, 128), ("s_q_ne_s_kv", 256, 64), ("grouped_query", 64, 128)])
def test_the_hopper_rungs_addresses_and_fragments_compute_attention(name, d, block_n):
    verdict = _emulated(name, d, block_n)
    assert verdict.ok, str(verdict)


def test_the_emulation_catches_a_wrong_panel_stride():
    # V's descriptor with LBO one 8-row group instead of a panel: columns 64-127 read rows of
    # the first panel, and the verdict must say the output is wrong
    verdict = _emulated("ragged", 128, 128, pv_panel_lbo=1024)
    assert not verdict.ok and verdict.cause in ("wrong output", "unwritten output"), str(verdict)
