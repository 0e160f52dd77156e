"""Attention on the GPU: the device reference against the host's, and both kernels through
the battery (the ``gpu`` marker: skipped with the reason where there is no GPU)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.kinds.attention import battery, device_reference
from harness.kinds.attention.build import load, params_of
from harness.kinds.attention.kind import judge_raw
from harness.kinds.attention.launch import Launcher, battery_verdicts
from harness.kinds.attention.numerics import Arithmetic, reference
from harness.kinds.attention.problem import AttentionProblem
from harness.kinds.attention.reference import to_layout

pytestmark = pytest.mark.gpu
CASES = {c.name: c for c in battery.CASES}


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("name", ["ragged", "causal_s_q_lt_s_kv", "causal_s_q_gt_s_kv",
                                  "grouped_query", "large_logits"])
def test_device_reference_matches_the_host(device, name, layout):
    from harness.gpu.driver import Buffer, Stream
    from harness.gpu.own_kernels import current_arch
    case = CASES[name]
    drawn = battery.draw(case, "bf16", np.random.default_rng(11))
    arithmetic = Arithmetic("bf16", "bf16")
    host = reference(drawn.q, drawn.k, drawn.v, case.scale, case.problem.causal, arithmetic)
    p = case.problem
    rows = np.array([(b, h, i) for b in range(p["B"]) for h in range(p["H"])
                     for i in range(p["S_q"])])
    stream = Stream()
    raws = [to_layout(r.view(np.uint16), layout) for r in (drawn.q_raw, drawn.k_raw, drawn.v_raw)]
    buffers = [Buffer(r.nbytes) for r in raws]
    for buffer, raw in zip(buffers, raws, strict=True):
        buffer.upload(raw, stream)
    assert current_arch()
    got = device_reference.run(*buffers, rows, p, case.scale, precision="bf16", layout=layout,
                               p_precision="bf16", stream=stream)
    flat = {f: getattr(host, f).reshape(1, 1, len(rows), *getattr(host, f).shape[3:])
            for f in ("o", "abs_pv", "spread_pv", "lse", "m", "spread_p")}
    for field, want in flat.items():
        have = getattr(got, field)
        finite = np.isfinite(want)
        assert np.array_equal(finite, np.isfinite(have)), field
        assert np.allclose(have[finite], want[finite], rtol=1e-9, atol=1e-14), field


def test_device_reference_at_sixteen_thousand_keys(device):
    from harness.gpu.driver import Buffer, Stream
    p = AttentionProblem.make(1, 1, 16384, 16384, 128, causal=True)
    case = battery.Case("long", p, "S_kv = 16K fits")
    drawn = battery.draw(case, "bf16", np.random.default_rng(5))
    rows = np.array([(0, 0, i) for i in (0, 1, 8191, 16383)])
    stream = Stream()
    buffers = [Buffer(r.nbytes) for r in (drawn.q_raw, drawn.k_raw, drawn.v_raw)]
    for buffer, raw in zip(buffers, (drawn.q_raw, drawn.k_raw, drawn.v_raw), strict=True):
        buffer.upload(raw, stream)
    got = device_reference.run(*buffers, rows, p, case.scale, precision="bf16", layout="bhsd",
                               p_precision="bf16", stream=stream)
    for r, (_, _, i) in enumerate(rows):
        host = reference(drawn.q[:, :, i:i + 1], drawn.k[:, :, :i + 1], drawn.v[:, :, :i + 1],
                         case.scale, False, Arithmetic("bf16", "bf16"))
        assert np.allclose(got.o[0, 0, r], host.o[0, 0, 0], rtol=1e-9, atol=1e-14)
        assert math.isclose(got.lse[0, 0, r], host.lse[0, 0, 0], rel_tol=1e-12)


@pytest.mark.parametrize("path, variant", [("cu/attention/attention_01_naive.cu", None),
                                           ("cu/attention/attention_02_online.cu", "d64"),
                                           ("cu/attention/attention_02_online.cu", "d128"),
                                           ("cu/attention/attention_02_online.cu", "d256"),
                                           ("cu/attention/attention_03_wgmma.cu", "d64"),
                                           ("cu/attention/attention_03_wgmma.cu", "d128"),
                                           ("cu/attention/attention_03_wgmma.cu", "d256"),
                                           ("cu/attention/attention_03_wgmma.cu", "d64p"),
                                           ("cu/attention/attention_03_wgmma.cu", "d128p"),
                                           ("cu/attention/attention_03_wgmma.cu", "d128pp"),
                                           ("cu/attention/attention_03_wgmma.cu", "d256p"),
                                           ("examples/attention_first.cu", None)])
def test_our_kernels_pass_the_battery(device, path, variant):
    from harness.gpu.own_kernels import current_arch
    verdicts = list(battery_verdicts(load(path), current_arch(), seeds=3, seed=20261205,
                                     variant=variant))
    assert len(verdicts) == 3 * (len(battery.CASES) - (2 if variant else 0))
    failed = [f"{case.name}: {verdict}" for case, verdict in verdicts if not verdict.ok]
    assert not failed, "\n".join(failed)


def test_a_wrong_scale_on_the_gpu_is_named(device):
    from harness.gpu.own_kernels import current_arch
    spec = load("cu/attention/attention_02_online.cu")
    launcher = Launcher(spec, current_arch(), "d128")
    try:
        case = CASES["head_dim_128"]
        drawn = battery.draw(case, "bf16", np.random.default_rng(3))
        o_raw, lse_raw = launcher.outputs(case, drawn, scale=case.scale * math.log2(math.e))
    finally:
        launcher.close()
    verdict = judge_raw(spec, case, drawn, o_raw, lse_raw)
    assert verdict.cause.startswith("wrong softmax scale (log2 e applied twice"), str(verdict)
    assert params_of(spec, "d128")["HEAD_DIM"] == 128
