"""Numerics: the reference, the error scale and the tolerance derived from the claimed arithmetic
(FP32 accumulation of the stored inputs, plus a 16-bit C's rounding). The bound is proved on
simulated kernel outputs pushed through the real comparison.compare with the real reference and
error scale: correct FP32 accumulation passes at every depth, every simulated mistake (narrower
accumulators, inputs rounded further than stored, a tile that misses one k step) fails at every
depth. M and N stay small: the bound depends on K and the error scale, not on M and N."""

import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from harness.errors import HarnessError
from harness.kinds.gemm import comparison, numerics, operands

M, N = 48, 40
DEPTHS = (1024, 4096, 8192)
SEEDS = (1, 2, 3)
TILE = (slice(16, 32), slice(16, 32))
"""The 16 x 16 block of C that misses one k step."""


def operands_of(m, n, k, precision="fp32", seed=0):
    rng = np.random.default_rng(seed)
    a, a64 = numerics.random_operand(rng, (m, k), precision)
    b, b64 = numerics.random_operand(rng, (k, n), precision)
    return a, a64, b, b64


def draw(precision, k, seed, m=M, n=N, c_type=None, alpha=1.0, beta=0.0):
    """Stored operands as float32 (what a kernel multiplies), with the reference and error
    scale exactly as the checks get them (operands.reference)."""
    _, a64, _, b64 = operands_of(m, n, k, precision, seed)
    c64 = None
    if beta != 0.0:
        rng = np.random.default_rng(seed + 1000)
        c64 = numerics.to_float64(numerics.stored(rng.uniform(-1, 1, (m, n)), c_type), c_type)
    ops = SimpleNamespace(m=m, n=n, a64=a64, b64=b64, c64=c64)
    ref, scale = operands.reference(ops, ("test", m, n, k, seed), alpha, beta)
    return SimpleNamespace(precision=precision, k=k, a=a64.astype(np.float32),
                           b=b64.astype(np.float32),
                           c=None if c64 is None else c64.astype(np.float32), c64=c64, ref=ref,
                           scale=scale, alpha=alpha, beta=beta)


def check(case, out32, c_type="fp32", initial=None):
    """Store a simulated float32 result in C's type and compare it as the harness does."""
    return comparison.compare(numerics.stored(out32, c_type), case.ref, case.precision,
                              scale=case.scale, k=case.k, seed=0, alpha=case.alpha,
                              beta=case.beta, c_type=c_type, initial=initial, c64=case.c64)


# --- simulated kernels: float32 products, accumulated in the order and width named ----------

def to_fp16(x):
    return x.astype(np.float16).astype(np.float32)


def to_bf16(x):
    return numerics.bf16_to_float(numerics.bf16_bits(x))


def fp32_blas(a, b):
    return a @ b


def fp32_sequential(a, b):
    """One FP32 add per k step, no FMA (a naive kernel's order)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc += a[:, k, None] * b[k]
    return acc


def fp32_blocked_pairwise(a, b, depth=32):
    """FP32 sums of 32-deep k tiles, combined in a pairwise tree (split-K-like order)."""
    parts = [a[:, k0:k0 + depth] @ b[k0:k0 + depth] for k0 in range(0, a.shape[1], depth)]
    while len(parts) > 1:
        pairs = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2)]
        parts = pairs + parts[len(pairs) * 2:]
    return parts[0]


def narrow_accumulator(a, b, rounding, depth):
    """FP32 sums of ``depth``-deep k tiles, the running sum rounded by ``rounding`` after each
    tile (depth 1: an accumulator of that type)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k0 in range(0, a.shape[1], depth):
        acc = rounding(acc + a[:, k0:k0 + depth] @ b[k0:k0 + depth])
    return acc


CORRECT = {"blas": fp32_blas, "sequential": fp32_sequential,
           "blocked pairwise": fp32_blocked_pairwise}
NARROW = {"fp16 accumulator": (to_fp16, 1), "fp32 rounded to fp16 every 16 k": (to_fp16, 16),
          "bf16 per 64-deep k tile": (to_bf16, 64)}


# --- correct FP32 accumulation passes ----------------------------------------------------------

