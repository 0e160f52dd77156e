"""The buffers kind's library baselines and memory ceiling: names, operand checks, a missing
library said as a HarnessError, and the ceiling's arithmetic on any machine; on the GPU, each
baseline's result against numpy, each captured in the timer's graphs, and the measured copy
bandwidth against the DRAM peak (tests marked ``gpu``)."""

from __future__ import annotations

import contextlib
import importlib.util
import math
import re
import sys
import types

import numpy as np
import pytest

import harness
from harness.errors import DeviceError, HarnessError
from harness.gpu.driver import Buffer
from harness.kinds.buffers.baselines import Operand
from harness.kinds.buffers.named import BASELINES, make_baseline
from harness.kinds.buffers.roofline import (
    MemoryCeiling,
    above_ceiling,
    ceiling_bytes,
    compile_read_kernel,
)
from harness.kinds.gemm.numerics import bf16_bits, bf16_to_float

U32 = 2.0 ** -24


def _fake(dtype: str, shape: tuple[int, ...]) -> Operand:
    """An operand on no memory at all (Buffer.view calls no driver): for the checks made before
    a baseline touches the GPU."""
    nbytes = math.prod(shape) * (2 if dtype in ("bf16", "f16") else 4)
    return Operand(Buffer.view(0x1000, nbytes), dtype, shape)


# --- names and operands ----------------------------------------------------------------------

def test_none_is_no_baseline():
    assert make_baseline("none", [_fake("f32", (8,))], _fake("f32", (1,)), 36, None) is None
    assert BASELINES == ("copy", "cub_sum", "torch_softmax", "none")


@pytest.mark.parametrize("name", ["cublas", "CUB_SUM", "", None])
def test_an_unknown_baseline_names_the_known_ones(name):
    with pytest.raises(HarnessError, match=rf"^baseline {re.escape(repr(name))}: expected one "
                                           r"of copy, cub_sum, torch_softmax, none$"):
        make_baseline(name, [_fake("f32", (8,))], _fake("f32", (1,)), 36, None)


def test_an_operand_checks_its_dtype_and_its_buffer():
    with pytest.raises(HarnessError, match=r"^operand dtype 'f64': expected one of f32, bf16"):
        Operand(Buffer.view(0x1000, 64), "f64", (8,))
    with pytest.raises(HarnessError, match=r"^operand f32 \[4, 5\] needs 80 bytes, its buffer "
                                           r"holds 64$"):
        Operand(Buffer.view(0x1000, 64), "f32", (4, 5))
    padded = Operand(Buffer.view(0x1000, 96), "bf16", (4, 5))
    assert (padded.elements, padded.nbytes) == (20, 40)


@pytest.mark.parametrize(("name", "inputs", "output", "message"), [
    ("copy", [], ("f32", (1,)), r"^baseline copy: the kernel's compulsory bytes are 1; a copy "
                                r"of half of them needs at least 2$"),
    ("cub_sum", [], ("f32", (1,)), r"cub_sum sums one f32 input; found no input"),
    ("cub_sum", [("bf16", (64,))], ("f32", (1,)), r"cub_sum sums one f32 input; found bf16"),
    ("cub_sum", [("f32", (64,))], ("f32", (2,)), r"cub_sum writes one f32; the kernel's "
                                                 r"output is f32 \[2\]"),
    ("torch_softmax", [("f32", (64,))], ("f32", (64,)), r"takes one 2-D f32 or bf16 input; "
                                                        r"found f32 \[64\]"),
    ("torch_softmax", [("f16", (4, 16))], ("f16", (4, 16)), r"found f16 \[4, 16\]"),
    ("torch_softmax", [("bf16", (4, 16))], ("f32", (4, 16)), r"writes bf16 \[4, 16\] like its "
                                                             r"input; the kernel's output is "
                                                             r"f32 \[4, 16\]"),
])
def test_a_baseline_refuses_operands_it_cannot_take(name, inputs, output, message):
    with pytest.raises(HarnessError, match=message):
        make_baseline(name, [_fake(*i) for i in inputs], _fake(*output), 1, None)


