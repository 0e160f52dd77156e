"""Large checks' references on the GPU (issue 37, harness/gpu/reference.py): on the CPU, the
DGEMM call of Cublas.dgemm through a fake of the bindings that does cublasDgemm's column-major
math in numpy on host memory, the reference and error scale against numpy's, their refusals,
and which references go to the GPU (the size threshold, the host without a session); on a GPU,
the device's reference and scale against the host's."""

from __future__ import annotations

import ctypes
import math
from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest

from harness.errors import DeviceError, HarnessError
from harness.gpu import cublas as cublas_mod
from harness.gpu import reference
from harness.gpu.cublas import Cublas
from harness.gpu.reference import MIN_MNK, reference_and_scale
from harness.kinds.gemm import host_values, numerics, operands, references

SHAPES = [(5, 7, 3), (37, 45, 29), (16, 80, 32), (1, 9, 4), (64, 1, 8)]


# ---- a fake of the bindings: cublasDgemm's math on host memory ---------------------------------


def _doubles_at(address: int, count: int) -> np.ndarray:
    """``count`` float64 at ``address`` (host memory here), as a writable array."""
    return np.ctypeslib.as_array((ctypes.c_double * count).from_address(address))


def _col_major(address: int, rows: int, cols: int, ld: int) -> np.ndarray:
    assert ld >= rows
    flat = _doubles_at(address, ld * (cols - 1) + rows)
    return flat[np.arange(rows)[:, None] + np.arange(cols)[None, :] * ld]


class FakeBindings:
    """nvmath.bindings.cublas as far as Cublas makes a handle and calls dgemm; dgemm computes
    C (m x n, column-major, ldc) = alpha op(A) op(B) + beta C, each operand read as a
    column-major array with its leading dimension, and at beta = 0 does not read C."""

    Operation = SimpleNamespace(N="OP_N", T="OP_T")
    Math = SimpleNamespace(DEFAULT_MATH="DEFAULT_MATH")

    def __init__(self, fail: bool = False):
        self.calls: list[tuple] = []
        self.fail = fail

    def create(self):
        return 0xB1A5

    def destroy(self, handle):
        self.calls.append(("destroy", handle))

    def set_stream(self, handle, stream):
        self.calls.append(("set_stream", handle, stream))

    def set_workspace(self, handle, address, nbytes):
        self.calls.append(("set_workspace", handle, nbytes))

    def set_math_mode(self, handle, mode):
        self.calls.append(("set_math_mode", handle, mode))

    def get_version(self, handle):
        return 120905

    def dgemm(self, handle, transa, transb, m, n, k, alpha_at, a, lda, b, ldb, beta_at, c, ldc):
        self.calls.append(("dgemm", transa, transb, m, n, k, lda, ldb, ldc))
        if self.fail:
            raise RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED")
        alpha, beta = _doubles_at(alpha_at, 1)[0], _doubles_at(beta_at, 1)[0]
        op = self.Operation
        op_a = _col_major(a, m, k, lda) if transa == op.N else _col_major(a, k, m, lda).T
        op_b = _col_major(b, k, n, ldb) if transb == op.N else _col_major(b, n, k, ldb).T
        out = _doubles_at(c, ldc * (n - 1) + m)
        index = np.arange(m)[:, None] + np.arange(n)[None, :] * ldc
        product = alpha * (op_a @ op_b)
        out[index] = product + beta * out[index] if beta != 0.0 else product


class Workspace:
    """driver.Buffer as the handle's workspace: never touched by the fake dgemm."""

    def __init__(self, nbytes: int):
        self.nbytes, self.address, self.closed = nbytes, 0x7000, False

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def _host_workspace(monkeypatch):
    monkeypatch.setattr(cublas_mod, "Buffer", Workspace)