@pytest.mark.parametrize("k", DEPTHS)
@pytest.mark.parametrize("precision", numerics.PRECISIONS)
def test_correct_fp32_accumulation_passes_for_every_c_type(precision, k):
    for seed in SEEDS[:2]:
        case = draw(precision, k, seed)
        for order, simulate in CORRECT.items():
            out32 = simulate(case.a, case.b)
            for c_type in numerics.C_TYPES:
                result = check(case, out32, c_type)
                assert result.passed and result.message == "ok", (order, c_type, result)
                assert result.finding == "ok" and result.bad_elements == 0


@pytest.mark.parametrize("c_type", numerics.C_TYPES)
@pytest.mark.parametrize("precision", numerics.PRECISIONS)
def test_correct_alpha_beta_epilogue_passes(precision, c_type):
    case = draw(precision, 1024, 5, c_type=c_type, alpha=0.75, beta=-0.5)
    acc = fp32_sequential(case.a, case.b)
    out32 = np.float32(case.alpha) * acc + np.float32(case.beta) * case.c
    assert check(case, out32, c_type, initial=numerics.stored(case.c, c_type)).passed


# --- simulated mistakes fail at every depth ---------------------------------------------------

@pytest.mark.parametrize("k", DEPTHS)
@pytest.mark.parametrize("name", NARROW)
def test_narrow_accumulation_fails(name, k):
    rounding, depth = NARROW[name]
    precision = "bf16" if "bf16" in name else "fp16"
    for seed in SEEDS:
        case = draw(precision, k, seed)
        result = check(case, narrow_accumulator(case.a, case.b, rounding, depth))
        assert not result.passed and result.finding == "wrong values", (seed, result)
        assert result.rel_err_norm > 2 * result.tolerance_norm


ROUNDED_INPUTS = {
    # name: (stored precision, what the kernel rounds its inputs to, C type)
    "fp16 inputs rounded to bf16": ("fp16", to_bf16, "fp32"),
    "fp16 inputs rounded to bf16, fp16 C": ("fp16", to_bf16, "fp16"),
    "fp32 inputs rounded to tf32": ("fp32", numerics.tf32_round, "fp32"),
    "tf32 kernel rounding to bf16": ("tf32", to_bf16, "fp32"),
}


@pytest.mark.parametrize("k", DEPTHS)
@pytest.mark.parametrize("name", ROUNDED_INPUTS)
def test_inputs_rounded_further_than_stored_fail(name, k):
    precision, rounding, c_type = ROUNDED_INPUTS[name]
    for seed in SEEDS:
        case = draw(precision, k, seed)
        result = check(case, rounding(case.a) @ rounding(case.b), c_type)
        assert not result.passed and result.finding == "wrong values", (seed, result)
        # input rounding does not grow with K: the weakest case, fp32 inputs rounded to TF32
        # (about 2.6e-4 relative), is still 1.4x over the bound at K = 8192
        assert result.rel_err_norm > 1.25 * result.tolerance_norm


def missing_k_step(case, out32, k_missed=5):
    """``out32`` with TILE's elements missing the product of step ``k_missed``."""
    out32 = out32.copy()
    rows, cols = TILE
    out32[TILE] -= np.outer(case.a[rows, k_missed], case.b[k_missed, cols])
    return out32


def bad_only_in_tile(case, out32, count):
    """``count`` elements are over their bound, all in TILE."""
    limit = numerics.Tolerance.for_gemm(case.precision, case.k, case.ref, case.scale
                                        ).element_limit(case.ref, case.scale)
    bad = np.abs(out32.astype(np.float64) - case.ref) > limit
    outside = bad.copy()
    outside[TILE] = False
    return int(np.count_nonzero(bad)) == count and not outside.any()


@pytest.mark.parametrize("k", DEPTHS)
def test_a_tile_missing_one_k_step_fails_on_its_elements(k):
    for seed in SEEDS:
        case = draw("bf16", k, seed)
        out32 = missing_k_step(case, fp32_blas(case.a, case.b))
        result = check(case, out32)
        assert not result.passed and result.finding == "wrong values"
        assert result.bad_elements > 0 and bad_only_in_tile(case, out32, result.bad_elements)
        assert "got" in result.message and "want" in result.message
        assert "bound" in result.message
        assert re.search(r"all in rows >= (1[6-9]|2\d|3[01]) and columns >= (1[6-9]|2\d|3[01])",
                         result.message), result.message


