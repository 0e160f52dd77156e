"""The cuBLASLt FP8 baseline (harness/gpu/cublaslt.py): its operand mapping against a numpy
model of cublasLtMatmul's column-major math, its refusals, the calls it makes (through a fake
of the bindings' library calls, the real enums and attribute types), and on a GPU its output
judged as any FP8 kernel's."""

from __future__ import annotations

import ctypes
import sys
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from nvmath import CudaDataType
from nvmath.bindings import cublas as real_cublas
from nvmath.bindings import cublasLt as real_lt

from harness.errors import DeviceError, HarnessError
from harness.gpu.cublaslt import (
    WORKSPACE_BYTES,
    CublasLt,
    LtOperands,
    block_scale_layouts,
    check_fp8,
    compute_name,
    lt_operands,
)
from harness.kinds.gemm.fp8.formats import FORMATS

SHAPES = [(48, 32, 64), (16, 80, 32), (1, 16, 16), (64, 64, 128), (40, 24, 48)]


# ---- a numpy model of cublasLtMatmul ----------------------------------------------------------


def _col_major(flat: np.ndarray, rows: int, cols: int, ld: int) -> np.ndarray:
    assert ld >= rows and flat.size >= ld * (cols - 1) + rows
    return flat[np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld]


def lt_matmul_model(ops: LtOperands, first: np.ndarray, first_scale: float, second: np.ndarray,
                    second_scale: float) -> np.ndarray:
    """cublasLtMatmul's math at alpha 1, beta 0: D (m x n, column-major) = scale_A scale_B
    op(A) op(B), A and B read as column-major arrays (rows, cols, ld) before their ops; D's
    stored elements, NaN where it writes none."""
    a = _col_major(first.reshape(-1), *ops.a_layout)
    b = _col_major(second.reshape(-1), *ops.b_layout)
    op_a = a.T if ops.transa == "T" else a
    op_b = b.T if ops.transb == "T" else b
    assert op_a.shape == (ops.m, ops.k) and op_b.shape == (ops.k, ops.n)
    rows, cols, ld = ops.d_layout
    assert (rows, cols) == (ops.m, ops.n)
    d = np.full(ld * cols, np.nan)
    d[np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld] = (
        first_scale * second_scale * (op_a @ op_b))
    return d


def _operands(m, n, k, seed=5, a_format="e4m3", b_format="e4m3"):
    """A (M x K) and B (N x K) as stored (FP8 codes, row-major), and their exact values."""
    rng = np.random.default_rng(seed)
    a = FORMATS[a_format].draw(rng, (m, k), 3)
    b = FORMATS[b_format].draw(rng, (n, k), 3)
    return a, b, FORMATS[a_format].decode(a), FORMATS[b_format].decode(b)


@pytest.mark.parametrize("m,n,k", SHAPES, ids=lambda v: str(v))
def test_lt_operands_compute_the_scaled_product_in_row_major_c(m, n, k):
    _, _, a, b = _operands(m, n, k)
    scale_a, scale_b = 2.0 ** -3, 2.0 ** 2
    ops = lt_operands(m, n, k)
    ours = {"A": (a, scale_a), "B": (b, scale_b)}
    first, second = ours[ops.first], ours["A" if ops.first == "B" else "B"]
    d = lt_matmul_model(ops, first[0], first[1], second[0], second[1])
    assert not np.isnan(d).any()  # packed: D is exactly M x N
    assert np.array_equal(d.reshape(m, n), scale_a * scale_b * (a @ b.T))  # row-major C


@pytest.mark.parametrize("m,n,k", SHAPES, ids=lambda v: str(v))
def test_lt_operands_are_the_tn_form_with_both_operands_k_major(m, n, k):
    ops = lt_operands(m, n, k)
    assert (ops.transa, ops.transb, ops.first) == ("T", "N", "B")
    assert (ops.m, ops.n, ops.k) == (n, m, k)
    # K is each stored operand's contiguous dimension (its column-major rows), ld = K
    assert ops.a_layout == (k, n, k) and ops.b_layout == (k, m, k)
    assert ops.d_layout == (n, m, n)


def test_the_model_tells_the_unswapped_call_from_the_right_one():
    """Our A as cuBLASLt's A (no swap) computes A B^T column-major: C^T in row-major terms."""
    m = n = k = 32
    _, _, a, b = _operands(m, n, k, seed=9)
    wrong = replace(lt_operands(m, n, k), first="A")
    d = lt_matmul_model(wrong, a, 1.0, b, 1.0).reshape(m, n)
    assert np.array_equal(d, (a @ b.T).T) and not np.array_equal(d, a @ b.T)


