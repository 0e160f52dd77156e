"""Attention's baselines on the CPU: the cuDNN frontend graph built with the keywords its
``sdpa`` takes, and a library's refusal kept short in the report.

At 331f253 the cuDNN baseline passed ``causal_mask_bottom_right`` to nvidia-cudnn-frontend
1.32.0's ``pygraph.sdpa``, whose keyword is ``use_causal_mask_bottom_right``: every row of the
H100's attention compare said "unavailable" with the frontend's 4 KB list of overloads
(reports/h100/attention-compare-331f253.md)."""

from __future__ import annotations

import sys
import types

import pytest

from harness.kinds.attention.baselines import CudnnSdpa, Operands
from harness.kinds.attention.problem import AttentionProblem
from harness.kinds.attention.timed import _refusal


def _frontend(calls: list):
    """A stand-in for the ``cudnn`` module: pygraph.sdpa with frontend 1.32.0's keywords (as
    its TypeError listed them on the H100), which rejects any other."""
    class _Out:
        def set_output(self, _):
            return self

        def set_dim(self, dims):
            calls.append(("dim", tuple(dims)))
            return self

        def set_stride(self, strides):
            return self

    class pygraph:  # noqa: N801  (the frontend's name)
        def __init__(self, **kw):
            calls.append(("graph", kw))

        def tensor_like(self, t):
            return object()  # a graph tensor: a key of the pack

        def sdpa(self, q, k, v, is_inference=None, attn_scale=None, bias=None, block_mask=None,
                 use_alibi_mask=False, use_padding_mask=False, seq_len_q=None, seq_len_kv=None,
                 use_causal_mask=False, use_causal_mask_bottom_right=False,
                 sliding_window_length=None, diagonal_alignment=None,
                 diagonal_band_left_bound=None, diagonal_band_right_bound=None, dropout=None,
                 rng_dump=None, compute_data_type=None, name=""):
            calls.append(("sdpa", dict(is_inference=is_inference, scale=attn_scale,
                                       top_left=use_causal_mask,
                                       bottom_right=use_causal_mask_bottom_right)))
            return [_Out(), None]

        def build(self, modes):
            calls.append(("build", modes))

        def get_workspace_size(self):
            return 0

    enum = types.SimpleNamespace
    return types.SimpleNamespace(
        pygraph=pygraph, data_type=enum(BFLOAT16="bf16", HALF="fp16", FLOAT="fp32"),
        heur_mode=enum(A="A", FALLBACK="FALLBACK"), create_handle=lambda: "handle",
        set_stream=lambda handle, stream: calls.append(("stream", stream)))


class _View:
    shape = (2, 4, 64, 128)

    def stride(self):
        return (4 * 64 * 128, 64 * 128, 128, 1)


@pytest.mark.parametrize("causal", [False, True])
def test_cudnn_sdpa_builds_with_the_frontends_keywords(monkeypatch, causal):
    calls: list = []
    monkeypatch.setitem(sys.modules, "cudnn", _frontend(calls))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(
        empty=lambda *a, **k: "workspace", uint8="uint8"))
    monkeypatch.setattr(CudnnSdpa, "_views", lambda self, ops: (_View(),) * 4)
    problem = AttentionProblem.make(B=2, H=4, S_q=64, S_kv=64, D=128, causal=causal)
    base = CudnnSdpa(None, problem)
    base.prepare(Operands(None, None, None, None, None, problem, 0.125, "bhsd", "bf16",
                          stream=1234))
    sdpa = [c[1] for c in calls if c[0] == "sdpa"]
    # bottom-right, the kernels' mask (the frontend's top-left one is another mask when
    # S_q != S_kv)
    assert sdpa == [dict(is_inference=True, scale=0.125, top_left=False, bottom_right=causal)]
    assert ("stream", 1234) in calls and ("dim", _View.shape) in calls
    assert base.output is not None


def test_a_librarys_refusal_keeps_its_first_and_last_lines():
    long = TypeError("sdpa(): incompatible function arguments. The following argument types "
                     "are supported:\n    1. sdpa(self, q, k, v, " + "x, " * 2000 + ")\n\n"
                     "Invoked with types: backend_graph, kwargs = { causal_mask_bottom_right }")
    said = _refusal(long)
    assert said.startswith("TypeError: sdpa(): incompatible function arguments.")
    assert said.endswith("kwargs = { causal_mask_bottom_right }")
    assert "x, x" not in said and len(said) < 400
    assert _refusal(ValueError("head dim 96 is not supported")) == \
        "ValueError: head dim 96 is not supported"
    assert len(_refusal(RuntimeError("y" * 5000))) < 320