# --- a missing library -----------------------------------------------------------------------

def _without(monkeypatch, *modules: str) -> None:
    """Make ``import m`` fail for each module (None in sys.modules: ImportError)."""
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def test_torch_softmax_without_pytorch_says_what_to_install(monkeypatch):
    _without(monkeypatch, "torch")
    with pytest.raises(HarnessError, match=r"^baseline torch_softmax needs PyTorch \(import "
                                           r"torch failed: .*\): install PyTorch with CUDA "
                                           r"\(`python3 -m pip install torch`") as caught:
        make_baseline("torch_softmax", [_fake("bf16", (4, 16))], _fake("bf16", (4, 16)), 256,
                      None)
    assert not isinstance(caught.value, ImportError) and 'baseline = "none"' in str(caught.value)


def test_cub_sum_without_cuda_compute_or_cupy_says_what_to_install(monkeypatch):
    _without(monkeypatch, "cuda.compute", "cupy")
    with pytest.raises(HarnessError, match=r"^baseline cub_sum needs cuda.compute or CuPy, and "
                                           r"neither is usable here \(import cuda.compute "
                                           r"failed: .*; import cupy failed: .*\): install "
                                           r"NVIDIA's cuda-cccl .*scripts/wheels.sh") as caught:
        make_baseline("cub_sum", [_fake("f32", (64,))], _fake("f32", (1,)), 260, None)
    assert not isinstance(caught.value, ImportError)


def test_cuda_compute_without_its_bindings_counts_as_missing(monkeypatch):
    """On a machine without the CUDA driver, cuda.compute imports, warns and has no bindings:
    its module __getattr__ raises AttributeError for every algorithm."""
    hollow = types.ModuleType("cuda.compute")

    def missing(name):
        raise AttributeError(f"Cannot access 'cuda.compute.{name}' because CUDA bindings are "
                             "not available.")

    hollow.__getattr__ = missing
    monkeypatch.setitem(sys.modules, "cuda.compute", hollow)
    _without(monkeypatch, "cupy")
    with pytest.raises(HarnessError, match=r"cuda.compute imported without its bindings: Cannot "
                                           r"access 'cuda.compute.OpKind'"):
        make_baseline("cub_sum", [_fake("f32", (64,))], _fake("f32", (1,)), 260, None)


# --- what each library is handed (stand-ins: no GPU, no library) ------------------------------

@pytest.fixture
def no_driver(monkeypatch):
    """The baselines' own driver calls stood in for: buffers at made-up addresses (``made``, in
    the order allocated), no context to keep, device 0, a stream that is only a handle."""
    from harness.kinds.buffers import baselines

    made = []

    class FakeBuffer:
        def __init__(self, nbytes: int):
            self.nbytes, self.closed = nbytes, False
            self.address = self.dptr = 0x7000_0000 + (len(made) << 24)
            made.append(self)

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(baselines, "Buffer", FakeBuffer)
    monkeypatch.setattr(baselines, "context_kept", contextlib.nullcontext)
    monkeypatch.setattr(baselines, "current_ordinal", lambda: 0)
    stream = types.SimpleNamespace(handle=0xABC0, synchronize=lambda context="": None)
    return types.SimpleNamespace(made=made, stream=stream)


def _fake_cuda_compute(calls: list, build_error: Exception | None = None) -> types.ModuleType:
    module = types.ModuleType("cuda.compute")
    module.OpKind = types.SimpleNamespace(PLUS="PLUS")

    def make_reduce_into(*, d_in, d_out, op, h_init):
        if build_error is not None:
            raise build_error
        calls.append(("make", d_in.__cuda_array_interface__, d_out.__cuda_array_interface__,
                      op, h_init.dtype, float(h_init.sum())))

        def reducer(*, temp_storage, d_in, d_out, num_items, op, h_init, stream):
            temp = None if temp_storage is None else (
                temp_storage.__cuda_array_interface__["data"][0], temp_storage.nbytes)
            calls.append(("call", temp, num_items, stream.__cuda_stream__()))
            return 4096

        return reducer

    module.make_reduce_into = make_reduce_into
    return module


