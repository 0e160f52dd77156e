"""Issue 57 ("no tell, no loose bar"), items 3-8 and 10, on the CPU: each hole's simulated
wrong outputs fail the verdict functions the harness uses, and right ones pass
(notes/verification.md, "Every kept output at the check's bar" and the sections after it).
The GPU fixtures of tests/kernels/loose_bar build offline here; test_loose_bar_gpu.py runs
them."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
from conftest import FIXTURE_KERNELS

from harness.kinds.gemm import capture, numerics

FP32_SPEC = types.SimpleNamespace(precision="fp32", c_type="fp32", fp32_via="")


def _bf16(x):
    return numerics.bf16_to_float(numerics.bf16_bits(x)).astype(np.float64)


def bf16x3(a64, b64):
    """Three BF16 products per FP32 one (hi hi + hi lo + lo hi), summed exactly."""
    ah, bh = _bf16(a64), _bf16(b64)
    al, bl = _bf16(a64 - ah), _bf16(b64 - bh)
    return (ah @ bh + ah @ bl + al @ bh).astype(np.float32)


def sequential_fp32(a64, b64):
    """An FP32 loop, one FMA per k step in order."""
    acc = np.zeros((a64.shape[0], b64.shape[1]), np.float32)
    for k in range(a64.shape[1]):
        acc = (acc.astype(np.float64) + np.outer(a64[:, k], b64[k, :])).astype(np.float32)
    return acc


def device_grid(rng, shape):
    """What the timed draw gives an FP32 operand: multiples of 2^-23 in [-1, 1)."""
    return rng.integers(-(1 << 23), 1 << 23, size=shape).astype(np.float64) * 2.0**-23


# --- item 3: every kept timed output at the timed size's bar -------------------------------

@pytest.mark.parametrize("k", [256, 1024, 4096])
def test_a_kept_block_of_bf16x3_fails_as_less_accurate_than_fp32(k):
    """Before issue 57 a kept block met only the K-deep bound, which BF16x3 passes; now it is
    held to 2x FP32's error as the timed size's check is, and an FP32 loop passes."""
    rng = np.random.default_rng(k)
    a, b = device_grid(rng, (64, k)), device_grid(rng, (k, 64))
    right = capture.kept_compare(FP32_SPEC, sequential_fp32(a, b), a, b, k, seed=1)
    assert right.passed and right.fp32_multiple < 1.5, right.message
    split = capture.kept_compare(FP32_SPEC, bf16x3(a, b), a, b, k, seed=1)
    assert not split.passed and split.finding == "less accurate than FP32", split.message
    # what it passed as before: the K-deep bound alone
    loose = capture.kept_compare(types.SimpleNamespace(precision="fp32", c_type="fp32",
                                                       fp32_via="bf16x3"),
                                 bf16x3(a, b), a, b, k, seed=1)
    assert loose.passed, loose.message



# --- items 8 and 10: softmax, every row, a fast exponential, a normaliser a little off ---------

SOFTMAX_BATTERY = [(1, 1), (3, 7), (5, 1000), (17, 4099), (2, 32768)]


def softmax_kernel(x32, exp_error=0.0, rng=None, order="sequential", off=0.0, out="f32"):
    """A softmax as a kernel computes it in FP32: the max, exp(x - max) with a relative error
    uniform within +-``exp_error`` (``__expf``: 2^-21), the sum in ``order``, y = e / s
    (times 1 + ``off``: a normaliser off by that), rounded to ``out``."""
    m = x32.max(axis=1, keepdims=True)
    arg = (x32 - m).astype(np.float32)
    e = np.exp(arg.astype(np.float64))
    if exp_error:
        e = e * (1.0 + rng.uniform(-exp_error, exp_error, size=e.shape))
    e = e.astype(np.float32)
    if order == "sequential":
        s = np.cumsum(e, axis=1, dtype=np.float32)[:, -1:]
    else:  # numpy's pairwise float32 sum
        s = e.sum(axis=1, keepdims=True, dtype=np.float32)
    y = (e / (s * np.float32(1.0 + off))).astype(np.float32)
    if out == "bf16":
        return numerics.bf16_bits(y)
    return y


def judged_softmax(x32, y, out="f32", into="f32"):
    from harness.kinds.buffers.references import expected, judge

    spec = types.SimpleNamespace(reference="softmax",
                                 inputs=(types.SimpleNamespace(name="x", dtype=into),),
                                 outputs=(types.SimpleNamespace(name="y", dtype=out),))
    want = expected(spec, {"x": x32.astype(np.float64)}, {})["y"]
    return judge(y, out, want)


@pytest.mark.parametrize("shape", SOFTMAX_BATTERY, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_fast_exponential_softmax_passes_every_draw(shape):
    """Item 10: before issue 57, 8 of 200 draws at 3 x 7 failed (worst 1.08x the bound);
    with the exponential's error in the bound (softmax_bound), none of 200 draws at any
    battery shape, declared range or wide, f32 or bf16 out, nor the worst-signed error."""
    rows, cols = shape
    draws = 200 if rows * cols < 10**5 else 12
    rng = np.random.default_rng(rows * 7919 + cols)
    worst = {"f32": 0.0, "bf16": 0.0}
    for i in range(draws):
        span = 128.0 if i % 2 else 1.0  # the battery's wide draw too
        x32 = rng.uniform(-span, span, size=shape).astype(np.float32)
        for out in ("f32", "bf16"):
            got = judged_softmax(x32, softmax_kernel(x32, 2.0**-21, rng, out=out), out)
            assert got.ok, (i, out, got.detail)
            worst[out] = max(worst[out], got.worst)
    # a BF16 output's rounding alone reaches its u_out term: up to 1x, never more
    assert worst["f32"] < 0.75 and worst["bf16"] <= 1.0, worst


def test_the_worst_signed_exponential_error_stays_inside():
    """Every exponential off by 2^-21, the row's largest up and the rest down: the element
    bound's 2 u_exp term is what that costs."""
    x32 = np.random.default_rng(5).uniform(-1, 1, size=(3, 7)).astype(np.float32)
    m = x32.max(axis=1, keepdims=True)
    e = np.exp((x32 - m).astype(np.float64))
    e *= np.where(x32 == m, 1 + 2.0**-21, 1 - 2.0**-21)
    e32 = e.astype(np.float32)
    y = (e32 / np.cumsum(e32, axis=1, dtype=np.float32)[:, -1:]).astype(np.float32)
    got = judged_softmax(x32, y)
    assert got.ok and got.worst > 0.2, got


