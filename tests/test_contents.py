"""The operand contents drawn on the device are the ones the checks draw here: the device's C++
element functions, built for the host, against the numpy twin, bit for bit."""

import shutil
import subprocess

import numpy as np
import pytest

from harness.bench import keyed
from harness.errors import HarnessError
from harness.kinds.gemm import contents

SECRET = keyed.Secret((0x01234567, 0x89ABCDEF, 0xDEADBEEF, 0x0BADF00D))
KAT = [  # Random123's kat_vectors: counter[4], key[2] -> output[4]
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]

MAIN = r"""
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
    if (argv[1][0] == 'g') {  // g s0 s1 s2 s3 salt content operand kind count stride
        u32 s[4];
        for (int j = 0; j < 4; ++j) s[j] = strtoul(argv[2 + j], 0, 10);
        const u32 salt = strtoul(argv[6], 0, 10);
        const u64 content = strtoull(argv[7], 0, 10);
        const u32 operand = strtoul(argv[8], 0, 10), kind = strtoul(argv[9], 0, 10);
        const u32 count = strtoul(argv[10], 0, 10), stride = strtoul(argv[11], 0, 10);
        const u64 key = keyed_content_key(s[0], s[1], s[2], s[3], salt, content, operand);
        printf("%llu\n", key);
        for (u32 i = 0; i < count; ++i) printf("%u\n", stored_bits(key, i * stride, kind));
    } else if (argv[1][0] == 'p') {  // p c0 c1 c2 c3 k0 k1: one Philox4x32-10 block
        u32 c[4], o[4];
        for (int j = 0; j < 4; ++j) c[j] = strtoul(argv[2 + j], 0, 16);
        philox4x32_10(c, strtoul(argv[6], 0, 16), strtoul(argv[7], 0, 16), o);
        printf("%u\n%u\n%u\n%u\n", o[0], o[1], o[2], o[3]);
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
@pytest.mark.parametrize("secret, salt, content, operand",
                         [(SECRET, 2, 3, "A"), (keyed.Secret((1, 2, 3, 4)), 55, 2**33 + 5, "B"),
                          (keyed.Secret((0, 0, 0, 0)), 0, 1, "A")])
def test_device_and_host_draw_the_same_bits(host_build, precision, secret, salt, content,
                                            operand):
    count, stride = 20000, 104729  # indices spread over 2^31
    got = _run(host_build, "g", *secret.words, salt, content, contents.OPERAND[operand],
               contents.KIND[precision], count, stride)
    key = contents.content_key(secret, salt, content, operand)
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
    key1 = contents.content_key(SECRET, 1, 1, "A")
    key2 = contents.content_key(SECRET, 1, 2, "A")
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
    seed, salt, content = SECRET, 4, 5
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

    key = contents.content_key(SECRET, 6, 7, "A")
    index = np.arange(200000, dtype=np.uint32)
    codes = contents.stored_bits(key, index, precision)
    values = contents.elements(key, index, precision)
    spread = contents.FP8_SPREAD[precision]
    assert codes.dtype == np.uint8 and np.isfinite(values).all()
    exponents = np.floor(np.log2(np.abs(values)))
    assert set(exponents.tolist()) == set(range(-spread, spread + 1))
    assert 0.49 < (values < 0).mean() < 0.51
    assert (FORMATS[precision].encode(values) == codes).all()


@pytest.mark.parametrize("counter, key, want", KAT)
def test_philox_meets_its_known_answers(counter, key, want):
    got = keyed.philox(np.array([counter], dtype=np.uint32), key)[0]
    assert tuple(int(x) for x in got) == want


@pytest.mark.parametrize("counter, key, want", KAT)
def test_the_device_source_meets_the_known_answers_too(host_build, counter, key, want):
    got = _run(host_build, "p", *(f"{x:x}" for x in counter), *(f"{x:x}" for x in key))
    assert tuple(int(x) for x in got) == want


def test_words_at_any_indices_are_those_of_the_whole_run():
    key = contents.content_key(SECRET, 9, 1, "B")
    whole = keyed.words(key, np.arange(4099, dtype=np.uint64))
    picks = np.array([4098, 0, 7, 5, 5, 1024, 3], dtype=np.uint64)
    assert np.array_equal(keyed.words(key, picks), whole[picks.astype(np.int64)])
    assert np.array_equal(keyed.words(key, np.arange(5, 4099)), whole[5:])
    long = keyed.words(key, np.arange(3, 3 + 4 * keyed.RUN_CHUNK + 9))  # in pieces, on threads
    assert np.array_equal(long[:4096], whole[3:4099])


def test_a_secret_never_shows_its_words_and_a_bad_one_is_refused():
    secret = keyed.Secret.fresh()
    assert all(f"{w}" not in repr(secret) and f"{w:x}" not in repr(secret)
               for w in secret.words if w > 0xFFFF)
    assert keyed.Secret.fresh() != secret  # os.urandom: 128 bits each time
    again = keyed.Secret.from_hex("00112233445566778899aabbccddeeff")
    assert again.replayed and again.words[0] == 0x33221100
    with pytest.raises(HarnessError, match="expected 32 hex digits"):
        keyed.Secret.from_hex("1234")