def test_the_element_bound_catches_a_missing_k_step_the_norm_cannot():
    """At 512 x 512 x 16384 one 16 x 16 tile's missing k step is below the norm bound: only the
    element bound sees it."""
    case = draw("bf16", 16384, 7, m=512, n=512)
    out32 = missing_k_step(case, case.ref.astype(np.float32))  # correctly rounded elsewhere
    result = check(case, out32)
    assert result.rel_err_norm <= result.tolerance_norm
    assert not result.passed and result.bad_elements > 0
    assert bad_only_in_tile(case, out32, result.bad_elements)


# --- the bound itself --------------------------------------------------------------------------

@pytest.mark.parametrize("c_type", numerics.C_TYPES)
@pytest.mark.parametrize("precision", numerics.PRECISIONS)
def test_bound_stays_under_one_percent_up_to_16384(precision, c_type):
    for k in (1, 29, 61, 300, 640, 1024, 2048, 4096, 8192, 16384):
        case = draw(precision, k, 0)
        tol = numerics.Tolerance.for_gemm(precision, k, case.ref, case.scale, c_type)
        assert 0 < tol.norm_rel < 1e-2, (k, tol)


def old_norm_bound(precision, k, c_type):
    """The relative bound Tolerance.for_gemm gave before issue 20 item 4."""
    base = {"fp32": 2e-6, "tf32": 2e-3, "bf16": 5e-3, "fp16": 5e-3}[precision]
    c_rounding = {"fp32": 0.0, "bf16": 2.0**-8, "fp16": 2.0**-10}[c_type]
    return max(base * max(1.0, math.sqrt(k / 1024)), c_rounding)


def test_bound_against_the_old_one():
    bounds = {}
    for precision in numerics.PRECISIONS:
        for k in DEPTHS:
            case = draw(precision, k, 0, m=64, n=64)
            for c_type in numerics.C_TYPES:
                tol = numerics.Tolerance.for_gemm(precision, k, case.ref, case.scale, c_type)
                bounds[precision, k, c_type] = (tol.norm_rel, old_norm_bound(precision, k, c_type))
    for (precision, k, c_type), (new, old) in bounds.items():
        if c_type == "fp32":
            # ||s|| / ||ref|| is about 0.75 sqrt(K) for uniform inputs: 0.375 u K relative
            assert new == pytest.approx(0.375 * numerics.U32 * k, rel=0.1)
        if precision in ("bf16", "fp16"):
            # a 16-bit C's own rounding dominates both bounds (bf16 most): less to gain there
            factor = {"fp32": 50, "fp16": 10, "bf16": 2}[c_type]
            assert new * factor < old, (precision, k, c_type, new, old)
    # TF32 inputs are now stored exactly: its bound is the others'
    for k in DEPTHS:
        assert bounds["tf32", k, "fp32"][0] * 25 < bounds["tf32", k, "fp32"][1]


def test_tolerance_grows_with_k_and_names_bad_arguments():
    small, large = draw("fp32", 1024, 0), draw("fp32", 4096, 0)
    small_tol = numerics.Tolerance.for_gemm("fp32", 1024, small.ref, small.scale)
    large_tol = numerics.Tolerance.for_gemm("fp32", 4096, large.ref, large.scale)
    # u sqrt(K) times ||s|| / ||ref|| (itself about sqrt(K)): 4x from 1024 to 4096
    assert large_tol.norm_rel == pytest.approx(4 * small_tol.norm_rel, rel=0.1)
    assert large_tol.norm_rel < 1e-4
    with pytest.raises(HarnessError, match="no tolerance for precision 'fp8'"):
        numerics.Tolerance.for_gemm("fp8", 16, small.ref, small.scale)
    with pytest.raises(HarnessError, match="no tolerance for C type 'fp8'"):
        numerics.Tolerance.for_gemm("fp32", 16, small.ref, small.scale, "fp8")


