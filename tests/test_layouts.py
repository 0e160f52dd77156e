"""Column-major A and C (issue 22), on the CPU: the operands' storage helpers, the cuBLAS
operand mapping against a numpy model of cublasGemmEx, and the report's kernel record."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from harness.bench.result import KernelInfo, Result, layouts_text, signature_text
from harness.gpu import cublas as cublas_mod
from harness.gpu.cublas import Cublas, GemmExOperands, gemm_ex_operands
from harness.kernels.registry import kernels_in
from harness.kernels.signature import DEFAULT_SIGNATURE, parse_signature
from harness.kernels.spec import parse_spec
from harness.kinds.gemm import numerics
from harness.kinds.gemm.operands import logical_c, stored_a, stored_c

LAYOUTS = ("row", "col")
M, N, K = 5, 7, 3

# ---- the operands' storage ---------------------------------------------------------------------


def test_stored_a_is_the_column_major_a():
    a = np.arange(M * K, dtype=np.float32).reshape(M, K)
    assert stored_a(a, "row") is a
    col = stored_a(a, "col")
    assert col.shape == (K, M) and col.flags.c_contiguous
    flat = col.reshape(-1)
    # column-major M x K, lda = M: element (i, j) at i + j * M
    for i, j in itertools.product(range(M), range(K)):
        assert flat[i + j * M] == a[i, j]


def test_logical_c_reads_back_either_layout_as_m_by_n_row_major():
    c = np.arange(M * N, dtype=np.float32).reshape(M, N)
    guard = np.full(11, -1, dtype=np.float32)
    for layout in LAYOUTS:
        whole = np.concatenate([stored_c(c, layout).reshape(-1), guard])
        back = logical_c(whole[: M * N], layout, M, N)
        assert back.shape == (M, N) and np.array_equal(back, c)
    # column-major C, ldc = M: element (i, j) at i + j * M
    flat = stored_c(c, "col").reshape(-1)
    assert all(flat[i + j * M] == c[i, j] for i, j in itertools.product(range(M), range(N)))
    assert stored_c(c, "row") is c


def test_the_row_major_read_back_is_todays_reshape():
    whole = np.arange(M * N + 9, dtype=np.float32)
    old = whole[: M * N].reshape(M, N)
    new = logical_c(whole[: M * N], "row", M, N)
    assert new.base is not None and np.shares_memory(new, whole) and np.array_equal(new, old)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_a_rows_reversed_reverses_the_logical_rows_of_a_column_major_a(precision):
    """What Operands.a_rows_reversed uploads for a column-major A: the stored array's columns
    reversed, i.e. the logical A's rows, so C's rows come out reversed."""
    rng = np.random.default_rng(3)
    bits, a64 = numerics.random_operand(rng, (M, K), precision)
    b64 = rng.uniform(-1, 1, (K, N))
    uploaded = stored_a(numerics.stored(a64[::-1], precision), "col")
    logical = numerics.to_float64(uploaded.T, precision)  # what a col-major kernel reads
    assert np.array_equal(logical, a64[::-1])
    assert np.array_equal(logical @ b64, (a64 @ b64)[::-1])
    restored = stored_a(numerics.stored(a64, precision), "col")
    assert np.array_equal(restored, stored_a(bits, "col"))


# ---- cuBLAS: a numpy model of cublasGemmEx --------------------------------------------------


def _col_major(flat: np.ndarray, rows: int, cols: int, ld: int) -> np.ndarray:
    assert ld >= rows
    index = np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld
    return flat[index]


def gemm_ex_model(transa, transb, m, n, k, alpha, a_flat, lda, b_flat, ldb, beta, c_flat, ldc):
    """cublasGemmEx's math: C (m x n, column-major, ldc) = alpha op(A) op(B) + beta C, op(A)
    m x k and op(B) k x n, each a column-major array read with its leading dimension."""
    op_a = (_col_major(a_flat, m, k, lda) if transa == "N" else _col_major(a_flat, k, m, lda).T)
    op_b = (_col_major(b_flat, k, n, ldb) if transb == "N" else _col_major(b_flat, n, k, ldb).T)
    out = c_flat.copy()
    index = np.arange(m)[:, None] + np.arange(n)[None, :] * ldc
    out[index] = alpha * (op_a @ op_b) + beta * c_flat[index]
    return out


@pytest.mark.parametrize("layouts", list(itertools.product(LAYOUTS, repeat=3)),
                         ids=lambda t: "A{}-B{}-C{}".format(*t))
def test_gemm_ex_operands_compute_the_logical_product(layouts):
    layout_a, layout_b, layout_c = layouts
    rng = np.random.default_rng(7)
    a, b, c = rng.normal(size=(M, K)), rng.normal(size=(K, N)), rng.normal(size=(M, N))
    alpha, beta = 0.75, -0.5
    a_flat = stored_a(a, layout_a).reshape(-1)
    b_flat = (np.ascontiguousarray(b.T) if layout_b == "col" else b).reshape(-1)
    c_flat = stored_c(c, layout_c).reshape(-1)
    ops = gemm_ex_operands(M, N, K, layout_a, layout_b, layout_c)
    first, second = (a_flat, b_flat) if ops.first == "A" else (b_flat, a_flat)
    out = gemm_ex_model(ops.transa, ops.transb, ops.m, ops.n, ops.k, alpha, first, ops.lda,
                        second, ops.ldb, beta, c_flat, ops.ldc)
    got = logical_c(out, layout_c, M, N)
    assert np.allclose(got, alpha * a @ b + beta * c, rtol=1e-12, atol=1e-12)
    # packed leading dimensions, the same the kernel's signature would be given
    assert (ops.first == "B") == (layout_c == "row")
    assert ops.ldc == (N if layout_c == "row" else M)


def test_gemm_ex_operands_refuse_unknown_layouts():
    with pytest.raises(ValueError, match="layout_a"):
        gemm_ex_operands(M, N, K, "diag")


class _FakeCublas:
    """nvmath.bindings.cublas as far as Cublas.gemm uses it, recording gemm_ex's arguments."""

    Operation = SimpleNamespace(N="OP_N", T="OP_T")
    ComputeType = SimpleNamespace(COMPUTE_32F="C32F", COMPUTE_32F_FAST_TF32="C32TF")
    GemmAlgo = SimpleNamespace(DEFAULT="ALGO")

    def __init__(self):
        self.calls = []

    def gemm_ex(self, *args):
        self.calls.append(args)