class HostBuffer:
    """driver.Buffer in host memory (starts as NaN: a product that reads C at beta = 0, or
    an element never written, shows)."""

    made: list[HostBuffer] = []

    def __init__(self, nbytes: int):
        if nbytes <= 0:
            raise HarnessError(f"a device buffer needs a positive size, got {nbytes} bytes")
        self.nbytes, self.memory = nbytes, np.full(-(-nbytes // 8), np.nan)
        self.closed, self.uploads, self.streams = False, 0, set()
        self.made.append(self)

    @property
    def address(self) -> int:
        return self.memory.ctypes.data

    def upload(self, array: np.ndarray, stream) -> None:
        assert not self.closed and array.dtype == np.float64 and array.nbytes == self.nbytes
        self.memory[:] = np.ascontiguousarray(array).reshape(-1)
        self.uploads += 1
        self.streams.add(id(stream))

    def download(self, dtype, shape, stream) -> np.ndarray:
        assert not self.closed
        self.streams.add(id(stream))
        return self.memory.view(dtype)[:math.prod(shape)].reshape(shape).copy()

    def close(self) -> None:
        self.closed = True


class HostKernels:
    """ReferenceKernels on HostBuffers."""

    def __init__(self):
        self.calls = []

    def magnitudes(self, x, n, stream) -> None:
        self.calls.append(("magnitudes", n))
        x.memory[:n] = np.abs(x.memory[:n])

    def narrowed(self, x, y, n, stream) -> None:
        self.calls.append(("narrowed", n))
        y.memory.view(np.float32)[:n] = x.memory[:n].astype(np.float32)


@pytest.fixture
def blas(monkeypatch):
    """A Cublas made by its own constructor on the fake bindings, its device memory on the
    host (HostBuffer.made lists what was allocated)."""
    fake = FakeBindings()
    monkeypatch.setattr(cublas_mod, "_lib", lambda: (SimpleNamespace(), fake))
    monkeypatch.setattr(reference, "Buffer", HostBuffer)
    monkeypatch.setattr(HostBuffer, "made", [])
    made = Cublas(SimpleNamespace(handle=0x5))
    made.fake = fake
    return made


def _operands(m, n, k, seed=3, with_c=True):
    rng = np.random.default_rng(seed)
    _, a64 = numerics.random_operand(rng, (m, k), "fp32")
    _, b64 = numerics.random_operand(rng, (k, n), "fp32")
    c64 = numerics.to_float64(numerics.stored(rng.uniform(-1, 1, (m, n)), "fp32"), "fp32")
    return a64, b64, c64 if with_c else None


def _exact_scale(a64, b64, alpha, beta, c64):
    """The error scale in float64 (numerics.error_scale's formula without its float32)."""
    scale = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    return scale + abs(beta) * np.abs(c64) if beta != 0.0 else scale


# ---- the DGEMM call --------------------------------------------------------------------------


@pytest.mark.parametrize("m,n,k", SHAPES, ids=str)
def test_dgemm_computes_the_row_major_product_with_b_first(blas, m, n, k):
    a64, b64, c64 = _operands(m, n, k)
    c = c64.copy()
    blas.dgemm(m, n, k, 0.75, a64.ctypes.data, b64.ctypes.data, -0.5, c.ctypes.data)
    np.testing.assert_allclose(c, 0.75 * (a64 @ b64) - 0.5 * c64, rtol=1e-13, atol=1e-13)
    # row-major C = column-major C^T = B^T A^T: B first, sizes N, M, K, packed
    assert blas.fake.calls[-1] == ("dgemm", "OP_N", "OP_N", n, m, k, n, k, n)
    assert list(blas._doubles) == [0.75, -0.5] and blas._doubles.dtype == np.float64


def test_the_model_tells_the_unswapped_call_from_the_right_one(blas):
    """A first (both transposed) is the product in column-major C: read as row-major it is
    wrong, and the fake's column-major math tells."""
    m, n, k = 37, 45, 29
    a64, b64, _ = _operands(m, n, k)
    c = np.zeros(m * n)
    op, scalars = FakeBindings.Operation, np.array([1.0, 0.0])
    blas.fake.dgemm(0, op.T, op.T, m, n, k, scalars.ctypes.data, a64.ctypes.data, k,
                    b64.ctypes.data, n, scalars.ctypes.data + 8, c.ctypes.data, m)
    assert np.allclose(c.reshape(n, m).T, a64 @ b64)
    assert not np.allclose(c.reshape(m, n), a64 @ b64)


def test_a_handle_is_made_on_the_stream_and_a_failed_dgemm_names_the_gemm(monkeypatch):
    fake = FakeBindings(fail=True)
    monkeypatch.setattr(cublas_mod, "_lib", lambda: (SimpleNamespace(), fake))
    stream = SimpleNamespace(handle=0x5)
    made = Cublas(stream)
    assert made.stream is stream and ("set_stream", 0xB1A5, 0x5) in fake.calls
    # its own workspace: none allocated inside a captured graph (gpu/graph.py's copies)
    assert ("set_workspace", 0xB1A5, cublas_mod.WORKSPACE_BYTES) in fake.calls
    with pytest.raises(DeviceError, match=r"cublasDgemm failed for 8x9x10 .*EXECUTION_FAILED"):
        made.dgemm(8, 9, 10, 1.0, 0x1000, 0x2000, 0.0, 0x3000)


def test_without_nvmath_cublas_is_not_available(monkeypatch):
    def missing():
        raise HarnessError("the cuBLAS baseline needs nvmath-python")

    monkeypatch.setattr(cublas_mod, "_lib", missing)
    assert not cublas_mod.available()
    monkeypatch.setattr(cublas_mod, "_lib", lambda: (SimpleNamespace(), FakeBindings()))
    assert cublas_mod.available()


# ---- the reference and its error scale -------------------------------------------------------


@pytest.mark.parametrize("m,n,k", SHAPES, ids=str)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.75, -0.5), (-1.5, 2.0)], ids=str)
@pytest.mark.parametrize("on_device", [False, True], ids=["host |A|", "device |A|"])
def test_reference_and_scale_are_numpys(blas, m, n, k, alpha, beta, on_device):
    a64, b64, c64 = _operands(m, n, k, with_c=beta != 0.0)
    kernels = HostKernels() if on_device else None
    ref, scale = reference_and_scale(blas, a64, b64, alpha, beta, c64, kernels)
    host_scale = numerics.error_scale(a64, b64, alpha, beta, c64)
    assert ref.dtype == np.float64 and ref.shape == (m, n)
    assert scale.dtype == host_scale.dtype == np.float32 and scale.shape == (m, n)
    exact = _exact_scale(a64, b64, alpha, beta, c64)
    assert np.all(np.abs(ref - numerics.reference(a64, b64, alpha, beta, c64))
                  <= 1e-13 * exact)
    # float64 rounded once to float32; numpy's float32 sum of K positive terms is within K u32
    np.testing.assert_allclose(scale, exact, rtol=2.0 ** -24, atol=0)
    np.testing.assert_allclose(scale, host_scale, rtol=k * 2.0 ** -24, atol=0)
    a_buf, b_buf, c_buf = HostBuffer.made[:3]
    assert (a_buf.nbytes, b_buf.nbytes, c_buf.nbytes) == (8 * m * k, 8 * k * n, 8 * m * n)
    assert all(b.closed for b in HostBuffer.made)
    # with the device's magnitudes A and B go up once, the scale comes back in float32
    assert a_buf.uploads == b_buf.uploads == (1 if on_device else 2)
    assert len(HostBuffer.made) == (4 if on_device else 3)
    if on_device:
        assert kernels.calls == [("magnitudes", m * k), ("magnitudes", k * n),
                                 ("narrowed", m * n)]
    assert c_buf.uploads == (2 if beta != 0.0 else 0)  # at beta = 0 C is only written
    assert {s for b in HostBuffer.made for s in b.streams} == {id(blas.stream)}
    assert [c[0] for c in blas.fake.calls].count("dgemm") == 2