def test_error_scale_is_alpha_abs_product_plus_beta_abs_c():
    _, a64, _, b64 = operands_of(5, 6, 7, "bf16")
    c64 = np.linspace(-1, 1, 30).reshape(5, 6)
    scale = numerics.error_scale(a64, b64, -0.5, 2.0, c64)
    assert scale.dtype == np.float32
    np.testing.assert_allclose(scale, 0.5 * np.abs(a64) @ np.abs(b64) + 2.0 * np.abs(c64),
                               rtol=1e-6)
    ref = numerics.reference(a64, b64, -0.5, 2.0, c64)
    assert (np.abs(ref) <= scale * (1 + 1e-6)).all()
    np.testing.assert_allclose(numerics.error_scale(a64, b64, 1.0, 0.0, None),
                               np.abs(a64) @ np.abs(b64), rtol=1e-6)


def test_half_ulp_of_each_c_type():
    x = np.array([1.0, 1.5, 0.75, 3.0, 1e-9, 0.0])
    assert list(numerics.half_ulp(x, "fp32")) == [0.0] * 6
    # bf16 keeps 8 significant bits: spacing 2^-7 in [1, 2), 2^-8 in [0.5, 1)
    assert list(numerics.half_ulp(x, "bf16")[:4]) == [2.0**-8, 2.0**-8, 2.0**-9, 2.0**-7]
    # fp16 keeps 11: spacing 2^-10 in [1, 2); subnormals stop at 2^-24
    assert list(numerics.half_ulp(x, "fp16")) == [2.0**-11, 2.0**-11, 2.0**-12, 2.0**-10,
                                                   2.0**-25, 0.0]


# --- findings, references and operands -------------------------------------------------------

def test_float32_product_passes_and_exact_errors_fail():
    case = draw("fp32", 257, 0, m=65, n=33)
    out = fp32_blas(case.a, case.b)
    ok = check(case, out)
    assert ok.passed and ok.rel_err_norm < 1e-6 and ok.message == "ok"

    wrong = out.copy()
    wrong[3, 7] += 0.01
    bad = check(case, wrong)
    assert not bad.passed and bad.bad_elements == 1
    assert "row 3, col 7" in bad.message and "bound +-" in bad.message


def test_nan_and_inf_never_pass():
    case = draw("fp32", 8, 0, m=8, n=8)
    out = case.ref.astype(np.float32)
    out[5, 2] = np.nan
    result = check(case, out)
    assert not result.passed and result.nan_elements == 1 and math.isinf(result.rel_err_norm)
    assert result.finding == "non-finite" and "row 5, col 2" in result.message
    out[5, 2] = np.inf
    assert not check(case, out).passed


def test_unwritten_poison_is_caught():
    ref = np.ones((4, 4))
    poison = np.full((4, 4), np.uint32(numerics.NAN_WORD)).view(np.float32)
    assert np.isnan(poison).all()
    assert not comparison.compare(poison, ref, "fp32", scale=np.full((4, 4), 4.0, np.float32),
                                  k=4, seed=0, alpha=1, beta=0).passed


def test_unwritten_sentinel_is_named():
    case = draw("fp16", 64, 0, m=32, n=32)
    out = fp32_blas(case.a, case.b)
    sentinel = np.full((32, 32), np.uint32(numerics.SENTINEL["fp32"])).view(np.float32)
    out[20:, :] = sentinel[20:, :]
    result = check(case, out, initial=sentinel)
    assert result.finding == "unwritten" and result.unwritten_elements == 12 * 32
    assert "rows 20..31" in result.message


@pytest.mark.parametrize("c_type", ("fp32", "bf16"))
def test_ignoring_beta_or_alpha_is_named(c_type):
    case = draw("bf16", 300, 3, c_type=c_type, alpha=0.75, beta=-0.5)
    acc = fp32_blas(case.a, case.b)
    alpha, beta = np.float32(case.alpha), np.float32(case.beta)
    no_beta = check(case, alpha * acc, c_type)
    assert no_beta.finding == "ignores beta" and "beta = -0.5" in no_beta.message
    no_alpha = check(case, acc + beta * case.c, c_type)
    assert no_alpha.finding == "ignores alpha" and "alpha = 0.75" in no_alpha.message
    twice = check(case, alpha * acc + 2 * beta * case.c, c_type)
    assert twice.finding == "wrong values" and not twice.passed


