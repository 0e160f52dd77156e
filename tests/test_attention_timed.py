"""The timed attention path's host parts (harness/kinds/attention/timed.py): which rows a kept
output is checked at, how they are read from either layout, and the judge on them."""

from __future__ import annotations

import numpy as np
import pytest

from harness.kinds.attention import numerics, timed
from harness.kinds.attention.build import load
from harness.kinds.attention.numerics import Arithmetic, reference
from harness.kinds.attention.problem import read_size
from harness.kinds.attention.reference import to_layout

P = read_size("B=2,H=3,S=40,D=64,causal")


def test_sampled_rows_hold_every_heads_ends_and_no_repeats():
    rows = timed.sampled_rows(P, np.random.default_rng(0), count=10)
    as_set = {tuple(r) for r in rows}
    assert len(as_set) == len(rows)
    for b in range(2):
        for h in range(3):
            assert (b, h, 0) in as_set and (b, h, 39) in as_set
    assert rows[:, 2].max() < 40 and rows[:, 1].max() < 3 and rows[:, 0].max() < 2


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_rows_are_read_from_either_layout(layout):
    logical = np.arange(2 * 3 * 40 * 64, dtype=np.uint16).reshape(2, 3, 40, 64)
    rows = timed.sampled_rows(P, np.random.default_rng(1), count=5)
    got = timed.rows_of(to_layout(logical, layout).ravel(), rows, P, layout)
    assert got.shape == (1, 1, len(rows), 64)
    for r, (b, h, i) in enumerate(rows):
        assert np.array_equal(got[0, 0, r], logical[b, h, i])


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + ((bits >> 16) & 1) + 0x7FFF) >> 16).astype(np.uint16)


def _case():
    rng = np.random.default_rng(4)
    q, k, v = (rng.uniform(-1, 1, (2, 3, 40, 64)) for _ in range(3))
    q, k, v = ((_bf16_bits(t).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
               for t in (q, k, v))
    ref = reference(q, k, v, 0.125, True, Arithmetic("bf16", "bf16"))
    rows = timed.sampled_rows(P, rng, count=8)
    picked = type(ref)(*(getattr(ref, f)[rows[:, 0], rows[:, 1], rows[:, 2]][None, None]
                         for f in ref.__dataclass_fields__))
    return ref, rows, picked


def test_a_right_output_passes_at_the_sampled_rows_and_a_wrong_or_unwritten_one_fails():
    spec = load("cu/attention/attention_02_online.cu")
    ref, rows, picked = _case()
    good = _bf16_bits(ref.o)
    verdict = timed.judge_rows(spec, P, timed.rows_of(good.ravel(), rows, P, "bhsd"), picked)
    assert verdict.ok, str(verdict)
    wrong = good.copy()
    wrong[tuple(rows[-1])] = _bf16_bits(ref.o[tuple(rows[-1])] + 0.25)
    verdict = timed.judge_rows(spec, P, timed.rows_of(wrong.ravel(), rows, P, "bhsd"), picked)
    assert not verdict.ok
    unwritten = good.copy()
    unwritten[tuple(rows[0])] = numerics.BF16_POISON
    verdict = timed.judge_rows(spec, P, timed.rows_of(unwritten.ravel(), rows, P, "bhsd"),
                               picked)
    assert verdict.cause == "unwritten output"


def test_a_kept_log_sum_exp_is_judged_at_the_sampled_rows():
    spec = load("cu/attention/attention_02_online.cu")
    ref, rows, picked = _case()
    good = timed.rows_of(_bf16_bits(ref.o).ravel(), rows, P, "bhsd")
    lse = ref.lse.astype(np.float32)
    assert timed.lse_rows_of(lse.ravel(), rows, P).shape == (1, 1, len(rows))
    verdict = timed.judge_rows(spec, P, good, picked, timed.lse_rows_of(lse.ravel(), rows, P))
    assert verdict.ok, str(verdict)
    unwritten = lse.copy()
    unwritten[tuple(rows[2])] = np.uint32(numerics.LSE_POISON).view(np.float32)
    verdict = timed.judge_rows(spec, P, good, picked,
                               timed.lse_rows_of(unwritten.ravel(), rows, P))
    assert verdict.cause == "unwritten log-sum-exp", str(verdict)
    log2 = (lse * np.float32(np.log2(np.e))).astype(np.float32)
    verdict = timed.judge_rows(spec, P, good, picked, timed.lse_rows_of(log2.ravel(), rows, P))
    assert verdict.cause == "wrong log-sum-exp", str(verdict)


def test_a_time_under_the_napkins_bound_is_faster_than_the_hardware_allows():
    from harness.kinds.attention import napkin
    p = read_size("B=4,H=16,S=4096,D=128")
    facts = dict(arch="sm_90", sms=132, clock_mhz=1980.0, dram_bytes_per_s=3.35e12,
                 tensor_flops_per_clock_per_sm=4096)
    # 4 * D per pair over 4096 FLOP a clock on 132 SMs at 1980 MHz, 2% margin: 0.503 ms
    bound = p["B"] * p["H"] * 4096 * 4096 * 4 * 128 / (4096 * 132 * 1980e6 * 1.02) * 1e3
    assert napkin.too_fast(p, bound * 1.001, **facts) == ""
    why = napkin.too_fast(p, bound * 0.9, **facts)
    assert why.startswith("faster than the hardware allows") and "tensor cores" in why
    assert napkin.too_fast(p, 1.4677, **facts) == ""  # attention_03 on the H200: 375 TFLOP/s
