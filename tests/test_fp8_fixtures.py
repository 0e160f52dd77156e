"""The FP8 GEMM fixtures (tests/kernels/fp8, issue 36) with no GPU: every spec parses as the FP8
declaration it is meant to be, every variant compiles with NVRTC, the decoder the fixtures share
(fp8_decode.cuh) gives FORMATS[...].decode's value for each of the 256 codes of both formats
(built for the host with g++), and a host emulation of each fixture's arithmetic gets, from the
FP8 check (harness/kinds/gemm/fp8/check.py), the finding the fixture's summary names.

The fixtures are one SIMT kernel (16 x 16 tiles, one output per thread, FP8 codes decoded
exactly on load) and its mistakes: FIXTURES below maps each registry key to its declared
formats, C type and the finding the harness must give once the runs judge FP8 GEMMs.

simt_e4m3:fp16_accumulator (BF16 C) was found by chance at shallow K: its C's BF16 rounding
hides most of the FP16 accumulator's error from the norm's bound (0.34 of it at K = 256). Its
sums are neither the tensor core's nor FP32's; the sampled outputs' comparison with both
(fp8/check.accumulation, issue 57) finds it at every K.

simt_e4m3_block is the same kernel with block scales (scale_a FP32 [KB][M] on the device, the
transpose of fp8_check's M x KB; scale_b [KB][NB]), each 128-deep k block's FP32 partial sum
times its scales added into an FP32 total; its mistakes (block 0's scales for every block,
scale_a read as [M][KB], all of K summed before one scale, the last block's) are emulated by
reading the device layouts as each variant does, and all three are "wrong values"."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURE_KERNELS

from harness.errors import HarnessError
from harness.kernels.registry import kernels_in, load_registry
from harness.kernels.spec import read_spec
from harness.kinds.gemm.fp8.check import BLOCK_K, Fp8Gemm, judge, reference
from harness.kinds.gemm.fp8.formats import FORMATS
from harness.kinds.gemm.numerics import stored, to_float64

FP8 = FIXTURE_KERNELS / "fp8"
FILES = sorted(FP8.glob("*.cu"))
DECODER = FP8 / "fp8_decode.cuh"
LESS_ACCURATE = "less accurate than the tensor core's FP8 accumulation"
FIXTURES = {  # key: (A's format, B's format, c_type, the finding)
    "simt_e4m3:right": ("e4m3", "e4m3", "bf16", "ok"),
    "simt_e4m3:ignores_scale_a": ("e4m3", "e4m3", "bf16", "ignores the scale of A"),
    "simt_e4m3:fp16_accumulator": ("e4m3", "e4m3", "bf16", LESS_ACCURATE),
    "simt_e4m3_e5m2:right": ("e4m3", "e5m2", "bf16", "ok"),
    "b_e5m2_read_as_e4m3": ("e4m3", "e5m2", "bf16", "reads B as e4m3"),
    "simt_e4m3_fp32:right": ("e4m3", "e4m3", "fp32", "ok"),
    "simt_e4m3_fp32:fp16_accumulator": ("e4m3", "e4m3", "fp32", LESS_ACCURATE),
    "simt_e4m3_block:right": ("e4m3", "e4m3", "bf16", "ok"),
    "simt_e4m3_block:first_block_scales": ("e4m3", "e4m3", "bf16", "wrong values"),
    "simt_e4m3_block:transposed_scale_a": ("e4m3", "e4m3", "bf16", "wrong values"),
    "simt_e4m3_block:no_promotion": ("e4m3", "e4m3", "bf16", "wrong values"),
}
BLOCK_SCALED = {"simt_e4m3_block"}
"""The files whose kernels take block scales (promote = 128); the others per-tensor scales."""
B_DECODED_AS = {"b_e5m2_read_as_e4m3": "e4m3"}
"""Fixtures whose kernel decodes B's bytes in a format other than the declared one."""
SIGNATURE = ["M", "N", "K", "A", "B", "C", "scale_a", "scale_b"]