def truncate_to_tf32(x):
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def test_tf32_operands_are_stored_exactly_and_fp32_ones_rounded_to_tf32_fail():
    a, a64, b, b64 = operands_of(64, 64, 512, "tf32")
    assert a.dtype == np.float32 and not (a.view(np.uint32) & 0x1FFF).any()
    assert np.count_nonzero(a) == a.size
    # a TF32 tensor core truncates its inputs to TF32: a no-op on TF32 operands, so its
    # products are exact and only its accumulation is judged
    case = draw("tf32", 512, 0, m=64, n=64)
    assert check(case, truncate_to_tf32(case.a) @ truncate_to_tf32(case.b)).passed
    fp32 = draw("fp32", 512, 0, m=64, n=64)
    assert not check(fp32, truncate_to_tf32(fp32.a) @ truncate_to_tf32(fp32.b)).passed


def test_tf32_rounds_to_nearest_even():
    x = np.array([1.0, 1.0 + 2**-11, 1.0 + 3 * 2**-11, -2.5, 1.0 + 2**-12, 1.0 + 2**-10],
                 dtype=np.float32)
    # 1 + 2^-11 is a tie between 1 and 1 + 2^-10: the even mantissa (1.0) wins
    assert list(numerics.tf32_round(x)) == [1.0, 1.0, 1.0 + 2**-9, -2.5, 1.0, 1.0 + 2**-10]


def test_beta_path_reference():
    _, a64, _, b64 = operands_of(4, 5, 6)
    c = np.arange(20, dtype=np.float64).reshape(4, 5)
    ref = numerics.reference(a64, b64, 0.5, -2.0, c)
    assert np.allclose(ref, 0.5 * (a64 @ b64) - 2.0 * c)


def test_operands_reference_gives_the_scale_and_caches_large_sizes(monkeypatch):
    monkeypatch.setattr(operands, "_REFERENCES", {})
    _, a64, _, b64 = operands_of(8, 8, 4)
    small = SimpleNamespace(m=8, n=8, a64=a64, b64=b64, c64=None, _refs={})
    ref, scale = operands.reference(small, ("small",), 1.0, 0.0)
    assert ref.shape == scale.shape == (8, 8) and not operands._REFERENCES
    assert operands.reference(small, ("small",), 1.0, 0.0)[0] is ref  # kept with its operands
    assert operands.reference(small, ("small",), 2.0, 0.0)[0] is not ref
    _, a64, _, b64 = operands_of(1024, 1024, 2)
    large = SimpleNamespace(m=1024, n=1024, a64=a64, b64=b64, c64=None)
    first = operands.reference(large, ("large",), 1.0, 0.0)
    again = operands.reference(large, ("large",), 1.0, 0.0)
    assert again[0] is first[0] and again[1] is first[1]
    np.testing.assert_allclose(first[1], np.abs(a64) @ np.abs(b64), rtol=1e-6)


def test_bf16_rounds_to_nearest_even():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -2.5, 1.0 + 2**-9], dtype=np.float32)
    back = numerics.bf16_to_float(numerics.bf16_bits(x))
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even mantissa (1.0) wins; 1 + 3*2^-8 rounds up
    assert list(back) == [1.0, 1.0, 1.0 + 2**-6, -2.5, 1.0]


def test_fresh_inputs_differ_by_seed():
    a0 = operands_of(16, 16, 16, seed=0)[0]
    a1 = operands_of(16, 16, 16, seed=1)[0]
    assert not np.array_equal(a0, a1) and np.count_nonzero(a0) == a0.size


# --- accuracy at depth: FP32's own error as the yardstick (issue 33 item 5) -----------------

def _sequential_fp32(a64, b64):
    """An FP32 loop, one FMA per k step in order: what a SIMT kernel does per output."""
    acc = np.zeros((a64.shape[0], b64.shape[1]), np.float32)
    for k in range(a64.shape[1]):
        acc = (acc.astype(np.float64) + np.outer(a64[:, k], b64[k, :])).astype(np.float32)
    return acc


def _bf16(x):
    return numerics.bf16_to_float(numerics.bf16_bits(x)).astype(np.float64)


def _bf16x3(a64, b64):
    """Three BF16 products per FP32 one (hi hi + hi lo + lo hi), summed exactly: only the
    split's own error."""
    ah, bh = _bf16(a64), _bf16(b64)
    al, bl = _bf16(a64 - ah), _bf16(b64 - bh)
    return (ah @ bh + ah @ bl + al @ bh).astype(np.float32)