# ---- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    ((64, 64, 64, "e5m2", "e5m2", "bf16"), r"no e5m2 x e5m2 GEMM .*make one operand e4m3"),
    ((64, 64, 64, "e4m3", "fp8", "bf16"), r"B's format 'fp8': expected e4m3 or e5m2"),
    ((64, 64, 64, "e4m3", "e4m3", "e4m3"), r"e4m3 x e4m3 -> e4m3: C must be one of bf16, "
                                           r"fp16, fp32"),
    ((64, 64, 40, "e4m3", "e4m3", "bf16"), r"at 64x64x40 -> bf16: .*K a multiple of 16"),
    ((64, 4, 64, "e4m3", "e4m3", "bf16"), r"N of 8 \(16-byte rows"),
    ((0, 64, 64, "e4m3", "e4m3", "fp32"), r"sizes at least 1"),
])
def test_check_fp8_refuses_what_cublaslt_cannot_do(args, message):
    with pytest.raises(HarnessError, match=message):
        check_fp8(*args)


@pytest.mark.parametrize("args", [(64, 4, 16, "e4m3", "e5m2", "fp32"),
                                  (8, 8, 32, "e5m2", "e4m3", "bf16"),
                                  (4096, 4096, 4096, "e4m3", "e4m3", "fp16")])
def test_check_fp8_takes_what_cublaslt_does(args):
    check_fp8(*args)


def test_compute_name_names_formats_output_and_compute_type():
    assert compute_name() == "cuBLASLt FP8 e4m3 x e4m3 -> bf16, CUBLAS_COMPUTE_32F"
    assert compute_name("e5m2", "e4m3", "fp32") == \
        "cuBLASLt FP8 e5m2 x e4m3 -> fp32, CUBLAS_COMPUTE_32F"


def test_without_nvmath_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvmath", None)
    with pytest.raises(HarnessError, match=r"cuBLASLt FP8 baseline needs nvmath-python .*"
                                           r"pip install nvmath-python"):
        CublasLt(SimpleNamespace(handle=1))


# ---- the calls, through a fake of the bindings' library calls -------------------------------


class FakeLt:
    """nvmath.bindings.cublasLt with every call into the library recorded instead; its enums
    and attribute types are the real ones."""

    ALGO_MARK = 0xA160

    def __init__(self, found: int = 1, fail_matmul: bool = False):
        self.calls, self.found, self.fail_matmul = [], found, fail_matmul
        self.desc_attrs, self.pref_attrs, self._next = {}, {}, 100

    def __getattr__(self, name):
        return getattr(real_lt, name)

    def _new(self, what, *args):
        self._next += 1
        self.calls.append((what, *args, self._next))
        return self._next

    def get_version(self):
        return 120805

    def create(self):
        return self._new("create")

    def matmul_preference_create(self):
        return self._new("preference_create")

    def matmul_desc_create(self, compute, scale):
        return self._new("desc_create", compute, scale)

    def matrix_layout_create(self, dtype, rows, cols, ld):
        return self._new("layout_create", dtype, rows, cols, ld)

    @staticmethod
    def _value(dtype_of, attr, buf, size):
        return np.frombuffer(ctypes.string_at(buf, size), dtype=dtype_of(attr))[0].item()

    def matmul_desc_set_attribute(self, desc, attr, buf, size):
        self.desc_attrs[desc, attr] = self._value(real_lt.get_matmul_desc_attribute_dtype, attr,
                                                  buf, size)

    def matmul_preference_set_attribute(self, pref, attr, buf, size):
        self.pref_attrs[pref, attr] = self._value(
            real_lt.get_matmul_preference_attribute_dtype, attr, buf, size)

    def matmul_algo_get_heuristic(self, handle, desc, a, b, c, d, pref, requested, results,
                                  count):
        self.calls.append(("heuristic", desc, a, b, c, d, pref, requested,
                           dict(self.pref_attrs)))
        ctypes.c_int32.from_address(count).value = self.found
        ctypes.c_uint64.from_address(results).value = self.ALGO_MARK  # the algo's first word
        offset = real_lt.matmul_heuristic_result_dtype.fields["workspace_size"][1]
        ctypes.c_uint64.from_address(results + offset).value = 4096

    def matmul_algo_config_get_attribute(self, algo, attr, buf, size, written):
        cfg = real_lt.MatmulAlgoConfigAttribute
        value = {cfg.ID: 66, cfg.TILE_ID: real_lt.MatmulTile.TILE_128x128,
                 cfg.STAGES_ID: real_lt.MatmulStages.STAGES_128x4, cfg.SPLITK_NUM: 1,
                 cfg.CLUSTER_SHAPE_ID: real_lt.ClusterShape.SHAPE_1x2x1}[attr]
        word = np.array([int(value)], dtype=real_lt.get_matmul_algo_config_attribute_dtype(attr))
        ctypes.memmove(buf, word.ctypes.data, size)

    def matmul(self, handle, desc, alpha, a, adesc, b, bdesc, beta, c, cdesc, d, ddesc, algo,
               workspace, workspace_bytes, stream):
        if self.fail_matmul:
            raise RuntimeError("CUBLAS_STATUS_INVALID_VALUE")
        self.calls.append(("matmul", handle, desc, ctypes.c_float.from_address(alpha).value,
                           a, adesc, b, bdesc, ctypes.c_float.from_address(beta).value, c, cdesc,
                           d, ddesc, ctypes.c_uint64.from_address(algo).value, workspace,
                           workspace_bytes, stream,
                           self.desc_attrs[desc, real_lt.MatmulDescAttribute.A_SCALE_POINTER],
                           self.desc_attrs[desc, real_lt.MatmulDescAttribute.B_SCALE_POINTER]))

    def matrix_layout_destroy(self, layout):
        self.calls.append(("layout_destroy", layout))

    def matmul_desc_destroy(self, desc):
        self.calls.append(("desc_destroy", desc))

    def matmul_preference_destroy(self, pref):
        self.calls.append(("preference_destroy", pref))

    def destroy(self, handle):
        self.calls.append(("destroy", handle))