@pytest.mark.parametrize("cols", [16384, 32768])
def test_a_normaliser_off_by_1e5_fails_and_right_kernels_pass(cols):
    """Item 8: the element bound (2 sqrt(COLS) u32 = 1.5e-5 and 2.2e-5 here) admits a row
    scaled by 1 - 1e-5; the rows' outputs, which must add up to one, do not. Right kernels,
    a sequential or a pairwise sum, a fast exponential, an f32 or a bf16 output, pass. 48
    rows here; the timed sizes have 4096 or more."""
    rng = np.random.default_rng(cols)
    x32 = rng.uniform(-1, 1, size=(48, cols)).astype(np.float32)
    for order in ("sequential", "pairwise"):
        for out in ("f32", "bf16"):
            y = softmax_kernel(x32, 2.0**-21, rng, order, out=out)
            got = judged_softmax(x32, y, out)
            assert got.ok, (order, out, got.detail)
    for off in (1e-5, -1e-5):
        got = judged_softmax(x32, softmax_kernel(x32, 0.0, rng, off=off))
        assert got.outside == 0 and got.misnormalised, got  # inside every element's bound
        assert not got.ok and "misnormalised: over 48 rows" in got.detail, got.detail


def bf16_drawn(rng, shape):
    """Inputs as the harness draws a BF16 buffer (draw.py): uniform in [-1, 1) plus a shift
    in [0, 1/2), rounded to BF16 (as float32)."""
    x = (rng.uniform(-1, 1, size=shape) + rng.uniform(0, 0.5)).astype(np.float32)
    return numerics.bf16_to_float(numerics.bf16_bits(x)).astype(np.float32)