def _fake_blas():
    blas = object.__new__(Cublas)
    blas._cublas = _FakeCublas()
    blas._nvmath = SimpleNamespace(CudaDataType=SimpleNamespace(
        CUDA_R_32F="R32F", CUDA_R_16BF="R16BF", CUDA_R_16F="R16F"))
    blas.handle = "HANDLE"
    blas._scalars = np.zeros(2, dtype=np.float32)
    return blas


def _todays_call(blas, precision, m, n, k, a, b, c, layout_b, c_type):
    """Cublas.gemm's gemm_ex arguments as written before layouts of A and C (a frozen copy)."""
    cublas, dtypes = blas._cublas, blas._nvmath.CudaDataType
    data_type, compute = cublas_mod._TYPES[precision]
    ab, c_data = getattr(dtypes, data_type), getattr(dtypes, cublas_mod._C_TYPES[c_type])
    op_b, ld_b = ((cublas.Operation.N, n) if layout_b == "row" else (cublas.Operation.T, k))
    return (blas.handle, op_b, cublas.Operation.N, n, m, k,
            blas._scalars.ctypes.data, b, ab, ld_b, a, ab, k,
            blas._scalars.ctypes.data + 4, c, c_data, n,
            getattr(cublas.ComputeType, compute), cublas.GemmAlgo.DEFAULT)