def _deep(k, seed, m=64, n=64):
    _, a64, _, b64 = operands_of(m, n, k, "fp32", seed)
    ref = a64 @ b64
    scale = numerics.error_scale(a64, b64, 1.0, 0.0, None)
    return a64, b64, ref, scale


@pytest.mark.parametrize("k", [512, 2048, 4096, 8192])
def test_the_fp32_yardstick_is_what_an_fp32_loop_gives(k):
    a64, b64, ref, _ = _deep(k, seed=k)
    err = np.linalg.norm(_sequential_fp32(a64, b64) - ref)
    assert 0.9 < err / numerics.fp32_yardstick(a64, b64) < 1.1


@pytest.mark.parametrize("k", [2048, 4096])
def test_fp32_passes_and_bf16x3_fails_the_deep_bound(k):
    """BF16x3 is within the K-deep bound (it passed as FP32 before issue 33) but several
    times FP32's own error: the deep bound names it, an FP32 loop passes it."""
    a64, b64, ref, scale = _deep(k, seed=7)
    stick = numerics.fp32_yardstick(a64, b64)

    def judged(out):
        return comparison.compare(out, ref, "fp32", scale=scale, k=k, seed=0, alpha=1.0,
                                  beta=0.0, yardstick=stick,
                                  max_multiple=numerics.FP32_MULTIPLE_MAX)

    right = judged(_sequential_fp32(a64, b64))
    assert right.passed and 0.8 < right.fp32_multiple < 1.2, right.message
    split = judged(_bf16x3(a64, b64))
    assert not split.passed and split.finding == "less accurate than FP32", split.message
    assert split.fp32_multiple > 3.0
    assert re.search(r"its error norm is \d+\.\dx what FP32 accumulation gives", split.message)
    # the same output without the deep bound passes: what it passed as before
    assert comparison.compare(_bf16x3(a64, b64), ref, "fp32", scale=scale, k=k, seed=0,
                              alpha=1.0, beta=0.0).passed


def test_a_declared_split_is_held_to_its_own_arithmetic():
    """An FP32 kernel that declares fp32_via = bf16x3 passes with the input term of its
    scheme; one that declares bf16x3 but computes in plain BF16 fails."""
    k = 2048
    a64, b64, ref, scale = _deep(k, seed=9)
    unit = numerics.FP32_VIA_UNIT["bf16x3"]
    norm = numerics.product_norm(a64, b64)

    def judged(out):
        return comparison.compare(out, ref, "fp32", scale=scale, k=k, seed=0, alpha=1.0,
                                  beta=0.0, input_unit=unit, input_norm=norm)

    assert judged(_bf16x3(a64, b64)).passed
    plain = (_bf16(a64) @ _bf16(b64)).astype(np.float32)
    assert not judged(plain).passed


def test_wide_exponents_overflow_a_narrower_type():
    """A TF32 kernel that converts its inputs to FP16 is exact on TF32 values in [-1, 1) but
    overflows (or flushes) on wide exponents; one that truncates unrounded FP32 values to
    TF32, as the hardware does, passes with the TF32 input term."""
    rng = np.random.default_rng(3)
    a, a64 = numerics.random_operand(rng, (M, 61), "tf32", "wide")
    b, b64 = numerics.random_operand(rng, (61, N), "tf32", "wide")
    assert np.abs(np.log2(np.abs(a64[a64 != 0]))).max() > 16  # past FP16's range
    assert not np.array_equal(numerics.tf32_round(a), a)  # unrounded FP32 values
    ref = a64 @ b64
    scale = numerics.error_scale(a64, b64, 1.0, 0.0, None)
    unit, norm = numerics.TF32_UNROUNDED_UNIT, numerics.product_norm(a64, b64)

    def judged(out):
        return comparison.compare(out, ref, "tf32", scale=scale, k=61, seed=0, alpha=1.0,
                                  beta=0.0, input_unit=unit, input_norm=norm)

    def truncated(x):
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)

    assert judged((truncated(a) @ truncated(b)).astype(np.float32)).passed
    with np.errstate(over="ignore", invalid="ignore"):
        via_fp16 = to_fp16(a).astype(np.float64) @ to_fp16(b).astype(np.float64)
    assert not judged(via_fp16.astype(np.float32)).passed


