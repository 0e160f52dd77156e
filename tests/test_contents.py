"""The operand contents drawn on the device are the ones the checks draw here: the device's C++
element functions, built for the host, against the numpy twin, bit for bit."""

import shutil
import subprocess

import numpy as np
import pytest

from harness.kinds.gemm import contents

MAIN = r"""
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
    if (argv[1][0] == 'g') {  // g seed salt content operand kind count stride
        const u32 seed = strtoul(argv[2], 0, 10), salt = strtoul(argv[3], 0, 10);
        const u64 content = strtoull(argv[4], 0, 10);
        const u32 operand = strtoul(argv[5], 0, 10), kind = strtoul(argv[6], 0, 10);
        const u32 count = strtoul(argv[7], 0, 10), stride = strtoul(argv[8], 0, 10);
        const u32 key = content_key(seed, salt, content, operand);
        printf("%u\n", key);
        for (u32 i = 0; i < count; ++i) printf("%u\n", stored_bits(key, i * stride, kind));
    } else {  // h: FP32 bits on stdin, FP16 bits out
        unsigned int bits;
        while (scanf("%u", &bits) == 1) printf("%u\n", round_fp16(bits));
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def host_build(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler (g++) to build the device's element functions with")
    folder = tmp_path_factory.mktemp("contents")
    (folder / "twin.cpp").write_text(contents.HOST_SOURCE + MAIN)
    subprocess.run([compiler, "-O2", "-o", str(folder / "twin"), str(folder / "twin.cpp")],
                   check=True, capture_output=True)
    return folder / "twin"


def _run(binary, *args, stdin=None) -> np.ndarray:
    out = subprocess.run([str(binary), *map(str, args)], input=stdin, capture_output=True,
                         text=True, check=True).stdout
    return np.array([int(x) for x in out.split()], dtype=np.uint64)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16", "e4m3", "e5m2"])
@pytest.mark.parametrize("seed, salt, content, operand",
                         [(1, 2, 3, "A"), (987654321, 55, 2**33 + 5, "B"), (0, 0, 1, "A")])
def test_device_and_host_draw_the_same_bits(host_build, precision, seed, salt, content,
                                            operand):
    count, stride = 20000, 104729  # indices spread over 2^31
    got = _run(host_build, "g", seed, salt, content, contents.OPERAND[operand],
               contents.KIND[precision], count, stride)
    key = contents.content_key(seed, salt, content, operand)
    assert int(got[0]) == key
    index = (np.arange(count, dtype=np.uint64) * stride).astype(np.uint32)
    want = contents.stored_bits(key, index, precision).astype(np.uint64)
    assert np.array_equal(got[1:], want)


def test_fp16_rounding_matches_numpy_on_ties_subnormals_and_overflow(host_build):
    rng = np.random.default_rng(5)
    values = np.concatenate([
        rng.uniform(-1, 1, 4000), rng.uniform(-1e-4, 1e-4, 4000),  # normals, subnormals
        np.ldexp(rng.uniform(-1, 1, 2000), rng.integers(-30, -14, 2000)),  # deep subnormal
        [65504.0, 65519.0, 65520.0, 70000.0, -70000.0, 2.0**-24, 2.0**-25, 3 * 2.0**-26,
         2.0**-14, 0.0, -0.0],
    ]).astype(np.float32)
    ties = (np.float16(rng.uniform(-1, 1, 2000)).astype(np.float32).view(np.uint32)
            + np.uint32(0x1000)).view(np.float32)  # exactly halfway between two FP16 values
    values = np.concatenate([values, ties])
    bits = values.view(np.uint32)
    got = _run(host_build, "h", stdin="\n".join(map(str, bits.tolist())))
    with np.errstate(over="ignore"):
        want = values.astype(np.float16).view(np.uint16).astype(np.uint64)
    assert np.array_equal(got, want)


def test_contents_are_uniform_in_minus_one_to_one_and_differ_by_content():
    key1 = contents.content_key(7, 1, 1, "A")
    key2 = contents.content_key(7, 1, 2, "A")
    index = np.arange(1 << 16, dtype=np.uint32)
    a, b = contents.elements(key1, index, "fp32"), contents.elements(key2, index, "fp32")
    assert a.min() >= -1.0 and a.max() < 1.0 and abs(a.mean()) < 0.01
    assert abs(a.std() - 1 / np.sqrt(3)) < 0.01
    assert np.count_nonzero(a == b) < 10  # another content: other values at every index
    assert len(np.intersect1d(a, b)) < 0.01 * a.size  # and not a permutation of them


def test_blocks_follow_the_storage_layout():
    """Rows of A and columns of B drawn for a block are the logical ones, whatever the
    storage layout (a col-major A is stored K x M)."""
    m, k, n = 6, 5, 7
    seed, salt, content = 3, 4, 5
    key_a = contents.content_key(seed, salt, content, "A")
    stored = contents.elements(key_a, np.arange(m * k, dtype=np.uint32), "bf16")
    rows = np.array([4, 1])
    assert np.array_equal(contents.a_rows(seed, salt, content, "bf16", "row", m, k, rows),
                          stored.reshape(m, k)[rows])
    assert np.array_equal(contents.a_rows(seed, salt, content, "bf16", "col", m, k, rows),
                          stored.reshape(k, m).T[rows])
    key_b = contents.content_key(seed, salt, content, "B")
    stored_b = contents.elements(key_b, np.arange(k * n, dtype=np.uint32), "tf32")
    cols = np.array([6, 0, 3])
    assert np.array_equal(contents.b_cols(seed, salt, content, "tf32", "row", k, n, cols),
                          stored_b.reshape(k, n)[:, cols])
    assert np.array_equal(contents.b_cols(seed, salt, content, "tf32", "col", k, n, cols),
                          stored_b.reshape(n, k).T[:, cols])


def test_derived_seeds_differ_by_part_and_run():
    assert contents.derive(1, 1024, "fp32") != contents.derive(2, 1024, "fp32")
    assert contents.derive(1, 1024, "fp32") != contents.derive(1, 1024, "bf16")
    assert contents.derive(1, 1024, "fp32") == contents.derive(1, 1024, "fp32")
    assert 0 <= contents.derive(2**40, 5) < 2**31


@pytest.mark.parametrize("precision", ["e4m3", "e5m2"])
def test_fp8_draws_are_normal_values_over_their_spread_of_either_sign(precision):
    from harness.kinds.gemm.fp8.formats import FORMATS

    key = contents.content_key(5, 6, 7, "A")
    index = np.arange(200000, dtype=np.uint32)
    codes = contents.stored_bits(key, index, precision)
    values = contents.elements(key, index, precision)
    spread = contents.FP8_SPREAD[precision]
    assert codes.dtype == np.uint8 and np.isfinite(values).all()
    exponents = np.floor(np.log2(np.abs(values)))
    assert set(exponents.tolist()) == set(range(-spread, spread + 1))
    assert 0.49 < (values < 0).mean() < 0.51
    assert (FORMATS[precision].encode(values) == codes).all()