@pytest.mark.parametrize("kernels", [None, HostKernels()], ids=["host |A|", "device |A|"])
def test_the_scale_is_taken_on_absolute_values(blas, kernels):
    a64 = -np.ones((2, 3))
    b64 = np.array([[1.0, -1.0], [-1.0, 1.0], [1.0, 1.0]])
    c64 = np.array([[-1.0, 2.0], [3.0, -4.0]])
    ref, scale = reference_and_scale(blas, a64, b64, -2.0, -0.5, c64, kernels)
    assert np.array_equal(ref, -2.0 * (a64 @ b64) - 0.5 * c64)
    assert np.array_equal(scale, np.float32(2.0) * 3 + np.float32(0.5) * np.abs(c64))


def test_a_refused_reference_allocates_nothing_and_a_failed_one_frees_what_it_took(blas):
    a64, b64, c64 = _operands(4, 5, 6)
    with pytest.raises(HarnessError, match=r"A's columns to be B's rows: A is 4 x 6, B is 5 x"):
        reference_and_scale(blas, a64, b64.T, 1.0, 0.0, None)
    with pytest.raises(HarnessError, match=r"beta = 0.5 needs C's start values, 4 x 5; "
                                           r"found none"):
        reference_and_scale(blas, a64, b64, 1.0, 0.5, None)
    with pytest.raises(HarnessError, match=r"4 x 5; found 5 x 4"):
        reference_and_scale(blas, a64, b64, 1.0, 0.5, c64.T)
    assert HostBuffer.made == []
    blas.fake.fail = True
    with pytest.raises(DeviceError, match="cublasDgemm failed for 4x5x6"):
        reference_and_scale(blas, a64, b64, 1.0, 0.0, None)
    assert len(HostBuffer.made) == 3 and all(b.closed for b in HostBuffer.made)


