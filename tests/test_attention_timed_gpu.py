"""The timed attention path on the GPU (harness/kinds/attention/timed.py): a kernel checked,
then timed beside the baselines that run here with its kept timed outputs checked; a kernel
whose output is wrong only when timed is named for it."""

from __future__ import annotations

import pytest

from harness.gpu.timing import TimingOptions
from harness.kinds.attention.problem import read_size

pytestmark = pytest.mark.gpu
QUICK = TimingOptions(warmup_ms=20, min_ms=20, budget_ms=60, graph=False)
SIZE = read_size("B=1,H=4,S=1024,D=128")


@pytest.fixture(scope="module")
def session(device):
    from harness.bench.session import BenchSession

    with BenchSession(QUICK) as opened:
        yield opened


def test_our_kernel_is_timed_beside_the_baselines_its_kept_outputs_checked(session):
    from harness.kinds.attention.timed import compare

    rows = list(compare([("cu/attention/attention_02_online.cu", "d128")], [SIZE],
                        ["torch_sdpa_flash", "torch_sdpa_cudnn", "cudnn_sdpa"], seeds=1,
                        session=session, say=lambda _: None))
    ours = [r for r in rows if not r.baseline]
    assert [r.status for r in ours] == ["pass"], [r.message for r in ours]
    assert ours[0].kept_checked >= 1 and ours[0].median_ms > 0 and ours[0].reps >= 10
    bases = [r for r in rows if r.baseline]
    assert len(bases) == 3
    for r in bases:
        assert r.status == "pass" or (r.status == "unavailable" and r.message), r
        if r.status == "pass":
            assert r.version and r.median_ms > 0 and r.name in ours[0].ratios


def test_a_kernel_that_tells_a_timed_launch_by_its_inputs_fails_when_timed(session):
    from harness.kinds.attention.timed import compare

    rows = list(compare([("tests/kernels/attention/attention_tell.cu", None)], [SIZE], [],
                        seeds=1, session=session, say=lambda _: None))
    assert [r.status for r in rows] == ["FAIL"], rows
    assert rows[0].message.startswith("wrong when timed"), rows[0].message
    assert rows[0].kept_checked >= 1


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("name", ["cudnn_sdpa", "flash_attn_3", "flash_attn_2",
                                  "torch_sdpa_flash", "torch_sdpa_cudnn", "torch_sdpa_efficient"])
def test_every_baseline_that_runs_here_computes_the_kinds_attention(device, name, layout):
    """The yardsticks checked: grouped-query heads, S_q != S_kv and the causal mask aligned
    bottom-right, each baseline's output (kept as its library returns it, not copied into O)
    against the float64 reference of the same BF16 inputs. A wrong mask corner or head map is
    off by O(1); BF16 output rounding is 2^-9 of the largest element."""
    import numpy as np
    import torch

    from harness.kinds.attention.baselines import BASELINES, Operands
    from harness.kinds.attention.numerics import Arithmetic, reference

    p = read_size("B=2,H=4,H_kv=2,S_q=96,S_kv=160,D=64,causal")
    base = BASELINES.make(name, None, p)
    why = base.unavailable()
    if why:
        pytest.skip(why)
    rng = np.random.default_rng(11)
    dims = {"q": (2, 4, 96, 64), "k": (2, 2, 160, 64), "v": (2, 2, 160, 64)}
    drawn = {n: torch.tensor(rng.standard_normal(s), dtype=torch.bfloat16, device="cuda")
             for n, s in dims.items()}
    as_laid = {n: (t if layout == "bhsd" else t.transpose(1, 2).contiguous())
               for n, t in drawn.items()}
    o = torch.empty_like(as_laid["q"])
    scale = 64 ** -0.5
    ops = Operands(as_laid["q"], as_laid["k"], as_laid["v"], o, None, p, scale, layout,
                   "bf16", stream=torch.cuda.current_stream().cuda_stream)
    try:
        base.prepare(ops)
        base.launch()
        torch.cuda.synchronize()
        got = base.output.float().cpu().numpy().astype(np.float64)
    except RuntimeError as exc:  # the library's own refusal (a backend without GQA, say), as
        pytest.skip(f"{name} refuses this size: {exc}")  # compare lists it: unavailable
    finally:
        base.close()
    exact = {n: t.float().cpu().numpy().astype(np.float64) for n, t in drawn.items()}
    ref = reference(exact["q"], exact["k"], exact["v"], scale, True,
                    Arithmetic("bf16", "bf16")).o
    assert got.shape == ref.shape
    err = np.abs(got - ref).max()
    assert err <= 2 ** -6 * np.abs(ref).max(), (name, layout, err)
