"""The attention kind on the host: sizes, napkin, spec, reference, bound and verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness import kinds
from harness.errors import HarnessError, SpecError
from harness.kernels.spec import parse_spec, read_spec
from harness.kinds.attention import napkin
from harness.kinds.attention.problem import AttentionProblem, read_size, timed_first, unmasked_pairs
from harness.kinds.attention.reference import (
    attention,
    causal_mask,
    exact,
    from_layout,
    stored,
    to_layout,
)

KIND = kinds.get("attention")


# --- sizes ---------------------------------------------------------------------------------

def test_size_by_name_with_s_and_defaults():
    p = read_size("B=4,H=16,S=4096,D=128")
    assert p.as_dict() == {"B": 4, "H": 16, "H_kv": 16, "S_q": 4096, "S_kv": 4096, "D": 128}
    assert not p.causal
    q = read_size("S_q=100, S_kv=300, H=8, H_kv=2, causal")
    assert (q["S_q"], q["S_kv"], q["H"], q["H_kv"], q.causal) == (100, 300, 8, 2, True)
    assert q["B"] == 4 and q["D"] == 128  # defaults
    assert read_size("2048")["S_kv"] == 2048
    assert read_size(q.text) == q  # text reads back
    assert AttentionProblem.from_json(q.to_json()) == q
    assert KIND.read_size("B=1,S=64,D=64,causal=1").causal


@pytest.mark.parametrize("text, match", [
    ("S=64,S_q=32", "S sets both"),
    ("H=16,H_kv=3", "not a multiple of H_kv"),
    ("B=0,S=64", "positive integer"),
    ("Q=4", "no dim 'Q'"),
    ("causal=2", "causal takes 0 or 1"),
    ("64,64", "names its dims"),
])
def test_size_errors(text, match):
    with pytest.raises(HarnessError, match=match):
        read_size(text)


def test_timed_first_is_flashattention_sweep():
    sizes = timed_first()
    assert {(p["B"] * p["S_q"], p["H"], p["D"]) for p in sizes} == {(16384, 16, 128)}
    assert [p.causal for p in sizes] == [False] * 3 + [True] * 3


# --- napkin --------------------------------------------------------------------------------

@pytest.mark.parametrize("s_q, s_kv", [(1, 1), (7, 7), (5, 13), (13, 5), (64, 64), (3, 100)])
def test_causal_pairs_counted_exactly(s_q, s_kv):
    brute = int(causal_mask(s_q, s_kv).sum())
    assert unmasked_pairs(s_q, s_kv, True) == brute
    assert unmasked_pairs(s_q, s_kv, False) == s_q * s_kv


def test_flops_bytes_and_ceiling():
    p = read_size("B=4,H=16,S=4096,D=128")
    assert napkin.flops(p) == 4 * 4 * 16 * 4096 * 4096 * 128
    c = read_size("B=1,H=1,S=1024,D=64,causal")
    assert napkin.flops(c) == 4 * 64 * 1024 * 1025 // 2  # not halved
    assert napkin.compulsory_bytes(p) == 2 * 4 * (4 * 16 * 4096 * 128)
    gqa = read_size("B=1,H=8,H_kv=2,S=10,D=4")
    assert napkin.compulsory_bytes(gqa, lse=True) == 2 * (2 * 8 * 10 * 4 + 2 * 2 * 10 * 4) \
        + 4 * 8 * 10
    # H100 SXM at 1.83 GHz: D = 128 -> tensor cores bind (exponentials take half their time)
    h100 = dict(arch="sm_90", sms=132, clock_hz=1.83e9, dram_bytes_per_s=3.35e12,
                tensor_flops_per_clock_per_sm=4096)
    ceil = napkin.ceiling(p, **h100)
    assert ceil.limiter == "tensor cores"
    assert ceil.exp_ms == pytest.approx(ceil.tensor_ms / 2)
    assert ceil.tflops(p) == pytest.approx(989, rel=0.01)
    # D = 32: the exponentials bind; a single short row of keys: memory
    assert napkin.ceiling(read_size("B=4,H=16,S=4096,D=32"), **h100).limiter \
        == "exponentials (SFU)"
    assert napkin.ceiling(read_size("B=64,H=16,S_q=1,S_kv=4096,D=128"), **h100).limiter \
        == "memory"
    with pytest.raises(ValueError, match="no SFU rate known for sm_70"):
        napkin.ceiling(p, **{**h100, "arch": "sm_70"})


# --- the reference -------------------------------------------------------------------------

def _direct(q, k, v, scale, causal):
    """Attention element by element with math.exp, the obvious way."""
    b, h, s_q, d = q.shape
    s_kv, group = k.shape[2], h // k.shape[1]
    o = np.zeros_like(q)
    lse = np.full((b, h, s_q), -math.inf)
    for bi in range(b):
        for hi in range(h):
            for i in range(s_q):
                keys = [j for j in range(s_kv) if not causal or j <= i + s_kv - s_q]
                if not keys:
                    continue
                x = [scale * float(np.dot(q[bi, hi, i], k[bi, hi // group, j])) for j in keys]
                m = max(x)
                w = [math.exp(t - m) for t in x]
                total = math.fsum(w)
                for j, wj in zip(keys, w, strict=True):
                    o[bi, hi, i] += wj / total * v[bi, hi // group, j]
                lse[bi, hi, i] = m + math.log(total)
    return o, lse


@pytest.mark.parametrize("shape, causal", [((2, 4, 2, 9, 9, 8), False),
                                           ((1, 2, 1, 5, 12, 16), True),
                                           ((1, 2, 2, 12, 5, 8), True),
                                           ((1, 3, 3, 1, 1, 4), False)])
def test_reference_matches_direct_float64(shape, causal):
    b, h, hkv, sq, skv, d = shape
    rng = np.random.default_rng(3)
    q = exact(stored(rng.uniform(-2, 2, (b, h, sq, d)), "bf16"), "bf16")
    k = exact(stored(rng.uniform(-2, 2, (b, hkv, skv, d)), "bf16"), "bf16")
    v = exact(stored(rng.uniform(-1, 1, (b, hkv, skv, d)), "bf16"), "bf16")
    ref = attention(q, k, v, 0.3, causal)
    o, lse = _direct(q, k, v, 0.3, causal)
    assert np.allclose(ref.o, o, rtol=1e-13, atol=1e-15)
    assert np.array_equal(np.isneginf(ref.lse), np.isneginf(lse))
    finite = np.isfinite(lse)
    assert np.allclose(ref.lse[finite], lse[finite], rtol=1e-13)


def test_layouts_round_trip_and_storage():
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    bshd = to_layout(x, "bshd")
    assert bshd.shape == (2, 4, 3, 5) and bshd[1, 2, 0, 3] == x[1, 0, 2, 3]
    assert np.array_equal(from_layout(bshd, "bshd"), x)
    with pytest.raises(HarnessError, match="layout must be one of"):
        to_layout(x, "sbhd")
    assert exact(stored(np.array([1 + 2**-9]), "bf16"), "bf16")[0] == 1.0  # ties to even
    assert exact(stored(np.array([1 + 3 * 2**-9]), "bf16"), "bf16")[0] == 1 + 2**-7
    with pytest.raises(HarnessError, match="bf16 or fp16"):
        stored(np.zeros(1), "fp8")


# --- specs ---------------------------------------------------------------------------------

def test_the_kernels_parse_as_attention():
    naive = read_spec("cu/attention/attention_01_naive.cu")
    online = read_spec("cu/attention/attention_02_online.cu")
    assert naive.kind == online.kind == "attention"
    assert naive.kind_spec.p_type == "fp32" and online.kind_spec.p_type == "input"
    assert online.kind_spec.head_dims == (64, 128, 256)
    assert set(online.variants) == {"d64", "d128", "d256"}
    assert [label for label, _ in naive.launch_parameters][:5] == ["q u64", "k u64", "v u64",
                                                                  "o u64", "lse u64"]
    assert KIND.baseline_name(naive) == "cudnn_sdpa"


def _spec(body: str, code: str = 'extern "C" __global__ void f() {}\n'):
    from pathlib import Path
    return parse_spec(f"/* harness\n{body}*/\n{code}", Path("t.cu"))


GOOD = ('kind = "attention"\nentry = "f"\nsummary = "s"\nmin_arch = "sm_80"\n'
        'precision = "bf16"\nlayout = "bshd"\nblock = ["128"]\ngrid = ["S_q", "H", "B"]\n')


@pytest.mark.parametrize("change, match", [
    (('layout = "bshd"', 'layout = "sbhd"'), "layout must be one of bhsd, bshd"),
    (('precision = "bf16"', 'precision = "fp32"'), "precision must be one of bf16, fp16"),
    (('block = ["128"]', 'block = ["128"]\nheads = 3'), "unknown key"),
    (('block = ["128"]', 'block = ["128"]\np_type = "fp8"'), "p_type must be one of"),
    (('grid = ["S_q", "H", "B"]', 'grid = ["S", "H", "B"]'), "uses S"),
    (('"B"]\n', '"B"]\n[params]\nD = 3\n'), "both a dim"),
    (('block = ["128"]\n', ''), "missing required key"),
])
def test_spec_errors(change, match):
    assert _spec(GOOD).kind_spec.layout == "bshd"
    with pytest.raises(SpecError, match=match):
        _spec(GOOD.replace(*change))


# a BSHD K as TMA sees it: D contiguous, then heads, then positions, then batch
TMAPS = ('[params]\nBLOCK_N = 128\n'
         '[tmaps.k]\nrank = 4\nshape = ["D", "H_kv", "S_kv", "B"]\n'
         'strides = ["D", "H_kv * D", "S_kv * H_kv * D"]\nbox = ["64", "1", "BLOCK_N", "1"]\n'
         '[tmaps.q]\nrank = 2\nshape = ["D", "B * S_q * H"]\nstrides = ["D"]\n'
         'box = ["64", "64"]\nswizzle = "64B"\n')


def test_tensor_maps_follow_the_abi_in_q_k_v_o_order():
    """A kernel that loads by TMA declares ``[tmaps.X]`` per tensor: its launch takes the ABI
    and then a 128-byte map each, q before k whatever the order in the file, each encoded
    over its own tensor's buffer at the problem's dims."""
    from harness.kernels.signature import TMAP_BYTES
    from harness.kinds.attention.launch import tensor_maps
    from harness.kinds.attention.spec import ABI

    spec = _spec(GOOD + TMAPS)
    assert spec.launch_parameters == ABI + (("tmap_q (from [tmaps.q])", TMAP_BYTES),
                                            ("tmap_k (from [tmaps.k])", TMAP_BYTES))
    assert _spec(GOOD).launch_parameters == ABI
    seen = []

    def encode(desc, address, dtype, label):
        seen.append((desc.shape, desc.strides, desc.box, desc.swizzle, address, dtype, label))
        return len(seen)

    p = read_size("B=2,H=8,H_kv=2,S_q=100,S_kv=300,D=128")
    maps = tensor_maps(spec, p, {"BLOCK_N": 128}, {"q": 0x1000, "k": 0x2000, "v": 0x3000,
                                                     "o": 0x4000}, encode)
    assert maps == [1, 2]
    assert seen == [((128, 2 * 100 * 8), (128,), (64, 64), "64B", 0x1000, "bf16",
                     "t tensor map q"),
                    ((128, 2, 300, 2), (128, 256, 300 * 256), (64, 1, 128, 1), "128B",
                     0x2000, "bf16", "t tensor map k")]


@pytest.mark.parametrize("change, match", [
    (("[tmaps.k]", "[tmaps.A]"), "'A' is not an operand; expected one of q, k, v, o"),
    (('box = ["64", "1", "BLOCK_N", "1"]', 'box = ["64", "1", "BLOCK_M", "1"]'), "uses BLOCK_M"),
    (("rank = 4", "rank = 6"), "rank must be an integer 1..5"),
    (('strides = ["D"]', 'strides = []'), "must list 1 formula"),
])
def test_tensor_map_errors(change, match):
    with pytest.raises(SpecError, match=match):
        _spec(GOOD + TMAPS.replace(*change))


def test_a_tensor_map_that_cannot_be_evaluated_names_the_map_and_size():
    from harness.kinds.attention.launch import tensor_maps

    spec = _spec(GOOD + TMAPS.replace('"BLOCK_N", "1"]', '"BLOCK_N // (D - 128)", "1"]'))
    with pytest.raises(HarnessError, match=r"tensor map k: \[tmaps.k\] at .*D=128"):
        tensor_maps(spec, read_size("S=64,D=128"), {"BLOCK_N": 128},
                    dict.fromkeys("qkvo", 0), lambda *a: None)


# --- the kind object -----------------------------------------------------------------------

def test_kind_registry_napkin_and_figures():
    assert "attention" in kinds.names()
    spec = read_spec("cu/attention/attention_02_online.cu")
    p = read_size("B=4,H=16,S=4096,D=128")
    assert KIND.flops(spec, p) == napkin.flops(p)
    assert KIND.compulsory_bytes(spec, p) == napkin.compulsory_bytes(p, lse=True)
    assert KIND.default_sizes(spec)[0] == timed_first()[0]
    assert len(KIND.default_sizes(spec, quick=True)) == 1

    from types import SimpleNamespace as NS
    result = NS(problem=p.to_json(), timing=NS(median_ms=1.0),
                baseline=NS(timing=NS(median_ms=0.5)))
    figures = KIND.figures(result)
    assert figures["gflops"] == pytest.approx(napkin.flops(p) / 1e6)
    assert figures["baseline_gflops"] == pytest.approx(2 * napkin.flops(p) / 1e6)
    assert figures["pct_baseline"] == pytest.approx(50.0)  # half the baseline's speed
    unmeasured = KIND.figures(NS(problem=p.to_json(), timing=None, baseline=None))
    assert unmeasured["gflops"] is None and unmeasured["pct_baseline"] is None
    assert [c.key for c in KIND.columns()] == ["gflops", "pct_baseline", "gbps"]


def test_cases_follow_the_kernels_constraints():
    naive = read_spec("cu/attention/attention_01_naive.cu")
    online = read_spec("cu/attention/attention_02_online.cu")
    assert len(KIND.cases_for(naive)) == 11
    # constraints move the shapes (D == HEAD_DIM), never drop a check
    names = [c.name for c in KIND.cases_for(online)]
    assert names == [c.name for c in KIND.cases_for(naive) if c.name not in ("head_dim_64",
                                                                          "head_dim_256")]
    assert {c.problem["D"] for c in KIND.cases_for(online)} == {128}
    assert {c.problem["D"] for c in KIND.cases_for(online, "d64")} == {64}
    no_causal = _spec(GOOD)
    assert not any(c.problem.causal for c in KIND.cases_for(no_causal))


def test_plan_lists_the_battery_at_the_kernels_shapes():
    from harness.kernels.registry import Kernel
    online = read_spec("cu/attention/attention_02_online.cu")
    kernel = Kernel("attention_02_online[d64]", online, (("HEAD_DIM", 64),), "d64")
    assert KIND.takes("plan")
    plan = KIND.plan(kernel)
    assert len(plan.checks) == 9 and {c.problem["D"] for c in plan.checks} == {64}
    assert "head_dim_64" in {c.name for c in plan.checks}
    data = plan.to_json()
    assert data["checks"][0] == {"name": "ragged", "size": "B=2,H=3,H_kv=3,S_q=77,S_kv=77,D=64",
                                 "exposes": plan.checks[0].exposes, "values": [-1.0, 1.0]}
    text = plan.table(80)
    assert "large_logits" in text and all(len(line) <= 80 for line in text.splitlines())


def test_check_plan_takes_attention_kernels_and_names_what_takes_them(capsys):
    """``harness check --plan`` lists an attention kernel's battery (its kind derives it from
    the spec, as a GEMM's); ``harness run`` refuses one naming that command, which exists
    (it named ``harness plan`` before), and a buffers kernel is left out of --plan saying
    why."""
    from harness.cli import main

    assert main(["check", "--plan", "cu/attention/attention_02_online.cu",
                 "cu/memory/sum_07_tuned.cu"]) == 0
    out, err = capsys.readouterr()
    assert "large_logits" in out and "sum_07_tuned left out" in err, (out, err)
    assert main(["check", "--plan", "--json", "cu/attention/attention_01_naive.cu"]) == 0
    assert '"ragged"' in capsys.readouterr().out
    assert KIND.runs_it() == "harness check --plan"


def test_run_on_a_gpu_refuses_attention_naming_what_takes_it(capsys, monkeypatch):
    """With a GPU, ``harness run`` refuses an attention kernel (its measuring is the issue
    "Attention on the H100"), naming the command that takes it; without one it builds it
    (tests/test_attention_build.py)."""
    from harness.cli import common, main
    from harness.gpu.devices import GpuStatus
    from harness.run import process

    monkeypatch.setattr(common, "has_gpu", lambda: GpuStatus(name="a GPU"))
    monkeypatch.setattr(process, "start_ahead", lambda: None)
    assert main(["run", "cu/attention/attention_02_online.cu"]) == 2
    err = capsys.readouterr().err
    assert "`harness check --plan` takes attention kernels" in err, err