@pytest.mark.parametrize("shape", [(2, 32768), (17, 4099), (64, 32768), (512, 4096)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_bf16_softmax_on_bf16_inputs_passes_every_draw(shape):
    """BF16 inputs repeat (a few hundred values a row, each ~50 times at 32K columns), and
    equal inputs round alike: the rows' sigma groups them. Summed element by element it was
    7x too small, and softmax_04_pipelined_bf16 failed on the H100 at 2 x 32768 (+0.00014
    against +-0.000109, reports/h100/softmax-bf16-17bb56b.log); here that model fails some
    of these draws and the grouped one none."""
    from harness.kinds.buffers import softmax_bound

    rng = np.random.default_rng(shape[0] * 31 + shape[1])
    draws = 60 if shape[0] * shape[1] <= 1 << 17 else 8
    ratios, ungrouped = [], []
    for _ in range(draws):
        x32 = bf16_drawn(rng, shape)
        y = softmax_kernel(x32, 2.0**-21, rng, "pairwise", out="bf16")
        got = judged_softmax(x32, y, "bf16", "bf16")
        assert got.ok, got.detail
        x64 = x32.astype(np.float64)
        e = np.exp(x64 - x64.max(axis=1, keepdims=True))
        r = e / e.sum(axis=1, keepdims=True)
        excess = float(softmax_bound.row_excess(numerics.bf16_to_float(y), r, "bf16").sum())
        ungrouped.append(softmax_bound.rows_verdict(
            excess, float(softmax_bound.row_variance(r, 2.0**-8).sum()), shape[0])[1])
        ratios.append(softmax_bound.rows_verdict(
            excess, float(softmax_bound.row_variance(
                r, 2.0**-8, softmax_bound.input_keys(x64, "bf16")).sum()), shape[0])[1])
    assert max(ratios) < 0.8, max(ratios)
    if shape[1] >= 16384:  # ~50 repeats a value: the element-wise sigma is far too small
        assert max(ungrouped) > 2.0 * max(ratios), (max(ungrouped), max(ratios))


def test_rounding_to_nearest_is_taken_out_of_the_rows_excess():
    """A perfectly rounded BF16 softmax of the harness's draws sums to about 1 - 3e-6 a row:
    to nearest, its outputs (density like 1/y) round down more often than up. The rows' check
    held that excess as the kernel's and failed softmax_03_cached_bf16 and 04_pipelined_bf16
    at 131072 x 1024 on the H100 (-3.8e-6 and -4.2e-6 against +-3.7e-6, 67f770d); over the
    reference rounded to BF16 the same outputs are a few 1e-7 off, and a normaliser 1e-5 off
    still fails."""
    from harness.kinds.buffers import softmax_bound

    rng = np.random.default_rng(5)
    rows = 16384
    x32 = bf16_drawn(rng, (rows, 1024))
    y = numerics.bf16_to_float(softmax_kernel(x32, 2.0**-21, rng, "pairwise", out="bf16"))
    x64 = x32.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    r = e / e.sum(axis=1, keepdims=True)
    unrounded = float((y.sum(axis=1) - r.sum(axis=1)).mean())
    assert unrounded < -2e-6, unrounded  # the bias of rounding to nearest itself
    ideal = float((softmax_bound.rounded(r, "bf16").sum(axis=1) - 1.0).mean())
    assert abs(ideal - unrounded) < 1e-6, (ideal, unrounded)  # the reference's rounding has it
    excess = float(softmax_bound.row_excess(y, r, "bf16").mean())
    assert abs(excess) < 1e-6, excess
    variance = float(softmax_bound.row_variance(
        r, 2.0**-8, softmax_bound.input_keys(x64, "bf16")).sum())
    assert softmax_bound.rows_verdict(excess * rows, variance, rows)[1] < 0.5
    off = judged_softmax(x32, softmax_kernel(x32, 0.0, rng, off=1e-5, out="bf16"), "bf16",
                         "bf16")
    assert not off.ok and "reference rounded to their type" in off.misnormalised, off


def test_a_bf16_softmax_misnormalised_on_bf16_inputs_still_fails():
    """Grouped, a BF16 row's sigma is larger (a BF16 output keeps 8 bits: a normaliser 1e-5
    off shows from about 6K rows of 32K, the timed size has 8192); 4e-5 fails at 512 x 32768,
    either way."""
    rng = np.random.default_rng(3)
    x32 = bf16_drawn(rng, (512, 32768))
    for off in (4e-5, -4e-5):
        got = judged_softmax(x32, softmax_kernel(x32, 0.0, rng, off=off, out="bf16"), "bf16",
                             "bf16")
        assert not got.ok and (got.outside or got.misnormalised), got


def _fake_softmax(rows, cols, out="f32"):
    spec = types.SimpleNamespace(reference="softmax",
                                 inputs=(types.SimpleNamespace(name="x", dtype="f32"),),
                                 outputs=(types.SimpleNamespace(name="y", dtype=out),))
    return types.SimpleNamespace(spec=spec, shapes={"x": (rows, cols), "y": (rows, cols)})


def test_the_timed_check_reads_every_row():
    """Item 8: a NaN or the sentinel in any one row fails the timed and kept checks, which
    read 32 random rows of thousands before; a right output passes; one off by 1e-5 fails."""
    from harness.kinds.buffers import timed
    from harness.kinds.buffers.references import SENTINEL

    rows, cols = 300, 4099
    rng = np.random.default_rng(8)
    x32 = rng.uniform(-1, 1, size=(rows, cols)).astype(np.float32)
    inst = _fake_softmax(rows, cols)
    right = softmax_kernel(x32)
    assert timed._whole_softmax(inst, x32, right.copy()).ok
    for row in (0, 137, rows - 1):
        for bad, what in ((np.float32(np.nan), "not finite"),
                          (np.uint32(SENTINEL["f32"][0]).view(np.float32), "unwritten")):
            y = right.copy()
            y[row, 5] = bad
            got = timed._whole_softmax(inst, x32, y)
            assert not got.ok and timed._story(got).startswith(what), timed._story(got)
            assert got.detail.startswith(f"row {row}:"), got.detail
    assert not timed._whole_softmax(inst, x32, softmax_kernel(x32, off=1e-5)).ok
    # at 16K columns 1e-5 hides in every element's bound: the rows, added over the blocks
    # of rows (64 rows a block here), find it
    x32 = rng.uniform(-1, 1, size=(72, 16384)).astype(np.float32)
    inst = _fake_softmax(72, 16384)
    assert timed._whole_softmax(inst, x32, softmax_kernel(x32, 2.0**-21, rng)).ok
    off = timed._whole_softmax(inst, x32, softmax_kernel(x32, off=1e-5))
    assert off.outside == 0 and "misnormalised: over 72 rows" in timed._story(off), off


# --- the GPU fixtures build offline ------------------------------------------------------------

@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))


