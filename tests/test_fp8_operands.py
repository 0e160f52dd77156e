"""FP8 operands on the host (kinds/gemm/host_values.py, operands.py): block scales drawn per
1 x 128 of A and 128 x 128 of B, spread into the float64 values the reference multiplies, and
stored for the device in the layouts the ABI names ([KB][M] for A, [KB][NB] for B)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from harness.kernels.fp8_spec import Fp8Spec
from harness.kinds.gemm import host_values, operands
from harness.kinds.gemm.fp8 import check as fp8_check


@pytest.mark.parametrize("scales", ["tensor", "block"])
def test_the_float64_values_carry_the_scales_the_check_applies(scales):
    m, n, k = 37, 300, 270  # not multiples of the 128-element blocks
    spec = Fp8Spec("e4m3", "e5m2", scales, 128 if scales == "block" else None)
    (a, a64, b, b64, _, _, sc), _ = host_values.of(m, n, k, "fp8", 7, False, "bf16", fp8=spec)
    assert a.dtype == b.dtype == np.uint8 and a.shape == (m, k) and b.shape == (k, n)
    g = fp8_check.Fp8Gemm(a, b, "e4m3", "e5m2", *sc, out="bf16", promote=spec.promote)
    np.testing.assert_allclose(a64 @ b64, fp8_check.reference(g), rtol=1e-12, atol=0)
    if scales == "block":
        assert sc[0].shape == (m, 3) and sc[1].shape == (3, 3)
        assert len(np.unique(sc[0])) > 1 and not (sc[0] == 1).any()


def test_per_tensor_and_block_scales_do_not_share_a_reference():
    """Two FP8 GEMMs of the same formats, shape and seed, one with scales per tensor and one
    per block, draw the same codes and different scales: a large reference (kept for every
    kernel on the same inputs) is each one's own. Sharing one, block-scaled rung 21's check
    at 1999 x 4208 x 208 read rung 20's product once the check took the reference given."""
    from harness.kinds.gemm import references
    m, n, k = 1024, 1024, 40  # m n >= 2^20: kept beside the operands' key, not with them
    refs = []
    for scales in ("tensor", "block"):
        spec = Fp8Spec("e4m3", "e4m3", scales, 128 if scales == "block" else None)
        (_, a64, _, b64, _, _, _), _ = host_values.of(m, n, k, "fp8", 5, False, "bf16",
                                                      fp8=spec)
        ops = SimpleNamespace(m=m, n=n, k=k, a64=a64, b64=b64, c64=None, draw="uniform",
                              kinds=("e4m3", "e4m3"))
        gemm = SimpleNamespace(kernel=SimpleNamespace(spec=SimpleNamespace(
            precision="fp8", c_type="bf16", fp8=spec)))
        ref, _ = references.reference_of(gemm, ops, 5, 1.0, 0.0)
        np.testing.assert_allclose(ref, a64 @ b64, rtol=1e-12)
        refs.append(ref)
    assert not np.allclose(refs[0], refs[1])


def test_block_scales_are_stored_k_block_major_for_a():
    sa = np.arange(6, dtype=np.float64).reshape(3, 2)  # M = 3, KB = 2 (fp8_check's layout)
    sb = np.arange(4, dtype=np.float64).reshape(2, 2) + 10  # KB = 2, NB = 2
    stored_a, stored_b = operands.Operands.stored_scales.fget(SimpleNamespace(scales=(sa, sb)))
    assert stored_a.tolist() == [0, 2, 4, 1, 3, 5]  # scale_a[kb * M + m]
    assert stored_b.tolist() == [10, 11, 12, 13]  # scale_b[kb * NB + nb]
    per_tensor = operands.Operands.stored_scales.fget(SimpleNamespace(scales=(0.25, 8.0)))
    assert [x.tolist() for x in per_tensor] == [[0.25], [8.0]]


def test_a_sampled_check_takes_each_columns_block_scale():
    """The check over random rows and columns applies each sampled column's own B scale."""
    m, n, k = 64, 384, 256
    spec = Fp8Spec("e4m3", "e4m3", "block", 128)
    (a, a64, b, b64, _, _, sc), _ = host_values.of(m, n, k, "fp8", 9, False, "bf16", fp8=spec)
    g = fp8_check.Fp8Gemm(a, b, "e4m3", "e4m3", *sc, out="bf16", promote=128)
    rows, cols = np.array([1, 5, 60]), np.array([0, 130, 300, 383])
    sub = fp8_check.Fp8Gemm(a[rows], b[:, cols], "e4m3", "e4m3",
                            *fp8_check.subset(sc, rows, cols, n), out="bf16", promote=128)
    np.testing.assert_allclose(fp8_check.reference(sub),
                               fp8_check.reference(g)[np.ix_(rows, cols)], rtol=1e-12)