def all_kernels():
    return [k for path in FILES for k in kernels_in(read_spec(path))]


def tensor_kernels():
    return [k for k in all_kernels() if k.spec.stem not in BLOCK_SCALED]


def block_kernels():
    return [k for k in all_kernels() if k.spec.stem in BLOCK_SCALED]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def nvrtc():
    try:
        from harness.gpu.compilers import compiler_versions

        return compiler_versions()["nvrtc"]
    except Exception as exc:  # noqa: BLE001 - any failure to reach NVRTC means: skip
        pytest.skip(f"NVRTC is not available: {type(exc).__name__}: {exc}")


# --- the specs ------------------------------------------------------------------------------

def test_the_folder_holds_the_fixtures_and_nothing_is_broken():
    registry = load_registry([FP8], kind="gemm")
    assert not registry.broken, [b.error for b in registry.broken]
    assert sorted(k.name for k in registry.kernels) == sorted(FIXTURES)
    assert sorted(k.name for k in all_kernels()) == sorted(FIXTURES)


@pytest.mark.parametrize("kernel", all_kernels(), ids=lambda k: k.name)
def test_each_fixture_declares_an_fp8_gemm(kernel):
    a, b, c_type, finding = FIXTURES[kernel.name]
    spec = kernel.spec
    assert spec.kind == "gemm" and spec.precision == "fp8"
    scales = ("block", 128) if spec.stem in BLOCK_SCALED else ("tensor", None)
    assert (spec.fp8.a, spec.fp8.b, spec.fp8.scales, spec.fp8.promote) == (a, b, *scales)
    assert spec.c_type == c_type and spec.layout_a == "row" and spec.layout_b == "col"
    assert [p.name for p in spec.abi] == SIGNATURE
    assert [p.type for p in spec.abi][-2:] == ["ptr", "ptr"]
    if finding != "ok":  # a mistake's summary names the finding the harness must give
        assert finding in spec.summary, (kernel.name, spec.summary)


def test_the_variants_set_the_defects_macros():
    defines = {k.name: set(k.defines) for k in all_kernels()}
    assert {"-DSCALE_A=1", "-DACC_FP16=0"} <= defines["simt_e4m3:right"]
    assert {"-DSCALE_A=0", "-DACC_FP16=0"} <= defines["simt_e4m3:ignores_scale_a"]
    assert {"-DSCALE_A=1", "-DACC_FP16=1"} <= defines["simt_e4m3:fp16_accumulator"]
    assert "-DACC_FP16=0" in defines["simt_e4m3_fp32:right"]
    assert "-DACC_FP16=1" in defines["simt_e4m3_fp32:fp16_accumulator"]
    assert read_spec(FP8 / "simt_e4m3.cu").representative == "right"


def test_the_block_variants_set_the_defects_macros():
    defines = {k.name: set(k.defines) for k in block_kernels()}
    right = {"-DFIRST_BLOCK_SCALES=0", "-DSCALE_A_MK=0", "-DPROMOTE=1"}
    assert sorted(defines) == sorted(k for k in FIXTURES if k.startswith("simt_e4m3_block:"))
    assert right <= defines["simt_e4m3_block:right"]
    for name, wrong in (("first_block_scales", "-DFIRST_BLOCK_SCALES=1"),
                        ("transposed_scale_a", "-DSCALE_A_MK=1"),
                        ("no_promotion", "-DPROMOTE=0")):
        assert wrong in defines[f"simt_e4m3_block:{name}"]
        assert len(right - defines[f"simt_e4m3_block:{name}"]) == 1, name
    spec = read_spec(FP8 / "simt_e4m3_block.cu")
    assert spec.representative == "right" and spec.precision == "fp8"
    assert (spec.fp8.scales, spec.fp8.promote, spec.c_type) == ("block", 128, "bf16")