# ---- which references go to the GPU ----------------------------------------------------------


@pytest.fixture
def engines(monkeypatch):
    monkeypatch.setattr(references, "_GPU_REFERENCES", [None])
    monkeypatch.setattr(operands, "_REFERENCES", {})


def _recording(calls):
    def engine(a64, b64, alpha, beta, c64):
        calls.append((a64, b64, alpha, beta, c64))
        m, n = a64.shape[0], b64.shape[1]
        return np.full((m, n), 7.0), np.full((m, n), 3.0, dtype=np.float32)
    return engine


def _gemm(precision="fp32"):
    return SimpleNamespace(kernel=SimpleNamespace(spec=SimpleNamespace(precision=precision,
                                                                       c_type="fp32")))


def _ops(m, n, k, with_c=False):
    a64, b64, c64 = _operands(m, n, k, with_c=with_c)
    return SimpleNamespace(m=m, n=n, k=k, a64=a64, b64=b64, c64=c64, draw="uniform",
                           kinds=("fp32", "fp32"))


def test_the_gpu_takes_references_from_the_threshold_on(engines):
    calls = []
    engine = _recording(calls)
    assert MIN_MNK == 1 << 27
    assert references.reference_engine(512, 512, 512) is None  # no session: the host
    references.set_gpu_references(engine)
    assert references.reference_engine(512, 512, 512) is engine
    assert references.reference_engine(8, 8, 1 << 21) is engine
    assert references.reference_engine(512, 512, 511) is None
    assert references.reference_engine(1024, 1024, 2) is None
    large = _ops(512, 512, 512, with_c=True)
    ref, scale = references.reference_of(_gemm(), large, 9, 0.75, -0.5)
    assert np.all(ref == 7.0) and np.all(scale == 3.0)  # the engine's
    ((a64, b64, alpha, beta, c64),) = calls
    assert (a64 is large.a64 and b64 is large.b64 and c64 is large.c64
            and (alpha, beta) == (0.75, -0.5))
    small = _ops(512, 511, 512)
    ref, scale = references.reference_of(_gemm(), small, 9, 1.0, 0.0)
    assert len(calls) == 1 and np.array_equal(ref, small.a64 @ small.b64)
    assert np.array_equal(scale, numerics.error_scale(small.a64, small.b64, 1.0, 0.0, None))


def test_without_an_engine_every_reference_is_the_hosts(engines):
    large = _ops(512, 512, 512, with_c=True)
    ref, scale = references.reference_of(_gemm(), large, 9, 0.75, -0.5)
    assert np.array_equal(ref, numerics.reference(large.a64, large.b64, 0.75, -0.5, large.c64))
    assert np.array_equal(scale, numerics.error_scale(large.a64, large.b64, 0.75, -0.5,
                                                      large.c64))