def test_cub_sum_hands_cuda_compute_the_harness_buffers_and_stream(no_driver, monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "cuda.compute", _fake_cuda_compute(calls))
    x = Operand(Buffer.view(0x5000, 400), "f32", (100,))
    base = make_baseline("cub_sum", [x], _fake("f32", (1,)), 404, no_driver.stream)
    assert base.label.startswith("CUB DeviceReduce, plus, f32 (cuda.compute ") and not base.note
    out, temp = no_driver.made
    assert base.output.buffer is out and (base.output.dtype, base.output.shape) == ("f32", (1,))
    _, d_in, d_out, op, init_dtype, init = calls[0]
    assert (d_in["data"], d_in["shape"], d_in["typestr"]) == ((0x5000, False), (100,), "<f4")
    assert (d_out["data"], d_out["shape"]) == ((out.address, False), (1,))
    assert (op, init_dtype, init) == ("PLUS", np.float32, 0.0)
    assert calls[1] == ("call", None, 100, (0, 0xABC0))  # the work space's size
    assert calls[2] == ("call", (temp.address, 4096), 100, (0, 0xABC0))  # tried once
    base.launch()
    assert calls[3:] == [calls[2]]
    base.close()
    assert out.closed and temp.closed
    with pytest.raises(HarnessError, match="launched after close"):
        base.launch()


def _fake_cupy(calls: list, monkeypatch) -> None:
    cupy = types.ModuleType("cupy")
    cupy.__version__, cupy.float32 = "13.9.9", np.float32
    active = []

    class ExternalStream:
        def __init__(self, ptr, device_id=-1):
            calls.append(("stream", ptr, device_id))

        def __enter__(self):
            active.append(self)

        def __exit__(self, *exc):
            active.pop()

    cupy.cuda = types.SimpleNamespace(
        UnownedMemory=lambda ptr, size, owner, device_id: types.SimpleNamespace(
            ptr=ptr, size=size, owner=owner, device_id=device_id),
        MemoryPointer=lambda memory, offset: types.SimpleNamespace(memory=memory, offset=offset),
        ExternalStream=ExternalStream)
    cupy.ndarray = lambda shape, dtype, memptr: types.SimpleNamespace(shape=shape, dtype=dtype,
                                                                      memptr=memptr)

    def total(a, out):
        calls.append(("sum", a.memptr.memory.ptr, a.shape, out.memptr.memory.ptr, out.shape,
                      len(active)))

    cupy.sum = total
    core = types.ModuleType("cupy._core")
    core._accelerator = types.SimpleNamespace(ACCELERATOR_CUB=1,
                                              get_routine_accelerators=lambda: [1])
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy._core", core)


def test_cub_sum_falls_back_to_cupy_and_says_why(no_driver, monkeypatch):
    failed = RuntimeError("NVRTC: cub/device/device_reduce.cuh not found")
    monkeypatch.setitem(sys.modules, "cuda.compute", _fake_cuda_compute([], failed))
    calls = []
    _fake_cupy(calls, monkeypatch)
    x = Operand(Buffer.view(0x5000, 400), "f32", (100,))
    base = make_baseline("cub_sum", [x], _fake("f32", (1,)), 404, no_driver.stream)
    assert base.label == "CuPy 13.9.9 sum, f32 (CUB device reduction)"
    assert base.note == ("cuda.compute failed: RuntimeError: NVRTC: "
                         "cub/device/device_reduce.cuh not found")
    (out,) = no_driver.made
    assert calls == [("stream", 0xABC0, 0), ("sum", 0x5000, (100,), out.address, (), 1)]
    base.launch()
    assert calls[-1] == calls[1] and len(calls) == 3


