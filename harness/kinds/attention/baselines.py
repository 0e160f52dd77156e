"""Attention's baselines by name: cuDNN's SDPA (nvidia-cudnn-frontend), FlashAttention (the
``flash_attn`` wheel, FA2; ``flash_attn_interface``, FA3 on sm_90) and PyTorch's SDPA per
backend (flash, cuDNN, efficient). Each says why it cannot run here (:meth:`unavailable`)
rather than vanish; the table names the one compared.

Operands (:class:`Operands`) carry device buffers that expose ``__cuda_array_interface__`` (or
are torch tensors), in the kernel's layout. Every baseline computes the bottom-right causal
mask where the kernel does: FlashAttention >= 2.1 and cuDNN align it there; PyTorch's
``is_causal`` is top-left, so its baselines pass ``causal_lower_right`` when S_q != S_kv.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError
from harness.kinds.attention.problem import AttentionProblem
from harness.kinds.base import Baseline, Baselines


@dataclass(frozen=True)
class Operands:
    """One launch's buffers and what they hold."""

    q: Any
    k: Any
    v: Any
    o: Any
    lse: Any
    problem: AttentionProblem
    scale: float
    layout: str
    precision: str
    stream: Any = None


def _missing(module: str, install: str) -> str:
    if importlib.util.find_spec(module) is None:
        return f"{module} is not installed ({install})"
    return ""


def _version(distribution: str) -> str:
    try:
        return f"{distribution} {importlib.metadata.version(distribution)}"
    except importlib.metadata.PackageNotFoundError:
        return ""


def _torch_gpu_reason() -> str:
    missing = _missing("torch", "pip install torch, a CUDA build")
    if missing:
        return missing
    import torch
    if not torch.cuda.is_available():
        return "torch sees no CUDA device (a CPU build, or no GPU here)"
    return ""


def _as_torch(buffer, problem: AttentionProblem, heads: int, seq: int, layout: str, dtype):
    import torch
    b, d = problem["B"], problem["D"]
    if isinstance(buffer, torch.Tensor):
        flat = buffer
    else:
        flat = torch.as_tensor(buffer, device="cuda")
    if flat.dtype != dtype:
        flat = flat.view(dtype)
    shape = (b, heads, seq, d) if layout == "bhsd" else (b, seq, heads, d)
    return flat.view(shape)


class _TorchBased(Baseline):
    """A baseline whose library returns a new tensor: its last one kept as ``output`` ([B, H,
    S_q, D] dims, whatever the layout), not copied into O. The copy (16 MiB read and written
    at B = 4, S = 4096, H = 16, D = 128: some 11 us of cuDNN's 0.84 ms) was timed as the
    baseline's until after 42de343, which flattered every kernel beside it by about 1.3%."""

    def __init__(self, spec=None, problem: AttentionProblem | None = None) -> None:
        self.problem = problem
        self._launch = None
        self.output = None

    def close(self) -> None:
        self._launch = self.output = None

    def launch(self) -> None:
        if self._launch is None:
            raise HarnessError(f"{self.name}: launch before prepare")
        self._launch()

    def _views(self, ops: Operands):
        import torch
        dtype = torch.bfloat16 if ops.precision == "bf16" else torch.float16
        p = ops.problem
        q = _as_torch(ops.q, p, p["H"], p["S_q"], ops.layout, dtype)
        k = _as_torch(ops.k, p, p["H_kv"], p["S_kv"], ops.layout, dtype)
        v = _as_torch(ops.v, p, p["H_kv"], p["S_kv"], ops.layout, dtype)
        o = _as_torch(ops.o, p, p["H"], p["S_q"], ops.layout, dtype)
        return q, k, v, o


class TorchSdpa(_TorchBased):
    """``torch.nn.functional.scaled_dot_product_attention`` held to one backend."""

    BACKENDS = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                "efficient": "EFFICIENT_ATTENTION"}

    def __init__(self, backend: str, spec=None, problem=None) -> None:
        super().__init__(spec, problem)
        if backend not in self.BACKENDS:
            raise HarnessError(f"no PyTorch SDPA backend {backend!r}; the backends are "
                               f"{', '.join(self.BACKENDS)}")
        self.backend = backend
        self.name = f"torch SDPA ({backend})"
        self.compute = f"SDPBackend.{self.BACKENDS[backend]}"

    def version(self) -> str:
        found = _version("torch")
        if found and self.backend == "cudnn":
            try:
                import torch
                return f"{found}, cuDNN {torch.backends.cudnn.version()}"
            except Exception:  # torch without its cuDNN: the version alone
                return found
        return found

    def unavailable(self) -> str:
        reason = _torch_gpu_reason()
        if reason:
            return reason
        import torch.nn.attention as attention
        if not hasattr(attention.SDPBackend, self.BACKENDS[self.backend]):
            return f"this torch has no SDPBackend.{self.BACKENDS[self.backend]}"
        return ""

    def prepare(self, operands: Operands) -> None:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.attention.bias import causal_lower_right
        q, k, v, _ = self._views(operands)
        if operands.layout == "bshd":  # SDPA takes [B, H, S, D]; transposed views, no copy
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        p = operands.problem
        mask = causal_lower_right(p["S_q"], p["S_kv"]) if p.causal and p.offset else None
        backend = getattr(SDPBackend, self.BACKENDS[self.backend])

        def run() -> None:
            with sdpa_kernel(backend):
                self.output = F.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, is_causal=p.causal and mask is None,
                    scale=operands.scale, enable_gqa=p.group > 1)
        self._launch = run
        del torch