def test_a_large_reference_through_the_fake_gpu_is_numpys_and_cached_once(engines, blas):
    references.set_gpu_references(partial(reference_and_scale, blas))
    ops = _ops(1024, 1024, 128, with_c=True)
    first = references.reference_of(_gemm(), ops, 9, 0.75, -0.5)
    again = references.reference_of(_gemm(), ops, 9, 0.75, -0.5)
    assert again[0] is first[0] and again[1] is first[1]  # the cache, as on the host
    assert [c[0] for c in blas.fake.calls].count("dgemm") == 2
    exact = _exact_scale(ops.a64, ops.b64, 0.75, -0.5, ops.c64)
    host = numerics.reference(ops.a64, ops.b64, 0.75, -0.5, ops.c64)
    assert np.all(np.abs(first[0] - host) <= 1e-13 * exact)
    np.testing.assert_allclose(first[1], exact, rtol=2.0 ** -24, atol=0)


def test_a_session_takes_back_only_its_own_engine(engines):
    ours, theirs = _recording([]), _recording([])
    references.set_gpu_references(ours)
    references.release_gpu_references(theirs)
    assert references.reference_engine(512, 512, 512) is ours
    references.release_gpu_references(ours)
    assert references.reference_engine(512, 512, 512) is None


# ---- on a GPU ----------------------------------------------------------------------------------


@pytest.mark.gpu_shared
@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "bf16"])
def test_a_reference_of_stored_codes_widened_on_the_device_is_the_float64_ones(device,
                                                                               precision):
    """gpu/reference.Stored: A and B uploaded in their storage form and widened on the device
    give the reference and scale, bit for bit, that their float64 values uploaded give (the
    same DGEMM on the same values); an odd shape, and a wide draw's exponents too. Without
    the device's kernels, the host widens them (the same values)."""
    from harness.gpu.driver import Stream
    from harness.gpu.reference import ReferenceKernels, Stored

    rng = np.random.default_rng(5)
    m, n, k = 333, 517, 129
    a, a64 = numerics.random_operand(rng, (m, k), precision, "wide")
    b, b64 = numerics.random_operand(rng, (k, n), precision, "uniform")
    stored = Stored(a, precision), Stored(b, precision)
    assert np.array_equal(stored[0].values(), a64) and np.array_equal(stored[1].values(), b64)
    stream = Stream()
    blas = Cublas(stream)
    try:
        kernels = ReferenceKernels(device.sm_count)
        wide = reference_and_scale(blas, a64, b64, 1.0, 0.0, None, kernels)
        narrow = reference_and_scale(blas, *stored, 1.0, 0.0, None, kernels)
        on_host = reference_and_scale(blas, *stored, 1.0, 0.0, None)
    finally:
        blas.close()
        stream.close()
    for got in (narrow, on_host):
        assert np.array_equal(got[0], wide[0]) and np.array_equal(got[1], wide[1])


@pytest.mark.gpu_shared
@pytest.mark.parametrize("m,n,k,alpha,beta", [(1024, 768, 512, 0.75, -0.5),
                                              (2048, 2048, 2048, 1.0, 0.0),
                                              (333, 517, 129, -1.25, 0.0)], ids=str)