# --- NVRTC ----------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kernel", all_kernels(), ids=lambda k: k.name)
def test_each_fixture_compiles_with_nvrtc(kernel, arch, nvrtc):
    from harness.compiler.compile import compile_kernel

    compiled = compile_kernel(kernel, arch)
    assert compiled.cubin[:4] == b"\x7fELF"
    res = compiled.resources
    assert 0 < res.registers <= 64, (kernel.name, res)
    assert res.spill_store_bytes == 0 and res.spill_load_bytes == 0, (kernel.name, res)
    assert res.static_smem_bytes == 2 * 16 * 17 * 4


def test_the_fp16_accumulator_is_in_the_code(nvrtc):
    """The right variants add in FP32 (FFMA, no HFMA2); the fp16_accumulator ones in FP16."""
    from harness.compiler.compile import compile_kernel
    from harness.compiler.sass import disassemble, opcodes

    for kernel in all_kernels():
        try:
            ops = opcodes(disassemble(compile_kernel(kernel, "sm_90").cubin))
        except HarnessError as exc:  # cuobjdump or nvdisasm not found
            pytest.skip(str(exc))
        # HFMA2.MMA also appears in the FP32 kernels: ptxas moves constants with it
        hfma, ffma = ops["HFMA2"], ops["FFMA"]
        if kernel.name.endswith(":fp16_accumulator"):
            assert hfma >= 16 and ffma == 0, (kernel.name, ops)
        else:
            assert ffma >= 16 and hfma == 0, (kernel.name, ops)


# --- the decoder on the host ----------------------------------------------------------------

HOST_MAIN = r"""
#include <cstdio>
#include <cstring>
#include "fp8_decode.cuh"
int main() {
    for (unsigned int code = 0; code < 256; ++code) {
        const float v[2] = {fp8_e4m3_to_float(code), fp8_e5m2_to_float(code)};
        unsigned int bits[2];
        std::memcpy(bits, v, sizeof bits);
        std::printf("%u %08x %08x\n", code, bits[0], bits[1]);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def host_decoded(tmp_path_factory) -> dict[str, np.ndarray]:
    """Each format's 256 values as the fixtures' decoder gives them, built for the host."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed: the decoder is not built for the host")
    folder = tmp_path_factory.mktemp("fp8_decode")
    (folder / "main.cpp").write_text(HOST_MAIN)
    exe = folder / "decode"
    built = subprocess.run([gxx, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror",
                            f"-I{DECODER.parent}", str(folder / "main.cpp"), "-o", str(exe)],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True)
    rows = [line.split() for line in out.stdout.splitlines()]
    assert [int(r[0]) for r in rows] == list(range(256))
    return {fmt: np.array([int(r[col], 16) for r in rows], dtype=np.uint32).view(np.float32)
            for col, fmt in ((1, "e4m3"), (2, "e5m2"))}


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_the_decoder_gives_every_codes_exact_value(host_decoded, fmt):
    got = host_decoded[fmt].astype(np.float64)
    want = FORMATS[fmt].decode(np.arange(256, dtype=np.uint8))
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), np.flatnonzero(np.isnan(got) != nan)
    wrong = ~nan & ((got != want) | (np.signbit(got) != np.signbit(want)))
    assert not wrong.any(), [(hex(c), got[c], want[c]) for c in np.flatnonzero(wrong)]
    assert nan.sum() == {"e4m3": 2, "e5m2": 6}[fmt]
    assert np.isinf(got).sum() == {"e4m3": 0, "e5m2": 2}[fmt]


# --- the fixtures' arithmetic, emulated, against the FP8 check ------------------------------

SCALE_A, SCALE_B = 2.0 ** -5, 2.0 ** 2  # powers of two, neither 1 (notes/fp8_plan.md)
SPREAD = {"e4m3": 3, "e5m2": 6}