def _fake_torch(calls: list, monkeypatch, copies: bool = False) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.__version__, torch.bfloat16 = "2.9.1+cu130", "bfloat16"
    active = []

    class Tensor:
        def __init__(self, address, dtype):
            self.address, self.dtype = address, dtype

        def data_ptr(self):
            return self.address

        def view(self, dtype):
            return Tensor(self.address, dtype)

    def as_tensor(obj, device):
        cai = obj.__cuda_array_interface__
        calls.append(("as_tensor", cai["data"], cai["shape"], cai["typestr"], device))
        return Tensor(cai["data"][0] + (4096 if copies else 0), cai["typestr"])

    @contextlib.contextmanager
    def stream(s):
        active.append(s)
        yield
        active.pop()

    def softmax_out(x, dim, half_to_float, *, out):
        if torch.fail:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        calls.append(("softmax", x.data_ptr(), x.dtype, dim, half_to_float, out.data_ptr(),
                      out.dtype, len(active)))

    torch.fail, torch.as_tensor = False, as_tensor
    torch.device = lambda kind, index: f"{kind}:{index}"
    torch.cuda = types.SimpleNamespace(
        is_available=lambda: True, stream=stream,
        ExternalStream=lambda ptr, device: calls.append(("stream", ptr, device)) or ptr)
    torch.ops = types.SimpleNamespace(aten=types.SimpleNamespace(
        _softmax=types.SimpleNamespace(out=softmax_out)))
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def test_torch_softmax_wraps_the_input_and_writes_its_own_output(no_driver, monkeypatch):
    calls = []
    torch = _fake_torch(calls, monkeypatch)
    x = Operand(Buffer.view(0x5000, 4 * 16 * 2), "bf16", (4, 16))
    base = make_baseline("torch_softmax", [x], _fake("bf16", (4, 16)), 256, no_driver.stream)
    assert base.label == "PyTorch 2.9.1+cu130 softmax, dim=-1, bf16 (aten::_softmax.out)"
    (out,) = no_driver.made
    assert out.nbytes == 128 and base.output.buffer is out and base.output.shape == (4, 16)
    assert calls == [
        ("as_tensor", (0x5000, False), (4, 16), "<i2", "cuda:0"),  # bf16's bits as int16
        ("as_tensor", (out.address, False), (4, 16), "<i2", "cuda:0"),
        ("stream", 0xABC0, "cuda:0"),
        ("softmax", 0x5000, "bfloat16", -1, False, out.address, "bfloat16", 1),  # tried once
    ]
    base.launch()
    assert calls[-1] == calls[3] and len(calls) == 5
    torch.fail = True
    with pytest.raises(DeviceError, match=r"^PyTorch 2.9.1\+cu130 softmax, dim=-1, bf16 "
                                          r"\(aten::_softmax.out\) failed: RuntimeError: CUDA "
                                          r"error: operation not permitted"):
        base.launch()


def test_torch_softmax_refuses_a_copy_of_the_input(no_driver, monkeypatch):
    _fake_torch([], monkeypatch, copies=True)
    x = Operand(Buffer.view(0x5000, 4 * 16 * 4), "f32", (4, 16))
    with pytest.raises(HarnessError, match=r"PyTorch 2.9.1\+cu130 copied a harness buffer "
                                           r"instead of wrapping it"):
        make_baseline("torch_softmax", [x], _fake("f32", (4, 16)), 512, no_driver.stream)
    assert all(b.closed for b in no_driver.made)


# --- the ceiling's arithmetic ----------------------------------------------------------------

def _ceiling(copy_gbps=2800.0, read_gbps=3000.0, peak_gbps=3352.3) -> MemoryCeiling:
    return MemoryCeiling(copy_gbps, read_gbps, peak_gbps, 2 << 30, 1980.0, "test")


def test_the_ceiling_is_the_faster_measurement():
    assert _ceiling().gbps == 3000.0
    assert _ceiling(copy_gbps=3100.0).gbps == 3100.0


@pytest.mark.parametrize("gbps", [0.0, 1500.0, 3000.0, 3089.9])
def test_a_figure_under_the_ceiling_and_its_margin_is_plausible(gbps):
    assert above_ceiling(gbps, _ceiling()) == ""