WORKSPACE = 0x7F00_0000_0000
A, B, C, SCALE_A, SCALE_B = 0xA000_0000, 0xB000_0000, 0xC000_0000, 0x5A00, 0x5B00


def _fake(**kw):
    fake, closed = FakeLt(**kw), []
    lt = object.__new__(CublasLt)
    lt._start((SimpleNamespace(CudaDataType=CudaDataType), real_cublas, fake),
              SimpleNamespace(handle=0x5EED),
              SimpleNamespace(address=WORKSPACE, nbytes=WORKSPACE_BYTES,
                              close=lambda: closed.append(True)))
    return lt, fake, closed


def _kinds(fake, kind):
    return [c for c in fake.calls if c[0] == kind]


def test_gemm_fp8_swaps_the_operands_their_formats_and_their_scales():
    lt, fake, _ = _fake()
    m, n, k = 256, 512, 384
    lt.gemm_fp8(m, n, k, A, B, C, SCALE_A, SCALE_B, "e5m2", "e4m3", "bf16")
    attrs, op = real_lt.MatmulDescAttribute, real_cublas.Operation
    ((_, compute, scale, desc),) = _kinds(fake, "desc_create")
    assert (compute, scale) == (real_cublas.ComputeType.COMPUTE_32F, CudaDataType.CUDA_R_32F)
    assert fake.desc_attrs[desc, attrs.TRANSA] == op.T
    assert fake.desc_attrs[desc, attrs.TRANSB] == op.N
    layouts = {c[-1]: c[1:-1] for c in _kinds(fake, "layout_create")}
    ((_, handle, desc2, alpha, first, adesc, second, bdesc, beta, c, cdesc, d, ddesc, algo,
      workspace, workspace_bytes, stream, a_scale, b_scale),) = _kinds(fake, "matmul")
    assert (desc2, alpha, beta, algo) == (desc, 1.0, 0.0, FakeLt.ALGO_MARK)
    # cuBLASLt's A is our B (e4m3, N x K row-major = K x N column-major, ld K), its B our A
    assert (first, second, a_scale, b_scale) == (B, A, SCALE_B, SCALE_A)
    assert layouts[adesc] == (CudaDataType.CUDA_R_8F_E4M3, k, n, k)
    assert layouts[bdesc] == (CudaDataType.CUDA_R_8F_E5M2, k, m, k)
    assert layouts[cdesc] == layouts[ddesc] == (CudaDataType.CUDA_R_16BF, n, m, n)
    assert (c, d) == (C, C)
    assert (workspace, workspace_bytes, stream) == (WORKSPACE, WORKSPACE_BYTES, 0x5EED)
    assert handle == lt.handle and lt.version_text == "12.8.5"
    assert lt.last_algo == ("algo 66, TILE_128x128, STAGES_128x4, split-k 1, SHAPE_1x2x1, "
                            "workspace 4096 B")