@pytest.mark.parametrize("on_device", [False, True], ids=["host |A|", "device |A|"])
def test_the_gpus_reference_and_scale_are_the_hosts(device, m, n, k, alpha, beta, on_device):
    """To 1e-12 elementwise: the reference relative to its error scale (an element near 0 has
    no relative precision of its own), the scale in float64 (the reference of |A|, |B|, |C|)
    relative to itself, and in float32 within one rounding of it; the magnitudes and the
    float32 scale made on the host or on the device (an odd count of elements too)."""
    from harness.gpu.driver import Stream
    from harness.gpu.reference import ReferenceKernels

    a64, b64, c64 = _operands(m, n, k, seed=11, with_c=beta != 0.0)
    stream = Stream()
    blas = Cublas(stream)
    kernels = ReferenceKernels(device.sm_count) if on_device else None
    try:
        ref, scale = reference_and_scale(blas, a64, b64, alpha, beta, c64, kernels)
        scale64, _ = reference_and_scale(blas, np.abs(a64), np.abs(b64), abs(alpha), abs(beta),
                                         None if c64 is None else np.abs(c64))
    finally:
        blas.close()
        stream.close()
    exact = _exact_scale(a64, b64, alpha, beta, c64)
    host = numerics.reference(a64, b64, alpha, beta, c64)
    worst = float(np.max(np.abs(ref - host) / exact))
    assert worst <= 1e-12, f"reference off by {worst:.2e} of its error scale"
    np.testing.assert_allclose(scale64, exact, rtol=1e-12, atol=0)
    assert scale.dtype == np.float32
    np.testing.assert_allclose(scale, exact, rtol=2.0 ** -23, atol=0)
    np.testing.assert_allclose(scale, numerics.error_scale(a64, b64, alpha, beta, c64),
                               rtol=k * 2.0 ** -24, atol=0)


@pytest.mark.gpu
@pytest.mark.gpu_shared
def test_a_session_computes_large_references_on_its_gpu_while_open():
    from harness.kinds.gemm.session import GemmSession

    with GemmSession.open() as session:
        assert references.reference_engine(512, 512, 512) == session.reference_on_gpu
        assert references.reference_engine(256, 256, 256) is None
        a64, b64, _ = _operands(512, 512, 512)
        ref, _ = references.reference_engine(512, 512, 512)(a64, b64, 1.0, 0.0, None)
        assert np.all(np.abs(ref - a64 @ b64) <= 1e-12 * (np.abs(a64) @ np.abs(b64)))
    assert references.reference_engine(512, 512, 512) is None


# ---- an FP8 check's walk on the GPU (gpu/fp8_walk.py) ----------------------------------------


def _fp8_ops(m, n, k, scales="tensor"):
    from harness.kernels.fp8_spec import Fp8Spec

    spec = Fp8Spec("e4m3", "e5m2", scales, 128 if scales == "block" else None)
    (a, a64, b, b64, _, _, drawn), _ = host_values.of(m, n, k, "fp8", 5, False, "bf16",
                                                      fp8=spec)
    ops = SimpleNamespace(m=m, n=n, k=k, a64=a64, b64=b64, c64=None, draw="uniform",
                          kinds=("e4m3", "e5m2"), fp8=spec, codes=(a, b), scales=drawn)
    gemm = SimpleNamespace(kernel=SimpleNamespace(spec=SimpleNamespace(
        precision="fp8", c_type="bf16", fp8=spec)))
    return gemm, ops


def _host_sums(calls):
    """A walk engine that records its arguments and makes the sums as the host does."""
    from harness.kinds.gemm.fp8 import check as fp8_check
    from harness.kinds.gemm.fp8.formats import FORMATS

    def sums(a, b, table_a, table_b, run, scale_a=None, scale_b=None):
        calls.append((a, b, run, scale_a, scale_b))
        fa, fb = (next(f for f, v in FORMATS.items() if np.array_equal(v.values, t, True))
                  for t in (table_a, table_b))
        g = fp8_check.Fp8Gemm(a, b, fa, fb, 1.0 if scale_a is None else scale_a,
                              1.0 if scale_b is None else scale_b, promote=run)
        return fp8_check.walk_sums(g)
    return sums