@pytest.mark.parametrize("precision,c_type", [("fp32", "fp32"), ("tf32", "fp32"),
                                              ("bf16", "bf16"), ("fp16", "fp32")])
@pytest.mark.parametrize("layout_b", LAYOUTS)
def test_cublas_gemm_with_row_major_a_and_c_is_todays_call(precision, c_type, layout_b):
    blas = _fake_blas()
    for m, n, k in ((37, 45, 29), (4096, 4096, 4096), (128, 256, 64)):
        blas.gemm(precision, m, n, k, 0.75, 0xA000, 0xB000, -0.5, 0xC000, layout_b, c_type)
        assert blas._cublas.calls[-1] == _todays_call(blas, precision, m, n, k, 0xA000, 0xB000,
                                                      0xC000, layout_b, c_type)
        blas.gemm(precision, m, n, k, 1.0, 0xA000, 0xB000, 0.0, 0xC000, layout_b, c_type,
                  layout_a="row", layout_c="row")
        assert blas._cublas.calls[-1] == _todays_call(blas, precision, m, n, k, 0xA000, 0xB000,
                                                      0xC000, layout_b, c_type)
    assert list(blas._scalars) == [1.0, 0.0]


def test_cublas_gemm_passes_a_column_major_c_with_a_first():
    blas = _fake_blas()
    blas.gemm("fp32", 37, 45, 29, 1.0, 0xA000, 0xB000, 0.0, 0xC000, "row",
              layout_a="col", layout_c="col")
    call = blas._cublas.calls[-1]
    assert call[1:6] == ("OP_N", "OP_T", 37, 45, 29)
    assert call[7] == 0xA000 and call[9] == 37 and call[10] == 0xB000 and call[12] == 45
    assert call[14] == 0xC000 and call[16] == 37
    assert gemm_ex_operands(37, 45, 29, "col", "row", "col") == GemmExOperands(
        "N", "T", 37, 45, 29, "A", 37, 45, 37)


# ---- the report's kernel record -----------------------------------------------------------

BODY = '\nextern "C" __global__ void k(const float* A, const float* B, float* C, int M, int N, ' \
       'int K) {}\n'


def _kernel(extra: str = ""):
    source = ("/* harness\nentry = \"k\"\nsummary = \"s\"\nprecision = \"fp32\"\n"
              "min_arch = \"sm_80\"\nblock = [\"256\"]\ngrid = [\"cdiv(N, 16)\", \"cdiv(M, 16)\"]\n"
              f"{extra}*/" + BODY)
    (kernel,) = kernels_in(parse_spec(source, Path("k.cu")))
    return kernel


def test_kernel_info_names_the_signature_and_layouts():
    plain = KernelInfo.of(_kernel())
    assert plain.signature == "" and plain.layouts == "A row, B row, C row"
    declared = KernelInfo.of(_kernel('signature = ["A", "B", "C", "M", "N", "K"]\n'
                                     'layout_b = "col"\nlayout_c = "col"\n'))
    assert declared.signature == "ptr A, ptr B, ptr C, i32 M, i32 N, i32 K"
    assert declared.layouts == "A row, B col, C col"
    assert signature_text(None) == ""
    assert signature_text(DEFAULT_SIGNATURE) == ("i32 M, i32 N, i32 K, f32 alpha, ptr A, ptr B, "
                                                 "f32 beta, ptr C")
    names = frozenset({"BM"})
    sig = parse_signature(["A", "B", "C", "M", {"const": 3}], names)
    assert signature_text(sig) == "ptr A, ptr B, ptr C, i32 M, const 3"
    assert layouts_text(SimpleNamespace(layout_b="row")) == "A row, B row, C row"