def test_the_heuristic_runs_once_per_shape_types_and_alignment():
    lt, fake, _ = _fake()
    pref = real_lt.MatmulPreferenceAttribute
    for _ in range(3):
        lt.gemm_fp8(256, 512, 384, A, B, C, SCALE_A, SCALE_B)
    assert len(_kinds(fake, "heuristic")) == 1 and len(_kinds(fake, "matmul")) == 3
    asked = _kinds(fake, "heuristic")[0][-1]
    assert asked[lt._preference, pref.MAX_WORKSPACE_BYTES] == WORKSPACE_BYTES
    assert asked[lt._preference, pref.MIN_ALIGNMENT_A_BYTES] == 256
    lt.gemm_fp8(256, 512, 384, A, B, C, SCALE_A, SCALE_B, c_type="fp32")
    lt.gemm_fp8(256, 512, 384, A + 16, B, C, SCALE_A, SCALE_B, c_type="fp32")
    assert len(_kinds(fake, "heuristic")) == 3
    asked = _kinds(fake, "heuristic")[-1][-1]
    # our A is cuBLASLt's B
    assert asked[lt._preference, pref.MIN_ALIGNMENT_B_BYTES] == 16
    assert asked[lt._preference, pref.MIN_ALIGNMENT_A_BYTES] == 256
    # the scale pointers follow every call
    lt.gemm_fp8(256, 512, 384, A, B, C, 0x1000, 0x2000)
    assert _kinds(fake, "matmul")[-1][-2:] == (0x2000, 0x1000)


def test_close_frees_descriptors_preference_handle_and_workspace():
    lt, fake, closed = _fake()
    lt.gemm_fp8(256, 512, 384, A, B, C, SCALE_A, SCALE_B)
    lt.gemm_fp8(128, 512, 384, A, B, C, SCALE_A, SCALE_B)
    lt.close()
    made = {c[-1] for c in fake.calls if c[0] in ("layout_create", "desc_create")}
    freed = {c[1] for c in fake.calls if c[0] in ("layout_destroy", "desc_destroy")}
    assert made == freed and len(made) == 8
    assert _kinds(fake, "preference_destroy") and _kinds(fake, "destroy") == [
        ("destroy", lt.handle)]
    assert closed == [True]
    lt.close()  # once only
    assert closed == [True]


def test_a_refused_combination_reaches_no_library_call():
    lt, fake, _ = _fake()
    before = list(fake.calls)
    with pytest.raises(HarnessError, match="no e5m2 x e5m2"):
        lt.gemm_fp8(256, 512, 384, A, B, C, SCALE_A, SCALE_B, "e5m2", "e5m2")
    assert fake.calls == before


def test_no_algorithm_and_a_failed_matmul_are_device_errors_naming_the_gemm():
    lt, _, _ = _fake(found=0)
    with pytest.raises(DeviceError, match=r"cuBLASLt has no algorithm for cuBLASLt FP8 e4m3 x "
                                          r"e4m3 -> bf16, CUBLAS_COMPUTE_32F at 256x512x384"):
        lt.gemm_fp8(256, 512, 384, A, B, C, SCALE_A, SCALE_B)
    lt, _, _ = _fake(fail_matmul=True)
    with pytest.raises(DeviceError, match=r"cublasLtMatmul failed for cuBLASLt FP8 e4m3 x "
                                          r"e4m3 -> fp32, .* at 64x64x64 \(algo 66.*\): "
                                          r"CUBLAS_STATUS_INVALID_VALUE$"):
        lt.gemm_fp8(64, 64, 64, A, B, C, SCALE_A, SCALE_B, c_type="fp32")


def test_an_unreadable_algorithm_is_said_so_and_the_gemm_goes_on(monkeypatch):
    lt, fake, _ = _fake()

    def refuse(*args):
        raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")

    monkeypatch.setattr(fake, "matmul_algo_config_get_attribute", refuse)
    lt.gemm_fp8(64, 64, 64, A, B, C, SCALE_A, SCALE_B)
    assert lt.last_algo == "algorithm unread (RuntimeError: CUBLAS_STATUS_NOT_SUPPORTED)"
    assert len(_kinds(fake, "matmul")) == 1


