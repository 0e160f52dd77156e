"""The library baselines a ``buffers`` kernel is timed against (its spec's ``baseline``): a
driver copy of its compulsory bytes, CUB's device-wide sum, PyTorch's softmax.

Each wraps the kernel's own device buffers without a copy (``__cuda_array_interface__``), writes
into an output buffer of its own, enqueues its work on the harness's stream in the harness's
(primary) context and never waits for it, so that it is timed exactly as the kernel is, beside
it. A library's failure is a :class:`harness.errors.HarnessError` that names what is missing and
what to do; a failure while enqueueing is a :class:`harness.errors.DeviceError`, which the
timer's graph capture also takes for "this launch refuses capture".

``cub_sum`` prefers NVIDIA's cuda-cccl (``cuda.compute``: CUB's DeviceReduce, JIT-compiled for
the GPU by NVRTC) and falls back to CuPy's ``sum`` (CUB's device reduction where
``CUPY_ACCELERATORS`` has ``cub``, its default); :attr:`MemoryBaseline.label` says which ran
and :attr:`MemoryBaseline.note` why cuda.compute did not.
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.errors import DeviceError, HarnessError
from harness.gpu.check import check
from harness.gpu.driver import Buffer, Stream, cu
from harness.kinds.buffers.roofline import fill_random

ITEM_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "u32": 4}
_TYPESTR = {"f32": "<f4", "bf16": "<i2", "f16": "<f2", "i32": "<i4", "u32": "<u4"}
"""Each dtype's ``__cuda_array_interface__`` typestr; bf16 has none, so its bits travel as
int16 and are viewed as bfloat16 on the other side."""

CCCL_ADVICE = ("install NVIDIA's cuda-cccl (`python3 -m pip install cuda-cccl`; on a GPU host "
               "without a package registry scripts/wheels.sh carries it) or CuPy "
               "(`python3 -m pip install cupy-cuda13x`)")
TORCH_ADVICE = ("install PyTorch with CUDA (`python3 -m pip install torch`; on a GPU host "
                "without a package registry, a wheel too large to carry: use the host's own)")


@dataclass(frozen=True)
class Operand:
    """One device buffer as the kernel sees it: its element type and shape (row-major)."""

    buffer: Buffer
    dtype: str
    """``f32``, ``bf16``, ``f16``, ``i32`` or ``u32``."""
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.dtype not in ITEM_BYTES:
            raise HarnessError(f"operand dtype {self.dtype!r}: expected one of "
                               f"{', '.join(ITEM_BYTES)}")
        if self.buffer.nbytes < self.nbytes:
            raise HarnessError(f"operand {self.dtype} {list(self.shape)} needs {self.nbytes} "
                               f"bytes, its buffer holds {self.buffer.nbytes}")

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.elements * ITEM_BYTES[self.dtype]


class MemoryBaseline:
    """One library call timed beside a kernel: :meth:`launch` enqueues it on the stream it was
    made with and returns; :meth:`close` frees what it owns (also a context manager)."""

    label: str
    """What ran: library, version and call."""
    output: Operand | None
    """Where its result lands (a buffer it owns, the kernel's output dtype and shape); None for
    a copy."""
    note: str = ""
    """Why a preferred library was not used ("" when it was, or there is no other)."""

    def __init__(self, label: str, output: Operand | None, enqueue: Callable[[], Any],
                 owned: Sequence[Buffer], note: str = ""):
        self.label, self.output, self.note = label, output, note
        self._enqueue: Callable[[], Any] | None = enqueue
        self._owned = list(owned)

    def launch(self) -> None:
        """Enqueue the work; never waits for it."""
        if self._enqueue is None:
            raise HarnessError(f"{self.label}: launched after close()")
        try:
            self._enqueue()
        except HarnessError:
            raise
        except Exception as exc:  # a library's own error type: say which call failed
            raise DeviceError(f"{self.label} failed: {type(exc).__name__}: {exc}") from None

    def close(self) -> None:
        self._enqueue = None
        while self._owned:
            self._owned.pop().close()

    def __enter__(self) -> MemoryBaseline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- copy ------------------------------------------------------------------------------------

def _copy(nbytes: int, stream: Stream) -> CopyBaseline:
    """cuMemcpyDtoDAsync of nbytes // 2 bytes: each byte read and written, nbytes in all."""
    half = int(nbytes) // 2
    if half <= 0:
        raise HarnessError(f"baseline copy: the kernel's compulsory bytes are {nbytes}; a copy "
                           "of half of them needs at least 2")
    source = Buffer(half)
    try:
        target = Buffer(half)
    except BaseException:
        source.close()
        raise
    if half >= 4:  # random data: a constant draws less power
        fill_random(source, stream, seed=half)
    version = check(cu.cuDriverGetVersion(), "cuDriverGetVersion")

    def enqueue() -> None:
        check(cu.cuMemcpyDtoDAsync(target.dptr, source.dptr, half, stream.handle),
              "cuMemcpyDtoDAsync", "baseline copy")

    return CopyBaseline(
        f"device-to-device copy of half the compulsory bytes, each read and written "
        f"(cuMemcpyDtoDAsync, CUDA driver {version // 1000}.{version % 1000 // 10})",
        None, enqueue, [source, target], source=source, target=target)


class CopyBaseline(MemoryBaseline):
    """The copy, with its two buffers (random data in :attr:`source`)."""

    def __init__(self, *args, source: Buffer, target: Buffer, **kwargs):
        super().__init__(*args, **kwargs)
        self.source, self.target = source, target


# --- cub_sum ---------------------------------------------------------------------------------

def _cub_sum(inputs: Sequence[Operand], output: Operand, stream: Stream) -> MemoryBaseline:
    """CUB's device reduction, plus, of every f32 of inputs[0] into an f32 [1] of its own."""
    if not inputs or inputs[0].dtype != "f32":
        found = inputs[0].dtype if inputs else "no input"
        raise HarnessError(f"baseline cub_sum sums one f32 input; found {found}: declare the "
                           "summed buffer first among the inputs, or baseline = \"none\"")
    if output.dtype != "f32" or output.elements != 1:
        raise HarnessError(f"baseline cub_sum writes one f32; the kernel's output is "
                           f"{output.dtype} {list(output.shape)}: baseline = \"none\" for "
                           "another reduction")
    x = inputs[0]
    reasons = []
    compute = _import_cuda_compute(reasons)
    cupy = None if compute is not None else _try_import("cupy", reasons)
    if compute is None and cupy is None:
        raise HarnessError(f"baseline cub_sum needs cuda.compute or CuPy, and neither is "
                           f"usable here ({'; '.join(reasons)}): {CCCL_ADVICE}")
    out = Buffer(4)
    try:
        with context_kept():
            if compute is not None:
                try:
                    enqueue, label, owned = _cccl_sum(compute, x, out, stream)
                    return MemoryBaseline(label, Operand(out, "f32", output.shape), enqueue,
                                          [*owned, out])
                except Exception as exc:  # noqa: BLE001 - CuPy next; the reason is kept
                    reasons.append(f"cuda.compute failed: {type(exc).__name__}: {exc}")
                cupy = _try_import("cupy", reasons)
                if cupy is None:
                    raise HarnessError(f"baseline cub_sum: {'; '.join(reasons)}: "
                                       f"{CCCL_ADVICE}")
            enqueue, label = _cupy_sum(cupy, x, out, stream)
            return MemoryBaseline(label, Operand(out, "f32", output.shape), enqueue, [out],
                                  note="; ".join(reasons))
    except HarnessError:
        out.close()
        raise
    except Exception as exc:
        out.close()
        raise HarnessError(f"baseline cub_sum: CuPy failed ({type(exc).__name__}: {exc})"
                           + (f" after {'; '.join(reasons)}" if reasons else "")
                           + f": {CCCL_ADVICE}") from None


def _cccl_sum(compute, x: Operand, out: Buffer, stream: Stream
              ) -> tuple[Callable[[], Any], str, list[Buffer]]:
    """cuda.compute's reduce_into (CUB DeviceReduce, OpKind.PLUS, initial value 0), built
    (NVRTC) for this GPU, its temporary storage allocated here, tried once."""
    d_in = _DeviceArray(x.buffer.address, "f32", (x.elements,))
    d_out = _DeviceArray(out.address, "f32", (1,))
    h_init = np.zeros(1, dtype=np.float32)
    plus, on = compute.OpKind.PLUS, _StreamRef(stream)
    reducer = compute.make_reduce_into(d_in=d_in, d_out=d_out, op=plus, h_init=h_init)

    def call(temp):
        return reducer(temp_storage=temp, d_in=d_in, d_out=d_out, num_items=x.elements,
                       op=plus, h_init=h_init, stream=on)

    temp_bytes = int(call(None))
    temp = Buffer(max(temp_bytes, 1))
    try:
        storage = _DeviceArray(temp.address, "u8", (temp.nbytes,))
        call(storage)  # errors (a build for another GPU, a bad pointer) here, not when timed
        stream.synchronize("baseline cub_sum (cuda.compute), first call")
    except BaseException:
        temp.close()
        raise
    return (lambda: call(storage),
            f"CUB DeviceReduce, plus, f32 (cuda.compute {_version('cuda-cccl')} "
            "make_reduce_into)", [temp])


def _cupy_sum(cupy, x: Operand, out: Buffer, stream: Stream
              ) -> tuple[Callable[[], Any], str]:
    """cupy.sum(x, out=...) on views of the harness's buffers, on the harness's stream; called
    once here so that its memory pool holds CUB's work space before any graph capture."""
    ordinal = current_ordinal()
    x_array = _cupy_view(cupy, x.buffer, (x.elements,), ordinal)
    out_array = _cupy_view(cupy, out, (), ordinal)
    try:
        on = cupy.cuda.ExternalStream(int(stream.handle), ordinal)
    except TypeError:  # before CuPy 13: no device argument
        on = cupy.cuda.ExternalStream(int(stream.handle))

    def call() -> None:
        with on:
            cupy.sum(x_array, out=out_array)

    call()
    stream.synchronize("baseline cub_sum (CuPy), first call")
    try:
        from cupy._core import _accelerator

        cub = _accelerator.ACCELERATOR_CUB in _accelerator.get_routine_accelerators()
    except Exception:  # noqa: BLE001 - CuPy's internals moved: say so rather than guess
        cub = None
    how = {True: "CUB device reduction", None: "CUB unknown: CuPy's accelerators unreadable",
           False: "CuPy's own reduction kernel: CUB is off in CUPY_ACCELERATORS"}[cub]
    return call, f"CuPy {cupy.__version__} sum, f32 ({how})"


def _cupy_view(cupy, buffer: Buffer, shape: tuple[int, ...], ordinal: int):
    memory = cupy.cuda.UnownedMemory(buffer.address, buffer.nbytes, buffer, ordinal)
    return cupy.ndarray(shape, cupy.float32, cupy.cuda.MemoryPointer(memory, 0))


# --- torch_softmax ---------------------------------------------------------------------------

def _torch_softmax(inputs: Sequence[Operand], output: Operand, stream: Stream
                   ) -> MemoryBaseline:
    """aten::_softmax.out along the last axis of the 2-D inputs[0] into a buffer of its own."""
    if not inputs or len(inputs[0].shape) != 2 or inputs[0].dtype not in ("f32", "bf16"):
        found = f"{inputs[0].dtype} {list(inputs[0].shape)}" if inputs else "no input"
        raise HarnessError(f"baseline torch_softmax takes one 2-D f32 or bf16 input; found "
                           f"{found}: baseline = \"none\" for another shape")
    x = inputs[0]
    if output.dtype != x.dtype or tuple(output.shape) != tuple(x.shape):
        raise HarnessError(f"baseline torch_softmax writes {x.dtype} {list(x.shape)} like its "
                           f"input; the kernel's output is {output.dtype} "
                           f"{list(output.shape)}")
    reasons: list[str] = []
    torch = _try_import("torch", reasons)
    if torch is None:
        raise HarnessError(f"baseline torch_softmax needs PyTorch ({reasons[0]}): "
                           f"{TORCH_ADVICE}; or baseline = \"none\"")
    if not torch.cuda.is_available():
        raise HarnessError(f"baseline torch_softmax: PyTorch {torch.__version__} sees no CUDA "
                           f"GPU (a CPU-only build?): {TORCH_ADVICE}")
    out = Buffer(x.nbytes)
    try:
        with context_kept():
            ordinal = current_ordinal()
            device = torch.device("cuda", ordinal)
            x_tensor = torch_view(torch, x.buffer, x.dtype, x.shape, device)
            out_tensor = torch_view(torch, out, x.dtype, x.shape, device)
            on = torch.cuda.ExternalStream(int(stream.handle), device=device)
            softmax = torch.ops.aten._softmax.out

            def call() -> None:
                with torch.cuda.stream(on):
                    softmax(x_tensor, -1, False, out=out_tensor)

            call()
            stream.synchronize("baseline torch_softmax, first call")
    except HarnessError:
        out.close()
        raise
    except Exception as exc:
        out.close()
        raise HarnessError(f"baseline torch_softmax: PyTorch {torch.__version__} failed "
                           f"({type(exc).__name__}: {exc}): {TORCH_ADVICE}") from None
    return MemoryBaseline(f"PyTorch {torch.__version__} softmax, dim=-1, {x.dtype} "
                          "(aten::_softmax.out)", Operand(out, x.dtype, x.shape), call, [out])


def torch_view(torch, buffer: Buffer, dtype: str, shape: tuple[int, ...], device):
    """A tensor on ``buffer``'s memory (no copy: checked)."""
    tensor = torch.as_tensor(_DeviceArray(buffer.address, dtype, shape, owner=buffer),
                             device=device)
    if dtype == "bf16":
        tensor = tensor.view(torch.bfloat16)
    if tensor.data_ptr() != buffer.address:
        raise HarnessError(f"PyTorch {torch.__version__} copied a harness buffer instead of "
                           "wrapping it (torch.as_tensor of __cuda_array_interface__)")
    return tensor


# --- shared ----------------------------------------------------------------------------------

class _DeviceArray:
    """Device memory as ``__cuda_array_interface__`` (version 3, C order, no stream to wait
    on), for libraries that take array-likes; keeps ``owner`` alive while they hold it."""

    def __init__(self, address: int, dtype: str, shape: tuple[int, ...], owner=None):
        typestr = "|u1" if dtype == "u8" else _TYPESTR[dtype]
        self.dtype = np.dtype(typestr)
        self.shape, self.size = tuple(shape), math.prod(shape)
        self.nbytes = self.size * self.dtype.itemsize
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": self.shape, "typestr": typestr,
                                         "data": (int(address), False), "strides": None,
                                         "version": 3}


