"""attention_02_online's index arithmetic run on the host: its shared-memory swizzle, its
ldmatrix addresses, its mma fragments and its masks, transliterated lane by lane from the .cu
file onto the PTX ISA's definitions of ldmatrix (m8n8, .x4, .trans) and mma.m16n8k16, then
judged by the kind's verdict. Without a GPU this is what can fail when an address or a
fragment is wrong; the GPU test runs the kernel itself."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.kinds.attention import battery
from harness.kinds.attention.numerics import Arithmetic, judge, reference
from harness.kinds.attention.reference import exact, stored

LANES = np.arange(32)
GROUP, T = LANES // 4, LANES % 4
BLOCK_M = BLOCK_N = 64


def swz(row, col, d):
    return row * d + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7)


def ldsm_x4(smem, addresses, trans=False):
    """ldmatrix .x4: lanes 8m..8m+7 give matrix m's row addresses; lane l receives from
    each matrix the pair (row l/4, cols 2(l%4), +1), or with .trans (rows 2(l%4), +1, col l/4).
    Returns [4][32][2]."""
    out = np.zeros((4, 32, 2))
    for m in range(4):
        rows = addresses[8 * m: 8 * m + 8]
        for lane in range(32):
            if trans:
                out[m, lane] = [smem[rows[2 * (lane % 4)] + lane // 4],
                                smem[rows[2 * (lane % 4) + 1] + lane // 4]]
            else:
                base = rows[lane // 4] + 2 * (lane % 4)
                out[m, lane] = smem[base: base + 2]
    return out


def mma(c, a, b0, b1):
    """mma.m16n8k16 row.col, FP32 accumulate, from the PTX ISA's fragment layouts: a[4][32][2],
    b0/b1 [32][2], c [4][32] (c0 c1 row g cols 2t, 2t+1; c2 c3 row g + 8)."""
    A, Bm = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for e in range(2):
            A[g, 2 * t + e] = a[0][lane][e]
            A[g + 8, 2 * t + e] = a[1][lane][e]
            A[g, 2 * t + 8 + e] = a[2][lane][e]
            A[g + 8, 2 * t + 8 + e] = a[3][lane][e]
            Bm[2 * t + e, g] = b0[lane][e]
            Bm[2 * t + 8 + e, g] = b1[lane][e]
    D = A @ Bm
    for lane in range(32):
        g, t = lane // 4, lane % 4
        c[0][lane] += D[g, 2 * t]
        c[1][lane] += D[g, 2 * t + 1]
        c[2][lane] += D[g + 8, 2 * t]
        c[3][lane] += D[g + 8, 2 * t + 1]


def bf16(x):
    x = np.asarray(x, dtype=np.float32)
    return exact(stored(x, "bf16"), "bf16").reshape(x.shape)


def online_block(q, k, v, scale, causal, m0, d, v_trans=True):
    """One block of attention_02_online for one (b, h): q [S_q, d], k, v [S_kv, d]; returns
    its rows' outputs {row: (o, lse)} as the kernel would store them."""
    s_q, s_kv = q.shape[0], k.shape[0]
    sq = np.zeros(BLOCK_M * d)
    for r in range(BLOCK_M):
        for c in range(d):
            if m0 + r < s_q:
                sq[swz(r, c, d)] = q[m0 + r, c]
    shift = s_kv - s_q
    n_end = max(0, min(s_kv, m0 + BLOCK_M + shift)) if causal else s_kv
    tiles = -(-n_end // BLOCK_N)
    scale_log2 = np.float32(scale * 1.4426950408889634)
    out = {}
    for warp in range(4):
        acc = np.zeros((d // 8, 4, 32))
        m_run = np.full((2, 32), -np.inf)
        l_run = np.zeros((2, 32))
        row_of = [m0 + warp * 16 + GROUP, m0 + warp * 16 + GROUP + 8]
        for tile in range(tiles):
            n0 = tile * BLOCK_N
            kt, vt = np.zeros(BLOCK_M * d), np.zeros(BLOCK_M * d)
            for r in range(BLOCK_N):
                if n0 + r < s_kv:
                    for c in range(d):
                        kt[swz(r, c, d)] = k[n0 + r, c]
                        vt[swz(r, c, d)] = v[n0 + r, c]
            s = np.zeros((BLOCK_N // 8, 4, 32))
            for kc in range(d // 16):
                a = ldsm_x4(sq, [swz(warp * 16 + ln % 16, kc * 16 + (ln // 16) * 8, d)
                                 for ln in range(32)])
                for nb in range(BLOCK_N // 16):
                    r = ldsm_x4(kt, [swz(nb * 16 + ln % 8 + (ln // 16) * 8,
                                         kc * 16 + ((ln // 8) % 2) * 8, d)
                                     for ln in range(32)])
                    mma(s[2 * nb], a, r[0], r[1])
                    mma(s[2 * nb + 1], a, r[2], r[3])
            alpha = np.zeros((2, 32))
            for half in range(2):
                for nb in range(BLOCK_N // 8):
                    for e in range(2):
                        key = n0 + nb * 8 + 2 * T + e
                        masked = (key >= s_kv) | (causal & (key > row_of[half] + shift))
                        s[nb, 2 * half + e] = np.where(masked, -np.inf, s[nb, 2 * half + e])
                mx = s[:, 2 * half: 2 * half + 2].max(axis=(0, 1))
                mx = np.maximum(mx, mx[LANES ^ 1])
                mx = np.maximum(mx, mx[LANES ^ 2])
                m_new = np.maximum(m_run[half], mx)
                sub = np.where(m_new == -np.inf, 0.0, m_new * scale_log2)
                alpha[half] = np.exp2(m_run[half] * scale_log2 - sub)
                m_run[half] = m_new
                p = np.exp2(s[:, 2 * half: 2 * half + 2] * scale_log2 - sub)
                s[:, 2 * half: 2 * half + 2] = p
                l_run[half] = l_run[half] * alpha[half] + p.sum(axis=(0, 1))
            acc[:, 0:2] *= alpha[0]
            acc[:, 2:4] *= alpha[1]
            for kk in range(BLOCK_N // 16):
                a = np.stack([np.stack([bf16(s[2 * kk][0]), bf16(s[2 * kk][1])], -1),
                              np.stack([bf16(s[2 * kk][2]), bf16(s[2 * kk][3])], -1),
                              np.stack([bf16(s[2 * kk + 1][0]), bf16(s[2 * kk + 1][1])], -1),
                              np.stack([bf16(s[2 * kk + 1][2]), bf16(s[2 * kk + 1][3])], -1)])
                for db in range(d // 16):
                    r = ldsm_x4(vt, [swz(kk * 16 + ln % 8 + ((ln // 8) % 2) * 8,
                                         db * 16 + (ln // 16) * 8, d) for ln in range(32)],
                                trans=v_trans)
                    mma(acc[2 * db], a, r[0], r[1])
                    mma(acc[2 * db + 1], a, r[2], r[3])
        for half in range(2):
            l_sum = l_run[half] + l_run[half][LANES ^ 1]
            l_sum = l_sum + l_sum[LANES ^ 2]
            for lane in range(32):
                row = row_of[half][lane]
                if row >= s_q:
                    continue
                inv = 1 / l_sum[lane] if l_sum[lane] > 0 else 0.0
                o_row, lse = out.setdefault(row, (np.full(d, np.nan), [np.nan]))
                for nb in range(d // 8):
                    for e in range(2):
                        o_row[nb * 8 + 2 * T[lane] + e] = bf16(acc[nb, 2 * half + e, lane] * inv)
                lse[0] = (m_run[half][lane] * scale + math.log(l_sum[lane])
                          if l_sum[lane] > 0 else -np.inf)
    return out


def _emulated(name, v_trans=True):
    case = battery.CASES[[c.name for c in battery.CASES].index(name)]
    p = case.problem
    d = 64
    drawn = battery.draw(case, "bf16", np.random.default_rng(8))
    q, k, v = drawn.q[:1, :1, :, :d], drawn.k[:1, :1, :, :d], drawn.v[:1, :1, :, :d]
    scale = 1 / math.sqrt(d)
    o = np.full((1, 1, p["S_q"], d), np.nan)
    lse = np.full((1, 1, p["S_q"]), np.nan)
    for m0 in range(0, p["S_q"], BLOCK_M):
        for row, (o_row, row_lse) in online_block(q[0, 0], k[0, 0], v[0, 0], scale, p.causal,
                                                  m0, d, v_trans).items():
            o[0, 0, row], lse[0, 0, row] = o_row, row_lse[0]
    arithmetic = Arithmetic("bf16", "bf16")
    ref = reference(q, k, v, scale, p.causal, arithmetic)
    return judge(o, np.isnan(o), ref, arithmetic, p["S_kv"], lse=lse)


@pytest.mark.parametrize("name", ["causal_s_q_lt_s_kv", "causal_s_q_gt_s_kv", "ragged"])
def test_the_online_kernels_fragments_compute_attention(name):
    verdict = _emulated(name)
    assert verdict.ok, str(verdict)


def test_the_emulation_catches_a_wrong_fragment():
    # V read without .trans hands the mma V^T's fragments: the verdict must say so
    verdict = _emulated("ragged", v_trans=False)
    assert not verdict.ok and verdict.cause in ("wrong output", "unwritten output")