LOOSE_FILES = sorted((FIXTURE_KERNELS / "loose_bar").glob("*.cu"))


@pytest.mark.parametrize("path", LOOSE_FILES, ids=lambda p: p.stem)
def test_the_fixture_compiles_for_sm_90_without_spills(path, private_cache):
    from harness.compiler.compile import compile_kernel
    from harness.kernels.registry import kernels_in
    from harness.kernels.spec import read_spec

    spec = read_spec(path)
    assert "issue 57" in spec.summary
    for kernel in kernels_in(spec):
        compiled = compile_kernel(kernel, "sm_90")
        assert compiled.cubin[:4] == b"\x7fELF"
        assert compiled.resources.spill_store_bytes == 0, compiled.resources


def test_the_fixtures_are_there():
    assert {p.stem for p in LOOSE_FILES} >= {"bf16x3_when_timed", "softmax_sum_off",
                                             "softmax_fast_exp", "sum_skips_a_thousandth",
                                             "bf16x3_deep_k", "softmax_bytes_inflated"}


# --- item 6: a sum bound that sampling cannot meet --------------------------------------------

def _sum_judged(x32, out):
    from harness.kinds.buffers.references import expected, judge

    spec = types.SimpleNamespace(reference="sum",
                                 outputs=(types.SimpleNamespace(name="out", dtype="f32"),))
    want = expected(spec, {"x": x32.astype(np.float64)}, {})["out"]
    return judge(np.array([out], np.float32), "f32", want)


