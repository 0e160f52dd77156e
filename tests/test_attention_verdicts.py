"""Attention's verdicts proved on simulated kernels: right ones (any key order, any tile,
P rounded or not) never fail; each mistake fails with its cause named."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.kernels.spec import read_spec
from harness.kinds.attention import battery, numerics
from harness.kinds.attention.kind import judge_raw
from harness.kinds.attention.numerics import Arithmetic, judge, reference
from harness.kinds.attention.reference import stored, to_layout
from harness.kinds.attention.simulate import Mistakes, online

CASES = {c.name: c for c in battery.CASES}


def _run(case, precision, mistakes=None, *, seed=0, p_type=None, tile=None):
    drawn = battery.draw(case, precision, np.random.default_rng(100 + seed))
    arithmetic = Arithmetic(precision, p_type or precision)
    ref = reference(drawn.q, drawn.k, drawn.v, case.scale, case.problem.causal, arithmetic)
    o, lse, unwritten = online(drawn.q, drawn.k, drawn.v, case.scale, case.problem.causal,
                               precision, p_type=p_type, rng=np.random.default_rng(seed),
                               tile=tile, mistakes=mistakes or Mistakes())
    return judge(o, unwritten, ref, arithmetic, case.problem["S_kv"], lse=lse,
                 lse_unwritten=np.zeros(lse.shape, dtype=bool),
                 suspects=battery.suspects(case, drawn, arithmetic, case.scale))


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("name", ["ragged", "causal_s_q_lt_s_kv", "causal_s_q_gt_s_kv",
                                  "grouped_query", "large_logits"])
def test_a_right_kernel_summing_in_any_order_never_fails(name, precision):
    worst = 0.0
    for seed in range(12):  # a new key order, tile size and inputs each time
        verdict = _run(CASES[name], precision, seed=seed)
        assert verdict.ok, str(verdict)
        worst = max(worst, verdict.worst_ratio)
    assert 0 < worst < 0.6  # the margin the bound keeps (docs/attention.md)


@pytest.mark.parametrize("name", [c.name for c in battery.CASES])
def test_every_case_passes_right_kernels_with_p_rounded_or_kept(name):
    for p_type, tile in (("bf16", 64), ("fp32", 16)):
        assert _run(CASES[name], "bf16", p_type=p_type, tile=tile, seed=7).ok


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("mistakes, case, cause", [
    (Mistakes(no_running_max=True), "large_logits", "no running maximum"),
    (Mistakes(scale_factor=1.4426950408889634), "ragged",
     "wrong softmax scale (log2 e applied twice"),
    (Mistakes(scale_factor=0.125), "head_dim_64", "wrong softmax scale (1/D instead"),
    (Mistakes(mask_offset=-1), "causal_square", "causal mask off by one (the diagonal left"),
    (Mistakes(mask_offset=+1), "causal_square", "causal mask off by one (one key past"),
    (Mistakes(top_left=True), "causal_s_q_lt_s_kv", "causal mask aligned top-left"),
    (Mistakes(unwritten_row=76), "ragged", "unwritten output"),
    (Mistakes(lse_log2=True), "head_dim_128", "wrong log-sum-exp"),
    (Mistakes(accumulate_16=True), "long", "accuracy (the size of 16-bit accumulation"),
])
def test_each_mistake_fails_with_its_cause(mistakes, case, cause, precision):
    verdict = _run(CASES[case], precision, mistakes, seed=5)
    assert not verdict.ok
    assert verdict.cause.startswith(cause), str(verdict)
    assert verdict.worst_ratio > 1.5


def test_no_running_maximum_passes_where_logits_are_small():
    # the mistake is invisible at small logits: the battery's large_logits case exists for it
    assert _run(CASES["ragged"], "bf16", Mistakes(no_running_max=True)).ok


def test_a_worst_case_bound_would_pass_sixteen_bit_accumulation():
    # why the bound is a random walk: every error aligned is sqrt(S_kv) wider, and the
    # 16-bit accumulator hides under it
    case = CASES["long"]
    drawn = battery.draw(case, "fp16", np.random.default_rng(1))
    arithmetic = Arithmetic("fp16", "fp16")
    ref = reference(drawn.q, drawn.k, drawn.v, case.scale, False, arithmetic)
    o, _, _ = online(drawn.q, drawn.k, drawn.v, case.scale, False, "fp16",
                     mistakes=Mistakes(accumulate_16=True))
    error = np.abs(o - ref.o)
    assert (error > numerics.o_bound(ref, arithmetic, case.problem["S_kv"])).any()
    worst_case = numerics.UNIT_ROUNDOFF["fp16"] * ref.abs_pv * 4
    assert (error <= worst_case).all()


def test_lse_of_rows_that_see_no_key_must_be_minus_infinity():
    case = CASES["causal_s_q_gt_s_kv"]
    drawn = battery.draw(case, "bf16", np.random.default_rng(2))
    arithmetic = Arithmetic("bf16", "bf16")
    ref = reference(drawn.q, drawn.k, drawn.v, case.scale, True, arithmetic)
    o, lse, unwritten = online(drawn.q, drawn.k, drawn.v, case.scale, True, "bf16")
    assert judge(o, unwritten, ref, arithmetic, 70, lse=lse).ok
    lse[0, 0, 0] = 0.0  # row 0 sees no key (S_q - S_kv = 60 such rows)
    verdict = judge(o, unwritten, ref, arithmetic, 70, lse=lse)
    assert verdict.cause == "wrong log-sum-exp" and "not -inf" in verdict.detail


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_raw_outputs_in_the_kernels_layout_with_poison(layout):
    spec = read_spec("cu/attention/attention_01_naive.cu")
    spec = dataclasses.replace(spec, kind_spec=dataclasses.replace(spec.kind_spec,
                                                                   layout=layout))
    case = CASES["grouped_query"]
    drawn = battery.draw(case, "bf16", np.random.default_rng(4))
    o, lse, _ = online(drawn.q, drawn.k, drawn.v, case.scale, False, "bf16", p_type="fp32")
    o_raw = to_layout(stored(o, "bf16"), layout)
    assert judge_raw(spec, case, drawn, o_raw, lse.astype(np.float32)).ok
    poisoned = o_raw.copy()
    row = (0, 5, 3) if layout == "bhsd" else (0, 3, 5)  # (b, h, i) = (0, 5, 3)
    poisoned[row] = numerics.BF16_POISON
    verdict = judge_raw(spec, case, drawn, poisoned, lse.astype(np.float32))
    assert verdict.cause == "unwritten output" and "b=0, h=5, i=3" in verdict.detail
    lse_raw = lse.astype(np.float32)
    lse_raw.view(np.uint32)[0, 1, 2] = numerics.LSE_POISON
    verdict = judge_raw(spec, case, drawn, o_raw, lse_raw)
    assert verdict.cause == "unwritten log-sum-exp"
    nan = o_raw.copy()
    nan[row] = 0x7FC0  # a quiet NaN in BF16
    assert judge_raw(spec, case, drawn, nan, None).cause == "not finite"