def emulate(kernel, g: Fp8Gemm) -> np.ndarray:
    """What ``kernel`` stores for ``g``, in exact values: its macros' arithmetic (FP32 fmaf or
    FP16 hfma in k order, the scales once at the end in FP32, C rounded to nearest even)."""
    params = dict(kernel.params)
    av = FORMATS[g.a_format].decode(g.a)
    bv = FORMATS[B_DECODED_AS.get(kernel.name, g.b_format)].decode(g.b)
    acc_type = np.float16 if params.get("ACC_FP16", 0) else np.float32
    acc = np.zeros((av.shape[0], bv.shape[1]), dtype=acc_type)
    for k in range(av.shape[1]):  # the product and the sum exact in float64, rounded once
        acc = (acc.astype(np.float64) + np.outer(av[:, k], bv[k])).astype(acc_type)
    scale = np.float32(g.scale_b)
    if params.get("SCALE_A", 1):
        scale = np.float32(g.scale_a) * scale
    return to_float64(stored(scale * acc.astype(np.float32), g.out), g.out)


@pytest.mark.parametrize("k", [256, 4096])
@pytest.mark.parametrize("kernel", tensor_kernels(), ids=lambda k: k.name)
def test_the_emulated_fixture_gets_its_finding(kernel, k):
    a_format, b_format, c_type, finding = FIXTURES[kernel.name]
    for seed in (1, 2):
        rng = np.random.default_rng([seed, k])
        a = FORMATS[a_format].draw(rng, (64, k), SPREAD[a_format])
        b = FORMATS[b_format].draw(rng, (k, 128), SPREAD[b_format])
        g = Fp8Gemm(a, b, a_format, b_format, SCALE_A, SCALE_B, out=c_type)
        verdict = judge(g, emulate(kernel, g))
        assert verdict.finding == finding, (kernel.name, k, seed, verdict.message)


def device_scales(g: Fp8Gemm) -> tuple[np.ndarray, np.ndarray]:
    """A block-scaled GEMM's scales as the device holds them (operands.stored_scales): A's
    FP32 [KB][M] (fp8_check's M x KB transposed), B's [KB][NB], each flat."""
    sa, sb = (np.asarray(s, dtype=np.float32) for s in (g.scale_a, g.scale_b))
    return np.ascontiguousarray(sa.T).reshape(-1), np.ascontiguousarray(sb).reshape(-1)