@pytest.mark.parametrize("n", [7, 4099, 1000003, 1 << 22])
def test_right_sums_in_any_order_pass_and_a_skipping_one_fails(n):
    """Sequential (one chain: the atomics into one address), pairwise, shuffled and blocked
    FP32 sums pass with room (at most 0.3 of the bound seen up to 2^24); skipping 0.1% of the
    elements fails from n = 4099 on, whatever the draw's mean."""
    rng = np.random.default_rng(n)
    for mean in (0.0, 0.1, 0.5):
        x32 = (rng.uniform(-1, 1, n) + mean).astype(np.float32)
        orders = {"sequential": np.cumsum(x32, dtype=np.float32)[-1],
                  "pairwise": x32.sum(dtype=np.float32),
                  "shuffled": np.cumsum(x32[rng.permutation(n)], dtype=np.float32)[-1],
                  "blocked": np.cumsum(np.array([b.sum(dtype=np.float32) for b in
                                                 np.array_split(x32, 1056)]),
                                       dtype=np.float32)[-1]}
        for order, got in orders.items():
            judged = _sum_judged(x32, got)
            assert judged.ok and judged.worst < 0.5, (order, mean, judged)
        if n >= 4000:
            skipped = x32[:n - n // 1000].astype(np.float64).sum()
            assert not _sum_judged(x32, skipped).ok, mean


@pytest.mark.parametrize("log_n", [24, 26, 28, 30])
def test_skipping_a_thousandth_fails_at_2_24_to_2_30(log_n):
    """Analytically, from the draw's statistics (uniform [-1, 1) shifted by ``mean``): a
    kernel skipping 0.1% errs by f r + sqrt(f n m2) z; the bound sits under its drift term
    (mean > 0) or under a twentieth of its random term (mean 0): it fails in more than 96%
    of draws. Before issue 57 (2 sqrt(n) u32 sum|x|) it passed on a draw of mean 0."""
    from harness.kinds.buffers import sum_bound

    n, f = 1 << log_n, 1e-3
    for mean in (0.0, 0.1, 0.5):
        m2, var = mean**2 + 1.0 / 3.0, 1.0 / 3.0
        r = n * mean + math.sqrt(n * var)  # a draw one deviation off its mean
        b = sum_bound.of_statistics(n, r, m2, 1.0 + mean, n * (0.5 + mean**2 / 2), 2.0**-24)
        drift, spread = f * n * mean, math.sqrt(f * n * var)
        if mean:
            assert drift > 1.5 * b + 3 * spread, (mean, drift, b)
        else:
            assert b < 0.05 * spread, (b, spread)  # P(|z| < 0.05) < 4%
        old = 2.0**-24 * abs(r) + 2 * math.sqrt(n) * 2.0**-24 * n * (0.5 + mean**2 / 2)
        assert mean or 3 * spread < old  # what passed before: a draw of mean 0 at any n


@pytest.mark.parametrize("log_n", [24, 28, 30])
def test_a_sampling_sum_fails_on_a_draw_of_mean_zero(log_n):
    """A kernel reading one 128-byte line in 16 and scaling up errs by sqrt(15 n m2) z:
    on a draw of mean zero hundreds of bounds. What it cannot see (notes): with a large mean
    the drift term of one long FP32 chain, which a right kernel may have, admits it from
    about 2^26."""
    from harness.kinds.buffers import sum_bound

    n = 1 << log_n
    spread = math.sqrt(15 * n / 3.0)
    b = sum_bound.of_statistics(n, math.sqrt(n / 3.0), 1 / 3.0, 1.0, n / 2.0, 2.0**-24)
    assert spread > 100 * b
    mean = 0.5
    b = sum_bound.of_statistics(n, n * mean, mean**2 + 1 / 3.0, 1.5, n * 0.625, 2.0**-24)
    assert (spread > 2 * b) == (log_n < 26)


# --- item 7: bytes derived from the buffers ------------------------------------------------------

def test_bytes_come_from_the_buffers_and_a_declared_figure_needs_its_reason():
    """Before issue 57 GB/s was the declared bytes over the time: 12 bytes an element for a
    softmax that moves 8 read 1.5x. Now the buffers' bytes (each input and output once) are
    the figure; a declared one that differs is an error, or used with its stated reason,
    which the report shows."""
    from dataclasses import replace

    from harness.errors import LaunchError
    from harness.kernels.spec import read_spec
    from harness.kinds.buffers import bytes_moved
    from harness.kinds.buffers.table import MEMORY_COLUMNS

    spec = read_spec(FIXTURE_KERNELS / "loose_bar" / "softmax_bytes_inflated.cu").buffers
    rows, cols = 4096, 32768
    nbytes = {"x": 4 * rows * cols, "y": 4 * rows * cols}
    moved = bytes_moved.derived(spec, nbytes)
    assert moved == 8 * rows * cols
    declared = int(spec.bytes({"ROWS": rows, "COLS": cols}))
    assert declared == 12 * rows * cols
    with pytest.raises(LaunchError, match=r"declares bytes = 1610612736, but its buffers "
                                          r"move 1073741824 .*bytes_reason"):
        bytes_moved.settle(spec, declared, moved, "softmax_bytes_inflated at 4096x32768")
    assert bytes_moved.settle(spec, moved, moved, "") == (moved, "buffers")
    said = replace(spec, bytes_reason="the row is read twice by design")
    got, source = bytes_moved.settle(said, declared, moved, "")
    assert got == declared and source.endswith("the row is read twice by design")
    column = next(c for c in MEMORY_COLUMNS if c.key == "bytes_source")
    row = types.SimpleNamespace(memory=types.SimpleNamespace(bytes_source=source))
    assert column.value(row) == source
    row.memory.bytes_source = "buffers"
    assert column.value(row) is None


def test_a_kernel_whose_declared_bytes_differ_fails_before_its_battery():
    """Every size of it ends in a launch error naming both figures (the battery would skip a
    size whose buffers cannot be made, as it does a constraint's)."""
    from harness.errors import LaunchError
    from harness.kernels.registry import kernels_in
    from harness.kernels.spec import read_spec
    from harness.kinds.buffers.measure import _declared_bytes

    loose = FIXTURE_KERNELS / "loose_bar"
    (kernel,) = kernels_in(read_spec(loose / "softmax_bytes_inflated.cu"))
    with pytest.raises(LaunchError, match=r"softmax_bytes_inflated at 8192x16384: the spec "
                                          r"declares bytes = 1610612736, but its buffers move"):
        _declared_bytes(kernel, 132)
    (right,) = kernels_in(read_spec(loose / "softmax_fast_exp.cu"))
    _declared_bytes(right, 132)


def test_bytes_reason_must_say_something():
    from harness.errors import SpecError
    from harness.kernels.spec import parse_spec

    text = (FIXTURE_KERNELS / "loose_bar" / "softmax_bytes_inflated.cu").read_text()
    text = text.replace('bytes = "3*4*ROWS*COLS"', 'bytes = "3*4*ROWS*COLS"\nbytes_reason = " "')
    with pytest.raises(SpecError, match="bytes_reason must say in words why"):
        parse_spec(text, FIXTURE_KERNELS / "k.cu")


# --- item 4: FP32 at every depth -----------------------------------------------------------------

def _f32_parts(parts_a, parts_b, pairs):
    """A tensor-core style scheme: each pair of parts multiplied with FP32 accumulation
    (float32 products), the partial products added in FP32."""
    acc = None
    for i, j in pairs:
        p = parts_a[i].astype(np.float32) @ parts_b[j].astype(np.float32)
        acc = p if acc is None else (acc + p).astype(np.float32)
    return acc


def _bf16x3_fp32_acc(a, b):
    ah, bh = _bf16(a), _bf16(b)
    return _f32_parts((ah, _bf16(a - ah)), (bh, _bf16(b - bh)), ((1, 0), (0, 1), (0, 0)))


def _splitk(a, b, slices=8):
    k = a.shape[1]
    step = k // slices
    return _f32_parts([a[:, i:i + step] for i in range(0, k, step)],
                      [b[i:i + step] for i in range(0, k, step)],
                      [(s, s) for s in range(slices)])


@pytest.mark.parametrize("k", [256, 2048, 16384])
def test_bf16x3_fails_at_every_depth_and_fp32_in_any_order_passes(k):
    """The 2x-FP32 multiple fades as 1/sqrt(K) (BF16x3 with FP32 accumulation reads about
    1.7x at 16384: a pass); regressed on BF16x3's own representation error
    (narrow_inputs.py) it reads 1 at every K, FP32 sums in any order 0 within a few
    deviations, far from the 0.5 and six deviations a failure needs."""
    from harness.kinds.gemm import narrow_inputs

    rng = np.random.default_rng(k + 1)
    a, b = device_grid(rng, (64, k)), device_grid(rng, (k, 64))
    ref = a @ b
    split = _bf16x3_fp32_acc(a, b)
    got = capture.kept_compare(FP32_SPEC, split, a, b, k, seed=2)
    assert not got.passed and got.finding == "less accurate than FP32", got.message
    if k == 16384:
        assert got.fp32_multiple < numerics.FP32_MULTIPLE_MAX  # what passed before
        assert "its error is bf16x3's" in got.message, got.message
    tf32 = _f32_parts([narrow_inputs._cut(a, 11, True)], [narrow_inputs._cut(b, 11, True)],
                      [(0, 0)])
    assert not capture.kept_compare(FP32_SPEC, tf32, a, b, k, seed=2).passed
    rights = {"split-k": _splitk(a, b), "blocked": (a.astype(np.float32)
                                                    @ b.astype(np.float32)),
              "pairwise": _splitk(a, b, 64)}
    if k <= 2048:
        rights["sequential"] = sequential_fp32(a, b)
    errors = {name: scheme(a, b) - ref for name, scheme in narrow_inputs.SCHEMES.items()}
    for order, out in rights.items():
        judged = capture.kept_compare(FP32_SPEC, out, a, b, k, seed=2)
        assert judged.passed, (order, judged.message)
        err = out.astype(np.float64) - ref
        for name, scheme_err in errors.items():
            beta, sigma = narrow_inputs.regress(err, scheme_err)
            # the verdict needs beta >= 0.5 at six deviations; at K = 16384 sigma is ~0.2
            # (the GPU host's BLAS read 0.146 +- 0.183 for tf32x3 on its blocked product)
            assert abs(beta) < 4 * sigma + 1e-3 and beta < 0.5, (order, name, beta, sigma)


def test_a_kept_tf32_output_is_held_to_its_schemes_bound():
    """An fp32_via = "tf32" kernel's kept timed output is judged with TF32's input rounding
    in the bound, as the size's own check judges it (the tf32_mma fixture failed "wrong when
    timed" on the H100 at d5da2d7: 2.6e-4 against an FP32 bound of 2.3e-5); a kernel that
    claims FP32 and rounds to TF32 still fails."""
    from harness.kinds.gemm import narrow_inputs

    rng = np.random.default_rng(4)
    k = 1024
    a, b = device_grid(rng, (64, k)), device_grid(rng, (k, 64))
    tf32 = _f32_parts([narrow_inputs._cut(a, 11, True)], [narrow_inputs._cut(b, 11, True)],
                      [(0, 0)])
    via = types.SimpleNamespace(precision="fp32", c_type="fp32", fp32_via="tf32")
    assert capture.kept_compare(via, tf32, a, b, k, seed=3).passed
    assert not capture.kept_compare(FP32_SPEC, tf32, a, b, k, seed=3).passed


def test_non_finite_outputs_from_inputs_past_fp16_are_named_narrower():
    """A TF32 kernel computing in FP16 overflows on the draws' 2^17-scaled elements: named for
    that, not as "non-finite: an overflow, or arithmetic on memory nothing wrote" (the
    fp16_as_tf32 fixture on the H100 at d5da2d7)."""
    from harness.kinds.gemm import checks
    from harness.kinds.gemm.numerics import CheckResult

    bad = CheckResult(False, 4, 4, 4, 1, 1.0, 0.0, float("nan"), float("nan"), 3, 3, 0.0,
                      "non-finite: 3 of 16 outputs are NaN/Inf", "non-finite")
    wide = types.SimpleNamespace(a64=np.array([1.0, 2.0**17]), b64=np.array([0.5]))
    named = checks._past_fp16(bad, "tf32", wide)
    assert named.finding == checks.NARROWER and "past FP16's 65504" in named.message
    narrow = types.SimpleNamespace(a64=np.array([1.0]), b64=np.array([0.5]))
    assert checks._past_fp16(bad, "tf32", narrow) is bad
    assert checks._past_fp16(bad, "bf16", wide) is bad