def test_block_scales_set_each_operands_mode_in_a_plan_of_their_own():
    """scales="block": cuBLASLt's A (our B) BLK128x128_32F, its B (our A) VEC128_32F, in a plan
    apart from the per-tensor one of the same shape; a scheme it does not know is refused
    before any library call."""
    lt, fake, _ = _fake()
    attrs, modes = real_lt.MatmulDescAttribute, real_lt.MatmulMatrixScale
    lt.gemm_fp8(256, 384, 512, A, B, C, SCALE_A, SCALE_B)
    lt.gemm_fp8(256, 384, 512, A, B, C, SCALE_A, SCALE_B, scales="block")
    (_, _, _, tensor_desc), (_, _, _, block_desc) = _kinds(fake, "desc_create")
    assert (tensor_desc, attrs.A_SCALE_MODE) not in fake.desc_attrs
    assert fake.desc_attrs[block_desc, attrs.A_SCALE_MODE] == modes.BLK128x128_32F
    assert fake.desc_attrs[block_desc, attrs.B_SCALE_MODE] == modes.VEC128_32F
    assert [c[2] for c in _kinds(fake, "matmul")] == [tensor_desc, block_desc]
    assert "block scales" in compute_name(scales="block") and "block" not in compute_name()
    calls = len(fake.calls)
    with pytest.raises(HarnessError, match="scales 'rows': expected one of tensor, block"):
        lt.gemm_fp8(256, 384, 512, A, B, C, SCALE_A, SCALE_B, scales="rows")
    assert len(fake.calls) == calls


def test_block_scale_layouts_are_pytorchs_for_cublaslt():
    """A's (M, KB) as [KB][M rounded up to 4], B's (KB, NB) as [NB][KB rounded up to 4], the
    padding 0; scales that disagree on KB are refused."""
    sa = np.arange(6 * 3, dtype=np.float32).reshape(6, 3) + 1  # M = 6, KB = 3
    sb = np.arange(3 * 2, dtype=np.float32).reshape(3, 2) + 100  # KB = 3, NB = 2
    a_lt, b_lt = block_scale_layouts(sa, sb)
    assert a_lt.shape == (3, 8) and b_lt.shape == (2, 4)
    assert (a_lt[:, :6] == sa.T).all() and not a_lt[:, 6:].any()
    assert (b_lt[:, :3] == sb.T).all() and not b_lt[:, 3:].any()
    with pytest.raises(HarnessError, match="disagree on K / 128"):
        block_scale_layouts(sa, sb[:2])


def test_the_block_scale_check_tells_a_scale_layout_read_wrong():
    """What the GPU test below judges cuBLASLt by: its output right to BF16 passes; B's scales
    read transposed, or A's [KB][M] read as (M, KB), miss by far more than the bound."""
    from harness.kinds.gemm.fp8.check import Fp8Gemm, judge
    from harness.kinds.gemm.fp8.gemm import reference
    from harness.kinds.gemm.numerics import bf16_bits, bf16_to_float

    m, n, k = 200, 264, 384
    a, b, _, _ = _operands(m, n, k, seed=13)
    rng = np.random.default_rng(13)
    sa = np.exp2(rng.integers(-4, 5, (m, 3))).astype(np.float32)
    sb = np.exp2(rng.integers(-4, 5, (3, 3))).astype(np.float32)

    def bf16(scale_a, scale_b):
        g = Fp8Gemm(a, b.T, "e4m3", "e4m3", scale_a, scale_b, out="bf16", promote=128)
        return bf16_to_float(bf16_bits(reference(g))).astype(np.float64)

    right = Fp8Gemm(a, b.T, "e4m3", "e4m3", sa, sb, out="bf16", promote=128)
    assert judge(right, bf16(sa, sb)).passed
    for wrong in (bf16(sa, sb.T.copy()), bf16(sa.reshape(3, m).T.copy(), sb)):
        verdict = judge(right, wrong)
        assert not verdict.passed and "wrong values" in verdict.message, verdict.message


# ---- on a GPU --------------------------------------------------------------------------------


@pytest.mark.gpu_shared
@pytest.mark.parametrize("a_format,b_format,c_type", [("e4m3", "e4m3", "bf16"),
                                                      ("e4m3", "e5m2", "fp32"),
                                                      ("e5m2", "e4m3", "bf16")])