class FlashAttention(_TorchBased):
    """FlashAttention's own wheel: FA2 (``flash_attn``) or FA3 (``flash_attn_interface``,
    Hopper only). Both take BSHD and align the causal mask bottom-right."""

    def __init__(self, version3: bool = False, spec=None, problem=None) -> None:
        super().__init__(spec, problem)
        self.module = "flash_attn_interface" if version3 else "flash_attn"
        self.name = "FlashAttention-3" if version3 else "FlashAttention-2"
        self.compute = "BF16/FP16 inputs, FP32 accumulate"
        self.version3 = version3

    def version(self) -> str:
        return _version("flash_attn_3" if self.version3 else "flash_attn")

    def unavailable(self) -> str:
        reason = _torch_gpu_reason() or _missing(
            self.module, "pip install flash-attn --no-build-isolation (FA2); FA3 builds from "
            "the hopper/ folder of Dao-AILab/flash-attention")
        if reason:
            return reason
        import torch
        major, minor = torch.cuda.get_device_capability()
        if major < 8:
            return f"FlashAttention needs sm_80 or newer, this GPU is sm_{major}{minor}"
        if self.version3 and major != 9:
            return f"FlashAttention-3 runs on sm_90 only, this GPU is sm_{major}{minor}"
        return ""

    def prepare(self, operands: Operands) -> None:
        q, k, v, _ = self._views(operands)
        if operands.layout == "bhsd":
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        fn = importlib.import_module(self.module).flash_attn_func
        p = operands.problem

        def run() -> None:
            out = fn(q, k, v, softmax_scale=operands.scale, causal=p.causal)
            self.output = (out[0] if isinstance(out, tuple) else out).transpose(1, 2)
        self._launch = run


class CudnnSdpa(Baseline):
    """cuDNN's fused SDPA through nvidia-cudnn-frontend's Python graph API."""

    name = "cuDNN SDPA"
    compute = "cudnn.data_type.FLOAT (intermediate and compute)"

    def __init__(self, spec=None, problem=None) -> None:
        self._graph = None
        self._pack = None
        self.output = None
        """Its output: O itself, which cuDNN writes ([B, H, S_q, D] dims)."""
        self._workspace = None
        self._handle = None

    def version(self) -> str:
        found = _version("nvidia-cudnn-frontend")
        if not found:
            return ""
        try:
            import cudnn
            return f"{found}, cuDNN {cudnn.backend_version()}"
        except Exception:  # the library itself absent: the frontend's version alone
            return found

    def unavailable(self) -> str:
        return (_missing("cudnn", "pip install nvidia-cudnn-frontend nvidia-cudnn-cu12")
                or _torch_gpu_reason())

    def prepare(self, operands: Operands) -> None:
        import cudnn
        import torch
        q, k, v, o = self._views(operands)
        p = operands.problem
        dtype = cudnn.data_type.BFLOAT16 if operands.precision == "bf16" else cudnn.data_type.HALF
        graph = cudnn.pygraph(io_data_type=dtype, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT)
        tq, tk, tv = (graph.tensor_like(t) for t in (q, k, v))
        out, _ = graph.sdpa(name="sdpa", q=tq, k=tk, v=tv, is_inference=True,
                            attn_scale=operands.scale,
                            use_causal_mask_bottom_right=p.causal)
        out.set_output(True).set_dim(o.shape).set_stride(o.stride())
        graph.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        self._workspace = torch.empty(graph.get_workspace_size(), device="cuda",
                                      dtype=torch.uint8)
        self._pack, self.output = {tq: q, tk: k, tv: v, out: o}, o
        self._graph = graph
        if operands.stream is not None:  # the timer's stream, not cuDNN's default one
            self._handle = cudnn.create_handle()
            cudnn.set_stream(handle=self._handle, stream=int(operands.stream))

    def _views(self, operands: Operands):
        # cuDNN takes [B, H, S, D] dims with any strides: BSHD is a transposed view
        views = _TorchBased._views(self, operands)
        if operands.layout == "bshd":
            views = tuple(t.transpose(1, 2) for t in views)
        return views

    def launch(self) -> None:
        if self._graph is None:
            raise HarnessError(f"{self.name}: launch before prepare")
        if self._handle is not None:
            self._graph.execute(self._pack, self._workspace, handle=self._handle)
        else:
            self._graph.execute(self._pack, self._workspace)

    def close(self) -> None:
        if self._handle is not None:
            import cudnn
            cudnn.destroy_handle(self._handle)
        self._graph = self._pack = self.output = self._workspace = self._handle = None


BASELINES = Baselines({
    "cudnn_sdpa": lambda spec, problem: CudnnSdpa(spec, problem),
    "flash_attn_3": lambda spec, problem: FlashAttention(True, spec, problem),
    "flash_attn_2": lambda spec, problem: FlashAttention(False, spec, problem),
    "torch_sdpa_flash": lambda spec, problem: TorchSdpa("flash", spec, problem),
    "torch_sdpa_cudnn": lambda spec, problem: TorchSdpa("cudnn", spec, problem),
    "torch_sdpa_efficient": lambda spec, problem: TorchSdpa("efficient", spec, problem),
})
"""Names a spec's ``baseline`` may give; cuDNN's SDPA first (the default): it led FA3 in the
FA3 paper's own H100 figures at long sequences."""


def availability(spec=None, problem=None) -> dict[str, str]:
    """Each baseline's name -> why it cannot run here ("" when it can)."""
    return {name: BASELINES.make(name, spec, problem).unavailable()
            for name in BASELINES.names()}
