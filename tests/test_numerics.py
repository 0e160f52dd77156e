import math

import numpy as np
import pytest

from harness.bench import numerics
from harness.errors import HarnessError


def operands(m, n, k, precision="fp32", seed=0):
    rng = np.random.default_rng(seed)
    a, a64 = numerics.random_operand(rng, (m, k), precision)
    b, b64 = numerics.random_operand(rng, (k, n), precision)
    return a, a64, b, b64


def test_float32_product_passes_and_exact_errors_fail():
    a, a64, b, b64 = operands(65, 33, 257)
    ref = numerics.reference(a64, b64, 1.0, 0.0, None)
    out = (a @ b).astype(np.float32)
    ok = numerics.compare(out, ref, "fp32", k=257, seed=0, alpha=1.0, beta=0.0)
    assert ok.passed and ok.rel_err_norm < 1e-6 and ok.message == "ok"

    wrong = out.copy()
    wrong[3, 7] += 0.01
    bad = numerics.compare(wrong, ref, "fp32", k=257, seed=0, alpha=1.0, beta=0.0)
    assert not bad.passed and bad.bad_elements == 1
    assert "row 3, col 7" in bad.message


def test_nan_and_inf_never_pass():
    a, a64, b, b64 = operands(8, 8, 8)
    ref = numerics.reference(a64, b64, 1.0, 0.0, None)
    out = ref.astype(np.float32)
    out[5, 2] = np.nan
    result = numerics.compare(out, ref, "fp32", k=8, seed=0, alpha=1.0, beta=0.0)
    assert not result.passed and result.nan_elements == 1 and math.isinf(result.rel_err_norm)
    assert result.finding == "non-finite" and "row 5, col 2" in result.message
    out[5, 2] = np.inf
    assert not numerics.compare(out, ref, "fp32", k=8, seed=0, alpha=1.0, beta=0.0).passed


def test_unwritten_poison_is_caught():
    ref = np.ones((4, 4))
    poison = np.full((4, 4), np.uint32(numerics.NAN_WORD)).view(np.float32)
    assert np.isnan(poison).all()
    assert not numerics.compare(poison, ref, "fp32", k=4, seed=0, alpha=1, beta=0).passed


def test_tf32_sized_error_fails_fp32_and_passes_tf32():
    a, a64, b, b64 = operands(64, 64, 512)
    ref = numerics.reference(a64, b64, 1.0, 0.0, None)
    # truncate inputs to TF32 (10 explicit mantissa bits) and multiply exactly
    trunc = lambda x: (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)  # noqa: E731
    out = (trunc(a).astype(np.float64) @ trunc(b).astype(np.float64)).astype(np.float32)
    assert not numerics.compare(out, ref, "fp32", k=512, seed=0, alpha=1, beta=0).passed
    assert numerics.compare(out, ref, "tf32", k=512, seed=0, alpha=1, beta=0).passed


def test_beta_path_reference():
    a, a64, b, b64 = operands(4, 5, 6)
    c = np.arange(20, dtype=np.float64).reshape(4, 5)
    ref = numerics.reference(a64, b64, 0.5, -2.0, c)
    assert np.allclose(ref, 0.5 * (a64 @ b64) - 2.0 * c)


def test_tolerance_grows_with_k():
    small = numerics.Tolerance.for_gemm("fp32", 1024, 1.0)
    large = numerics.Tolerance.for_gemm("fp32", 4096, 1.0)
    assert large.norm_rel == pytest.approx(2 * small.norm_rel)
    assert numerics.Tolerance.for_gemm("fp32", 4096, 1.0).norm_rel < 1e-5
    with pytest.raises(HarnessError, match="no tolerance for precision 'fp8'"):
        numerics.Tolerance.for_gemm("fp8", 16, 1.0)


def test_bf16_rounds_to_nearest_even():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -2.5, 1.0 + 2**-9], dtype=np.float32)
    back = numerics.bf16_to_float(numerics.bf16_bits(x))
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even mantissa (1.0) wins; 1 + 3*2^-8 rounds up
    assert list(back) == [1.0, 1.0, 1.0 + 2**-6, -2.5, 1.0]


def test_fresh_inputs_differ_by_seed():
    a0 = operands(16, 16, 16, seed=0)[0]
    a1 = operands(16, 16, 16, seed=1)[0]
    assert not np.array_equal(a0, a1) and np.count_nonzero(a0) == a0.size