def emulate_block(kernel, g: Fp8Gemm) -> np.ndarray:
    """What a simt_e4m3_block variant stores for ``g``, in exact values: FP32 fmaf in k order,
    each k block's partial sum times its scales (read from the device layouts as the variant
    reads them, FP32) fmaf'd into an FP32 total at the block's end (PROMOTE), or all of K
    summed and scaled once by the last block's scales; C rounded to nearest even."""
    params = dict(kernel.params)
    av, bv = g.values()
    m, k = av.shape
    n = bv.shape[1]
    kb_count, nb = -(-k // BLOCK_K), -(-n // BLOCK_K)
    sa_dev, sb_dev = device_scales(g)
    rows, cols = np.arange(m)[:, None], np.arange(n)[None, :]

    def scale(kb: int) -> np.ndarray:  # block_scale() in the kernel
        if params["FIRST_BLOCK_SCALES"]:
            kb = 0
        sa = sa_dev[rows * kb_count + kb] if params["SCALE_A_MK"] else sa_dev[kb * m + rows]
        return sa * sb_dev[kb * nb + cols // BLOCK_K]  # FP32 times FP32, rounded to FP32

    acc = np.zeros((m, n), dtype=np.float32)
    total = np.zeros((m, n), dtype=np.float32)
    for kk in range(k):  # the product and the sum exact in float64, rounded once
        acc = (acc.astype(np.float64) + np.outer(av[:, kk], bv[kk])).astype(np.float32)
        if params["PROMOTE"] and ((kk + 1) % BLOCK_K == 0 or kk + 1 == k):
            total = (total.astype(np.float64)
                     + scale(kk // BLOCK_K).astype(np.float64) * acc).astype(np.float32)
            acc[:] = 0.0
    if not params["PROMOTE"]:
        total = scale(kb_count - 1) * acc
    return to_float64(stored(total, g.out), g.out)


def block_gemm(m: int, n: int, k: int, seed: int) -> Fp8Gemm:
    """e4m3 x e4m3 with a scale per block drawn from 2^-6 .. 2^3 (fp8_check's layouts:
    A's M x KB, B's KB x NB), BF16 C, promoted every 128."""
    rng = np.random.default_rng([seed, m, n, k])
    a = FORMATS["e4m3"].draw(rng, (m, k), SPREAD["e4m3"])
    b = FORMATS["e4m3"].draw(rng, (k, n), SPREAD["e4m3"])
    kb, nb = -(-k // BLOCK_K), -(-n // BLOCK_K)
    sa = 2.0 ** rng.integers(-6, 4, size=(m, kb))
    sb = 2.0 ** rng.integers(-6, 4, size=(kb, nb))
    return Fp8Gemm(a, b, "e4m3", "e4m3", sa, sb, "bf16", BLOCK_K)


def test_the_block_emulation_reads_the_device_layouts():
    """The emulation's right variant is fp8_check's reference, block by block; its scale_a
    index is the device's [KB][M], which differs from fp8_check's [M][KB]."""
    g = block_gemm(24, 256, 384, 9)
    sa_dev, _ = device_scales(g)
    assert sa_dev[2 * 24 + 5] == g.scale_a[5, 2] and sa_dev.size == 24 * 3
    right = next(k for k in block_kernels() if k.variant == "right")
    out = emulate_block(right, g)
    assert np.allclose(out, reference(g), rtol=2.0 ** -7, atol=0.0)


@pytest.mark.parametrize("k", [256, 1024])
@pytest.mark.parametrize("kernel", block_kernels(), ids=lambda k: k.name)
def test_the_emulated_block_fixture_gets_its_finding(kernel, k):
    finding = FIXTURES[kernel.name][3]
    for seed in (1, 2):
        g = block_gemm(64, 256, k, seed)
        verdict = judge(g, emulate_block(kernel, g))
        assert verdict.finding == finding, (kernel.name, k, seed, verdict.message)
        assert verdict.passed == (finding == "ok"), verdict


def test_the_emulated_right_block_fixture_passes_on_ragged_sizes():
    """M, N, K none a multiple of 16 or 128: the last k block is short, the last NB partial."""
    right = next(k for k in block_kernels() if k.variant == "right")
    for m, n, k in ((50, 200, 300), (17, 129, 129), (1, 1, 1)):
        g = block_gemm(m, n, k, 3)
        verdict = judge(g, emulate_block(right, g))
        assert verdict.passed, ((m, n, k), verdict.message)


def test_the_decoder_header_is_the_one_the_fixtures_include():
    for path in FILES:
        assert '#include "fp8_decode.cuh"' in path.read_text(), path.name
    assert "#include <cuda_fp8.h>" not in "".join(Path(p).read_text() for p in [*FILES, DECODER])


def test_the_declared_promotion_fixture_builds_offline(nvrtc):
    """tests/kernels/fp8_declared/promotes_never.ptx: rung 20's body with promote = 128
    declared (its GPU test: tests/test_fp8_gpu.py)."""
    from harness.testing import assert_builds
    row = assert_builds(str(FIXTURE_KERNELS / "fp8_declared" / "promotes_never.ptx"))
    assert row["status"] == "ok" and row["spill_store_bytes"] == 0
    spec = read_spec(FIXTURE_KERNELS / "fp8_declared" / "promotes_never.ptx")
    assert spec.fp8.promote == 128 and spec.fp8.scales == "tensor"