def test_a_figure_past_the_margin_is_impossible_and_says_by_how_much():
    why = above_ceiling(3100.0, _ceiling())
    assert why.startswith("3100 GB/s is above the measured memory ceiling of 3000 GB/s (copy "
                          "2800, read 3000) by 3.3%, more than the 3% timing noise allows")
    assert above_ceiling(3001.0, _ceiling(), margin=0.0).startswith("3001 GB/s is above the "
                                                                    "measured")
    assert above_ceiling(3100.0, _ceiling(), margin=0.05) == ""


def test_a_figure_above_the_dram_peak_is_impossible_whatever_the_margin():
    why = above_ceiling(3400.0, _ceiling(), margin=0.5)
    assert why.startswith("3400 GB/s is above the DRAM peak of 3352 GB/s (memory clock x bus "
                          "width)")
    # above both: the DRAM peak is the one said
    assert "DRAM peak" in above_ceiling(4000.0, _ceiling())


@pytest.mark.parametrize("gbps", [math.nan, math.inf, -1.0])
def test_a_figure_that_is_no_bandwidth_is_said(gbps):
    assert "is not a bandwidth" in above_ceiling(gbps, _ceiling())


def test_the_ceiling_buffer_is_far_past_l2_or_refused():
    l2 = 50 << 20
    assert ceiling_bytes(80 << 30, l2) == 2 << 30
    assert ceiling_bytes(8 << 30, l2) == 1 << 30
    assert ceiling_bytes((3 << 30) + 12345, l2) % (1 << 20) == 0
    with pytest.raises(HarnessError, match=r"^the memory ceiling needs buffers of at least 4 x "
                                           r"L2 \(200 MiB\), found 1024 MiB free"):
        ceiling_bytes(1 << 30, l2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_read_kernel_compiles_to_128_bit_loads(arch):
    """Offline: NVRTC and cuobjdump need no GPU. Four independent 128-bit loads per trip."""
    from harness.compiler.sass import disassemble

    sass = disassemble(compile_read_kernel(arch))
    assert sass.count("LDG.E.128") >= 4, sass
    assert "LDG.E " not in sass and "LDG.E.64" not in sass


# --- on the GPU ------------------------------------------------------------------------------

@pytest.fixture
def stream(device):
    from harness.gpu.driver import Stream

    own = Stream()
    yield own
    own.synchronize()
    own.close()


def _timed_in_graphs(launch, stream):
    """The launch timed as a kernel's baseline is: cold L2, replayed from CUDA graphs."""
    timed = harness.time(launch, stream=stream, budget_ms=60, min_ms=20, warmup_ms=20)
    assert timed.timing.graph, "the baseline refused graph capture: the timer enqueued it " \
                               "from the host"
    return timed


@pytest.mark.gpu
def test_the_copy_baseline_moves_the_compulsory_bytes(device, stream):
    nbytes = 256 << 20
    out = Operand(Buffer(4), "f32", (1,))
    with make_baseline("copy", [], out, nbytes, stream) as base:
        assert base.output is None and "cuMemcpyDtoDAsync" in base.label
        timed = _timed_in_graphs(base.launch, stream)
        gbps = nbytes / (timed.median_ms * 1e-3) / 1e9
        peak = device.dram_bytes_per_s / 1e9
        assert 0.3 * peak < gbps <= 1.03 * peak, (gbps, peak, timed.timing)
        for offset in (0, (nbytes // 2) - (1 << 20)):
            want = base.source.download_at(offset, np.uint32, 1 << 18, stream)
            assert np.array_equal(base.target.download_at(offset, np.uint32, 1 << 18, stream),
                                  want)
            assert len(np.unique(want)) > 1000  # random data, not a constant
    out.buffer.close()


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["cuda.compute", "cupy"])
def test_cub_sum_is_numpy_s_sum_within_the_bound(device, stream, monkeypatch, library):
    if library == "cupy":
        pytest.importorskip("cupy")
        _without(monkeypatch, "cuda.compute")
    elif importlib.util.find_spec("cuda.compute") is None:
        pytest.skip("cuda.compute (cuda-cccl) is not installed: scripts/wheels.sh carries it")
    n = (1 << 24) + 3
    x = (np.random.default_rng(7).uniform(-1, 1, n) + 0.25).astype(np.float32)
    buffer = Buffer(x.nbytes)
    buffer.upload(x, stream)
    with make_baseline("cub_sum", [Operand(buffer, "f32", (n,))],
                       _fake("f32", (1,)), 4 * n + 4, stream) as base:
        used = "cuda.compute" if library == "cuda.compute" else "CuPy"
        assert used in base.label, (base.label, base.note)
        assert base.output.dtype == "f32" and base.output.shape == (1,)
        want = float(np.sum(x.astype(np.float64)))
        bound = U32 * abs(want) + 2 * math.sqrt(n) * U32 * float(np.abs(x).astype(np.float64)
                                                                  .sum())
        for _ in range(2):
            base.output.buffer.fill_u32(0x7FC00000, stream)  # NaN: an unwritten output shows
            base.launch()
            got = float(base.output.buffer.download(np.float32, (1,), stream)[0])
            assert abs(got - want) <= bound, (got, want, bound, base.label)
        _timed_in_graphs(base.launch, stream)
        got = float(base.output.buffer.download(np.float32, (1,), stream)[0])
        assert abs(got - want) <= bound, (got, want, bound, base.label)
    buffer.close()


def _softmax64(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_torch_softmax_is_numpy_s_softmax(device, stream, dtype):
    torch = pytest.importorskip("torch")
    rows, cols = (300, 1531) if dtype == "f32" else (64, 4096)
    x = np.random.default_rng(11).uniform(-4, 4, (rows, cols)).astype(np.float32)
    stored = x if dtype == "f32" else bf16_bits(x)
    x64 = (x if dtype == "f32" else bf16_to_float(stored)).astype(np.float64)
    buffer = Buffer(stored.nbytes)
    buffer.upload(stored, stream)
    with make_baseline("torch_softmax", [Operand(buffer, dtype, (rows, cols))],
                       _fake(dtype, (rows, cols)), 2 * stored.nbytes, stream) as base:
        assert base.label.startswith(f"PyTorch {torch.__version__} softmax, dim=-1, {dtype}")
        out = base.output
        assert (out.dtype, out.shape) == (dtype, (rows, cols)) and out.buffer is not buffer
        out.buffer.fill_u32(0x7FC00000, stream)
        base.launch()
        _timed_in_graphs(base.launch, stream)
        raw = out.buffer.download(np.float32 if dtype == "f32" else np.uint16, (rows, cols),
                                  stream)
    got = (raw if dtype == "f32" else bf16_to_float(raw)).astype(np.float64)
    want = _softmax64(x64)
    if dtype == "f32":
        assert np.max(np.abs(got - want)) <= 1e-6
    else:  # rounded to bf16 once at the end: half an ulp, 2^-9 relative, plus f32's own error
        assert np.all(np.abs(got - want) <= 2.0 ** -8 * np.abs(want) + 1e-6)
    assert np.array_equal(buffer.download(stored.dtype, stored.shape, stream), stored)
    buffer.close()


@pytest.mark.gpu
def test_the_measured_copy_is_between_half_and_all_of_the_dram_peak(device, stream):
    from harness.gpu.timing import TimingOptions
    from harness.kinds.buffers.roofline import measure_ceiling

    ceiling = measure_ceiling(device, stream, TimingOptions(budget_ms=150, min_ms=50,
                                                            warmup_ms=50))
    peak = device.dram_bytes_per_s / 1e9
    assert ceiling.dram_peak_gbps == pytest.approx(peak)
    assert 0.5 * peak <= ceiling.copy_gbps <= peak, ceiling
    assert 0.5 * peak <= ceiling.read_gbps <= peak, ceiling
    assert ceiling.nbytes >= 4 * device.l2_bytes and "cold L2" in ceiling.method
    assert above_ceiling(ceiling.gbps, ceiling) == ""
    assert above_ceiling(1.01 * peak, ceiling) != ""