def test_cublaslt_fp8_passes_the_fp8_check(device, a_format, b_format, c_type):
    from harness.gpu.driver import Buffer, Stream
    from harness.kinds.gemm.fp8.check import Fp8Gemm, judge
    from harness.kinds.gemm.numerics import c_dtype, to_float64

    if device.compute_capability < (8, 9):
        pytest.skip(f"FP8 GEMMs need sm_89 or later, this GPU is {device.compute_capability}")
    m, n, k = 256, 512, 384
    a, b, _, _ = _operands(m, n, k, seed=11, a_format=a_format, b_format=b_format)
    scales = (2.0 ** -3, 2.0 ** 2)
    stream = Stream()
    bufs = [Buffer(x.nbytes) for x in (a, b)] + [Buffer(4), Buffer(4)]
    for buf, host in zip(bufs, (a, b, np.float32([scales[0]]), np.float32([scales[1]])),
                         strict=True):
        buf.upload(host, stream)
    out = Buffer(m * n * np.dtype(c_dtype(c_type)).itemsize)
    out.fill_u32(0xFFFFFFFF, stream)  # NaN: an output never written fails the check
    lt = CublasLt(stream)
    try:
        lt.gemm_fp8(m, n, k, bufs[0].address, bufs[1].address, out.address, bufs[2].address,
                    bufs[3].address, a_format, b_format, c_type)
        got = to_float64(out.download(c_dtype(c_type), (m, n), stream), c_type)
    finally:
        lt.close()
        for buf in (*bufs, out):
            buf.close()
        stream.close()
    verdict = judge(Fp8Gemm(a, b.T, a_format, b_format, *scales, out=c_type), got)
    assert verdict.passed, f"{compute_name(a_format, b_format, c_type)}: {verdict.message} " \
                           f"({lt.last_algo}, cuBLASLt {lt.version_text})"


@pytest.mark.gpu_shared
@pytest.mark.parametrize("m,n,k", [(256, 384, 512), (200, 264, 384)])
def test_cublaslt_block_scales_pass_the_fp8_check(device, m, n, k):
    """cuBLASLt's 1 x 128 / 128 x 128 modes on the layouts block_scale_layouts gives, judged
    as rung 21 is (the check's float64 reference, scales applied block by block, promotion every
    128): scales of 2^-4 to 2^4 make a layout read wrong miss by far more than the bound."""
    from harness.gpu.driver import Buffer, Stream
    from harness.kinds.gemm.fp8.check import Fp8Gemm, judge
    from harness.kinds.gemm.numerics import c_dtype, to_float64

    if device.compute_capability != (9, 0):
        pytest.skip(f"cuBLASLt's 1 x 128 / 128 x 128 modes are sm_90's; this GPU is "
                    f"{device.compute_capability}")
    a, b, _, _ = _operands(m, n, k, seed=13, a_format="e4m3", b_format="e4m3")
    rng = np.random.default_rng(13)
    kb, nb = -(-k // 128), -(-n // 128)
    sa = np.exp2(rng.integers(-4, 5, (m, kb))).astype(np.float32)
    sb = np.exp2(rng.integers(-4, 5, (kb, nb))).astype(np.float32)
    a_lt, b_lt = block_scale_layouts(sa, sb)
    stream = Stream()
    hosts = (a, b, a_lt, b_lt)
    bufs = [Buffer(x.nbytes) for x in hosts]
    for buf, host in zip(bufs, hosts, strict=True):
        buf.upload(host, stream)
    out = Buffer(m * n * 2)
    out.fill_u32(0xFFFFFFFF, stream)  # NaN: an output never written fails the check
    lt = CublasLt(stream)
    try:
        lt.gemm_fp8(m, n, k, bufs[0].address, bufs[1].address, out.address, bufs[2].address,
                    bufs[3].address, scales="block")
        got = to_float64(out.download(c_dtype("bf16"), (m, n), stream), "bf16")
    finally:
        lt.close()
        for buf in (*bufs, out):
            buf.close()
        stream.close()
    verdict = judge(Fp8Gemm(a, b.T, "e4m3", "e4m3", sa, sb, out="bf16", promote=128), got)
    assert verdict.passed, f"{compute_name(scales='block')}: {verdict.message} " \
                           f"({lt.last_algo}, cuBLASLt {lt.version_text})"