def test_kernel_info_round_trips_and_old_reports_still_load():
    info = KernelInfo.of(_kernel('signature = ["A", "B", "C", "M", "N", "K"]\n'))
    res = Result.of(info, 64, 64, 64)
    back = Result.from_json(res.to_json())
    assert back.kernel == info and back.kernel.signature.startswith("ptr A")
    old = res.to_json()
    del old["kernel"]["signature"], old["kernel"]["layouts"]
    loaded = Result.from_json(old)
    assert loaded.kernel.signature == "" and loaded.kernel.layouts == ""
    flat = Result.from_json({"kernel": "x", "m": 8, "n": 8, "k": 8, "precision": "fp32"})
    assert flat.kernel.signature == "" and flat.kernel.layouts == ""


# ---- Operands with a host-memory stand-in for device buffers ----------------------------------


class _HostBuffer:
    """driver.Buffer as far as Operands uses it, in host memory."""

    def __init__(self, nbytes: int):
        self.nbytes, self.data, self.address = nbytes, bytearray(nbytes), id(self)

    def upload(self, array, stream):
        array = np.ascontiguousarray(array)
        assert array.nbytes == self.nbytes
        self.data[:] = array.tobytes()

    def upload_at(self, array, offset, stream):
        raw = np.ascontiguousarray(array).tobytes()
        self.data[offset:offset + len(raw)] = raw

    def fill(self, word, word_bytes, stream):
        dtype = np.uint32 if word_bytes == 4 else np.uint16
        self.data[:] = np.full(self.nbytes // word_bytes, word, dtype=dtype).tobytes()

    def download(self, dtype, shape, stream):
        return np.frombuffer(bytes(self.data), dtype=dtype).reshape(shape).copy()

    def copy_from(self, source, stream):
        self.data[: source.nbytes] = source.data

    def array(self, dtype):
        return np.frombuffer(bytes(self.data), dtype=dtype)

    def close(self):
        pass


class _Stream:
    def synchronize(self, what=""):
        pass


def _fake_kernel(ops, alpha, beta):
    """What a correct kernel does with these layouts: read A, B, C as stored, write C."""
    dtype = numerics.c_dtype(ops.c_type)
    a_stored = ops.a.array(np.float32)
    a = (a_stored.reshape(ops.k, ops.m).T if ops.layout_a == "col"
         else a_stored.reshape(ops.m, ops.k))
    b_stored = ops.b.array(np.float32)
    b = (b_stored.reshape(ops.n, ops.k).T if ops.layout_b == "col"
         else b_stored.reshape(ops.k, ops.n))
    whole = ops.c.array(dtype).copy()
    c = logical_c(whole[: ops.m * ops.n], ops.layout_c, ops.m, ops.n).astype(np.float64)
    out = alpha * (a.astype(np.float64) @ b) + (beta * c if beta else 0)
    whole[: ops.m * ops.n] = stored_c(out.astype(dtype), ops.layout_c).reshape(-1)
    ops.c.upload(whole, None)


@pytest.mark.parametrize("layouts", list(itertools.product(LAYOUTS, repeat=3)),
                         ids=lambda t: "A{}-B{}-C{}".format(*t))
def test_operands_in_every_layout_meet_the_reference(monkeypatch, layouts):
    from harness.kinds.gemm import operands
    monkeypatch.setattr(operands, "Buffer", _HostBuffer)
    layout_a, layout_b, layout_c = layouts
    stream = _Stream()
    ops = operands.Operands(stream, M, N, K, "fp32", layout_b, 5, with_c=True,
                            layout_a=layout_a, layout_c=layout_c)
    ops.poison_c(stream)
    assert np.array_equal(logical_c(ops.c.array(np.float32)[: M * N], layout_c, M, N),
                          ops.initial())
    _fake_kernel(ops, 0.75, -0.5)
    out, guard = ops.result(stream)
    ref, _ = operands.reference(ops, ("layouts",), 0.75, -0.5)
    assert guard == 0 and out.shape == (M, N)
    assert np.allclose(out, ref, rtol=1e-5, atol=1e-5)
    # reversing A's logical rows reverses C's rows, whatever A's storage
    ops.poison_c(stream)
    with ops.a_rows_reversed(stream):
        _fake_kernel(ops, 1.0, 0.0)
        rev, _ = ops.result(stream)
    assert np.allclose(rev, (ops.a64 @ ops.b64)[::-1], rtol=1e-5, atol=1e-5)
    ops.poison_c(stream)
    _fake_kernel(ops, 1.0, 0.0)
    assert np.allclose(ops.result(stream)[0], ops.a64 @ ops.b64, rtol=1e-5, atol=1e-5)
    # the stale-C probe: new inputs in the same buffers, C kept
    ops.redraw(6, stream)
    _fake_kernel(ops, 1.0, 0.0)
    assert np.allclose(ops.result(stream)[0], ops.a64 @ ops.b64, rtol=1e-5, atol=1e-5)
    # a write past C's end shows in the guard
    ops.poison_c(stream)
    whole = ops.c.array(np.float32).copy()
    whole[M * N + 3] = 1.0
    ops.c.upload(whole, None)
    assert ops.result(stream)[1] == 1


def test_row_major_operands_upload_what_they_always_did(monkeypatch):
    from harness.kinds.gemm import host_values, operands
    monkeypatch.setattr(operands, "Buffer", _HostBuffer)
    stream = _Stream()
    ops = operands.Operands(stream, M, N, K, "bf16", "col", 9, with_c=True, c_type="bf16")
    (a, _, b, _, c_start, _, _), _ = host_values.of(M, N, K, "bf16", 9, True, "bf16")
    assert ops.a.data == bytearray(a.tobytes())
    assert ops.b.data == bytearray(np.ascontiguousarray(b.T).tobytes())
    ops.poison_c(stream)
    assert ops.c.data[: c_start.nbytes] == bytearray(c_start.tobytes())


def test_a_kernel_with_d_writes_d_and_reads_c(monkeypatch):
    """With a separate output the checks read D back; C keeps its start values (the input of
    beta), D starts poisoned, and a kernel that writes C instead leaves D unwritten."""
    from harness.kinds.gemm import operands
    monkeypatch.setattr(operands, "Buffer", _HostBuffer)
    stream = _Stream()
    ops = operands.Operands(stream, M, N, K, "fp32", "row", 5, with_c=True, with_d=True)
    assert ops.out is ops.d and ops.d is not ops.c
    ops.poison_c(stream)
    sentinel = numerics.SENTINEL["fp32"]
    assert (ops.d.array(np.uint32) == sentinel).all()
    assert np.array_equal(ops.c.array(np.float32)[: M * N].reshape(M, N), ops.c_start)
    assert (numerics.bits(ops.initial()) == sentinel).all()  # D, not C's start values
    a, b = ops.a.array(np.float32).reshape(M, K), ops.b.array(np.float32).reshape(K, N)
    c = ops.c.array(np.float32)[: M * N].reshape(M, N).astype(np.float64)
    whole = ops.d.array(np.float32).copy()
    whole[: M * N] = (0.75 * (a.astype(np.float64) @ b) - 0.5 * c).astype(np.float32).ravel()
    ops.d.upload(whole, None)
    out, guard = ops.result(stream)
    ref, _ = operands.reference(ops, ("with D",), 0.75, -0.5)
    assert guard == 0 and np.allclose(out, ref, rtol=1e-5, atol=1e-5)
    # a kernel that writes C instead of D: D still holds the sentinel everywhere
    ops.poison_c(stream)
    _fake_kernel(ops, 0.75, -0.5)
    out, _ = ops.result(stream)
    assert (numerics.bits(out) == sentinel).all()
    # cuBLAS computes in place: it is given D holding C's start values
    ops.start_output(stream)
    assert np.array_equal(ops.d.array(np.float32)[: M * N].reshape(M, N), ops.c_start)


def test_the_d_example_launches_with_d_in_its_place():
    from harness.kernels.registry import PROJECT_ROOT, load_registry
    from harness.kinds.gemm import gemm

    (kernel,) = load_registry([]).select([str(PROJECT_ROOT / "examples" / "gemm_d_fp16.cu")])
    assert kernel.spec.has_d and gemm.declared_launch_problems(kernel) == []
    args = gemm.launch_arguments(kernel, 100, 60, 40, 2.0, 0x100, 0x200, 0.5, 0x300, d=0x400)
    assert [x.value for x in args] == [100, 60, 40, 2.0, 0x100, 0x200, 0.5, 0x300, 0x400]
    assert type(args[0]).__name__ == "c_long"  # 64-bit sizes


@pytest.mark.parametrize("layouts", [("row", "row", "row"), ("col", "col", "col")],
                         ids=lambda t: "A{}-B{}-C{}".format(*t))
def test_a_placed_copy_holds_the_same_operands_in_buffers_of_its_own(monkeypatch, layouts):
    """A timing's placements: A and B as the original holds them (copied on the device), C
    and D its own, so a kernel on the copy computes the same product and leaves the
    original's output alone."""
    from harness.kinds.gemm import operands
    monkeypatch.setattr(operands, "Buffer", _HostBuffer)
    layout_a, layout_b, layout_c = layouts
    stream = _Stream()
    ops = operands.Operands(stream, M, N, K, "fp32", layout_b, 5, layout_a=layout_a,
                            layout_c=layout_c, with_d=True)
    twin = ops.placed_copy(stream)
    for mine, its in ((twin.a, ops.a), (twin.b, ops.b)):
        assert mine is not its and mine.data == its.data
    assert {id(twin.c), id(twin.d)}.isdisjoint({id(ops.c), id(ops.d)})
    assert twin.out is twin.d and twin.blas_out is not ops.blas_out
    ops.poison_c(stream)
    twin.poison_c(stream)
    twin.out = twin.c  # the stand-in kernel writes C
    _fake_kernel(twin, 1.0, 0.0)
    twin.out = twin.d
    assert np.allclose(logical_c(twin.c.array(np.float32)[: M * N], layout_c, M, N),
                       ops.a64 @ ops.b64, rtol=1e-5, atol=1e-5)
    assert (ops.c.array(np.uint32) == numerics.SENTINEL["fp32"]).all()


def test_operands_are_restored_as_drawn_after_every_timing_and_after_a_redraw(monkeypatch):
    """A timing draws other values into A and B; ``restore`` brings back the drawn ones, from
    the host the first time and from device copies after, and a redraw's values once
    redrawn (the copies of the old ones dropped)."""
    from harness.kinds.gemm import operands
    monkeypatch.setattr(operands, "Buffer", _HostBuffer)
    stream = _Stream()
    ops = operands.Operands(stream, M, N, K, "bf16", "col", 5)
    drawn = (bytes(ops.a.data), bytes(ops.b.data))
    uploads = []
    monkeypatch.setattr(ops, "_upload", lambda *a: uploads.append(1) or
                        operands.Operands._upload(ops, *a))
    for timing in range(3):
        for buf in (ops.a, ops.b):  # what a timing's fresh draws leave behind
            buf.data[:] = bytes([timing + 1]) * buf.nbytes
        ops.restore(stream)
        assert (bytes(ops.a.data), bytes(ops.b.data)) == drawn
    assert len(uploads) == 1  # the first restore only
    ops.redraw(6, stream)
    redrawn = (bytes(ops.a.data), bytes(ops.b.data))
    assert redrawn != drawn
    ops.a.data[:] = bytes(ops.a.nbytes)
    ops.restore(stream)
    assert (bytes(ops.a.data), bytes(ops.b.data)) == redrawn