@pytest.mark.parametrize("scales", ["tensor", "block"])
def test_a_large_fp8_checks_walk_is_made_where_its_reference_is(engines, monkeypatch, scales):
    from harness.kinds.gemm.fp8 import check as fp8_check
    monkeypatch.setattr(references, "_GPU_WALKS", [None])
    gemm, ops = _fp8_ops(512, 512, 512, scales)
    assert references.walk_of(gemm, ops, 5) is None  # no session: the check walks on the host
    calls = []
    references.set_gpu_references(_recording([]), walks=_host_sums(calls))
    ref, scale, walked = references.known_of(gemm, ops, 5, 1.0, 0.0)
    assert np.all(ref == 7.0) and np.all(scale == 3.0)  # the engine's reference
    ((a, b, run, sa, sb),) = calls
    assert a is ops.codes[0] and b is ops.codes[1]
    assert run == (128 if scales == "block" else 512)
    assert (sa is None) == (scales == "tensor")
    g = fp8_check.Fp8Gemm(*ops.codes, "e4m3", "e5m2", *ops.scales, "bf16",
                          ops.fp8.promote)
    np.testing.assert_allclose(walked, fp8_check.walk(g), rtol=1e-6)
    # past the whole output's budget: the walk over the rows and columns the check samples
    _, big = _fp8_ops(1024, 1024, 4128, scales)
    assert not fp8_check.whole(1024, 1024, 4128)
    walked = references.walk_of(gemm, big, 5)
    rows, cols = fp8_check.sample(1024, 1024, 4128, 5)
    assert walked.shape == (len(rows), len(cols)) == (256, 256)
    sampled = fp8_check.Fp8Gemm(big.codes[0][rows], big.codes[1][:, cols], "e4m3", "e5m2",
                                *fp8_check.subset(big.scales, rows, cols, 1024), "bf16",
                                big.fp8.promote)
    np.testing.assert_allclose(walked, fp8_check.walk(sampled), rtol=1e-6)
    # below the reference's threshold, or not FP8: the host
    small = _fp8_ops(512, 512, 496, scales)[1]
    assert references.walk_of(gemm, small, 5) is None
    fp32 = SimpleNamespace(**vars(_ops(512, 512, 512)), fp8=None)
    assert references.walk_of(_gemm(), fp32, 5) is None
    references.release_gpu_references(references._GPU_REFERENCES[0][0])
    assert references.walk_of(gemm, ops, 5) is None and len(calls) == 2


@pytest.mark.gpu
@pytest.mark.gpu_shared
def test_the_gpus_walk_is_the_hosts_and_a_session_makes_it_while_open():
    """The kernel's sums against fp8_check's on the host, to float32 rounding: per tensor and
    per block (B's scales per 128 columns and per column), promotions every 64 and every 128,
    K not a multiple of 32 and shapes not of 16; and a session's checks make it on its GPU."""
    from harness.kinds.gemm.fp8 import check as fp8_check
    from harness.kinds.gemm.fp8.formats import FORMATS
    from harness.kinds.gemm.session import GemmSession

    rng = np.random.default_rng(17)
    with GemmSession.open() as session:
        cases = []
        for m, n, k, blocked, promote in [(37, 45, 48, False, None), (64, 200, 1024, False, 64),
                                          (130, 257, 512, True, None),
                                          (96, 384, 768, True, 256)]:
            a = FORMATS["e4m3"].draw(rng, (m, k), 3)
            b = FORMATS["e5m2"].draw(rng, (k, n), 3)
            if blocked:
                sa = 2.0 ** rng.integers(-6, 4, size=(m, k // 128))
                sb = 2.0 ** rng.integers(-6, 4, size=(k // 128, -(-n // 128)))
                cases += [(a, b, sa, sb, promote or 128),
                          (a, b, sa, np.repeat(sb, 128, axis=1)[:, :n], promote or 128)]
            else:
                cases.append((a, b, 2.0 ** -5, 12.0, promote))
        for a, b, sa, sb, promote in cases:
            g = fp8_check.Fp8Gemm(a, b, "e4m3", "e5m2", sa, sb, "bf16", promote)
            device = fp8_check.walk_with(g, session.fp8_walk_sums)
            np.testing.assert_allclose(device, fp8_check.walk(g), rtol=1e-5, atol=0)
        gemm, ops = _fp8_ops(512, 512, 512, "block")
        walked = references.walk_of(gemm, ops, 5)
        g = fp8_check.Fp8Gemm(*ops.codes, "e4m3", "e5m2", *ops.scales, "bf16", 128)
        np.testing.assert_allclose(walked, fp8_check.walk(g), rtol=1e-5, atol=0)
    assert references.walk_of(gemm, ops, 5) is None