class _StreamRef:
    """The harness's stream as ``__cuda_stream__`` (version 0: the CUstream's address)."""

    def __init__(self, stream: Stream):
        self.handle = int(stream.handle)

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


def _try_import(module: str, reasons: list[str]):
    """``module``, or None with why appended to ``reasons`` (an ImportError, or what a
    library that needs its shared libraries raised while loading them)."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure to load means "not usable here"
        reasons.append(f"import {module} failed: {type(exc).__name__}: {exc}")
        return None


def _import_cuda_compute(reasons: list[str]):
    """``cuda.compute`` if it imports with its compiled bindings (on a machine without the
    CUDA driver it imports, warns, and has none), else None with why appended."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compute = _try_import("cuda.compute", reasons)
        if compute is None:
            return None
        try:
            compute.OpKind, compute.make_reduce_into  # noqa: B018 - present, or it raises
        except Exception as exc:  # noqa: BLE001 - its module __getattr__ says why
            said = "; ".join(str(w.message) for w in caught) or str(exc)
            reasons.append(f"cuda.compute imported without its bindings: {said}")
            return None
    return compute


def _version(distribution: str) -> str:
    """An installed distribution's version, for a label."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "(version unknown)"


def current_ordinal() -> int:
    return int(check(cu.cuCtxGetDevice(), "cuCtxGetDevice"))


@contextmanager
def context_kept() -> Iterator[None]:
    """Whatever a library does to the current context while it sets up (PyTorch and CuPy
    initialise the runtime), the harness's is current again afterwards."""
    context = check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    try:
        yield
    finally:
        check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent")