def test_uniform_tf32_inputs_hide_fp16():
    """Why the wide draw exists: TF32 values in [-1, 1) are FP16 values too (bar the tiny)."""
    rng = np.random.default_rng(4)
    a, _ = numerics.random_operand(rng, (64, 64), "tf32")
    exact = np.abs(a) > 2.0**-14
    assert np.array_equal(to_fp16(a)[exact], a[exact])


def test_draws_are_named():
    with pytest.raises(HarnessError, match="uniform or wide, not 'gaussian'"):
        numerics.random_operand(np.random.default_rng(0), (2, 2), "fp32", "gaussian")


# --- the quick verdict (kinds/gemm/chunked.py) agrees with the whole-array path ------------------

@pytest.mark.parametrize("c_type", numerics.C_TYPES)
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_quick_pass_is_the_whole_paths_result(monkeypatch, precision, c_type):
    """Over several row blocks (a C of 600 x 520 in blocks of 64 rows): a right result passes
    with the figures the whole-array path gives; a wrong, an unwritten and a NaN element each
    leave the verdict to the whole path, which names them."""
    from harness.kinds.gemm import chunked
    monkeypatch.setattr(chunked, "BLOCK_ELEMENTS", 64 * 520)
    case = draw(precision, 512, 7, m=600, n=520, c_type=c_type, alpha=0.75, beta=-0.5)
    acc = fp32_sequential(case.a, case.b)
    out32 = np.float32(case.alpha) * acc + np.float32(case.beta) * case.c
    initial = numerics.stored(case.c, c_type)
    def compared(out32, compare):
        return compare(numerics.stored(out32, c_type), case.ref, precision, scale=case.scale,
                       k=512, seed=0, alpha=0.75, beta=-0.5, c_type=c_type, initial=initial,
                       c64=case.c64)

    quick, whole = compared(out32, chunked.compare), compared(out32, comparison.compare)
    assert quick.passed and whole.passed
    for field in ("rel_err_norm", "max_abs_err", "tolerance_norm", "fp32_multiple"):
        a, b = getattr(quick, field), getattr(whole, field)
        assert a == pytest.approx(b, rel=1e-6, nan_ok=True), field
    assert (quick.bad_elements, quick.nan_elements, quick.message) == (0, 0, "ok")
    for where, value in (((599, 3), out32[599, 3] + 1.0), ((5, 519), np.nan)):
        bad = out32.copy()
        bad[where] = value
        assert chunked.passed_quickly(
            numerics.stored(bad, c_type), case.ref, precision, case.scale, 512, 0, 0.75, -0.5,
            c_type, initial, None, None, 0.0, 0.0) is None
        assert not compared(bad, chunked.compare).passed
    unwritten = out32.copy()
    unwritten[300:310, :] = case.c[300:310, :]  # C's start values left in ten rows
    result = compared(unwritten, chunked.compare)
    assert result.finding in ("unwritten", "ignores alpha", "wrong values")
    assert not result.passed


@pytest.mark.parametrize("c_type, bits, least", [("bf16", 8, 2.0**-133), ("fp16", 11, 2.0**-24)])
def test_half_ulp_is_half_the_spacing_frexp_gives(c_type, bits, least):
    """half_ulp reads 2^floor(log2 x) from x's exponent bits (a quarter of frexp's time on the
    8M outputs of a check): the same values as frexp's exponent gives, over magnitudes from
    subnormal to huge, zero, infinity and NaN, in arrays that are not contiguous."""
    from harness.kinds.gemm.numerics import half_ulp

    rng = np.random.default_rng(3)
    x = np.abs(rng.standard_normal(200_000)) * 10.0 ** rng.integers(-320, 300, 200_000)
    x[:8] = [0.0, np.inf, np.nan, 1e-310, 5e-324, 1.0, least, 65504.0]
    for values in (x, x[::3], x.reshape(400, 500)[:, ::7]):
        _, exponent = np.frexp(values)
        want = np.where(values > 0, 0.5 * np.maximum(np.ldexp(1.0, exponent - bits), least), 0.0)
        assert np.array_equal(half_ulp(values, c_type), want, equal_nan=True)
    assert half_ulp(np.float64(3.0), c_type) == 2.0 ** (1 - bits)
