"""The cuBLASLt FP8 baseline (issue 36) through nvmath-python, on raw device pointers.

One FP8 GEMM with per-tensor scales, as the harness's FP8 kernels compute it: C (M x N,
row-major) = (*scale_a) (*scale_b) A B^T, A (M x K) and B (N x K) FP8 codes, both K-major.
Hopper's FP8 cuBLASLt takes only the "TN" form (its A transposed, its B not, both K-major); a
row-major C is the column-major C^T = B A^T, which is that form with the operands swapped
(:func:`lt_operands`). CUBLAS_COMPUTE_32F, scale type FP32, alpha 1, beta 0, FAST_ACCUM left at
cuBLASLt's default (off); the algorithm is cuBLASLt's first heuristic choice with a 32 MiB
workspace, found once per shape, types and pointer alignment.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.errors import DeviceError, HarnessError
from harness.gpu.driver import Buffer, Stream, context_resource
from harness.gpu.nvmath_libs import nvmath_bindings

WORKSPACE_BYTES = 32 << 20
"""cuBLASLt's workspace, allocated once per handle (its Hopper kernels ask for a few MiB)."""
INPUT_TYPES = {"e4m3": "CUDA_R_8F_E4M3", "e5m2": "CUDA_R_8F_E5M2"}
C_TYPES = {"bf16": ("CUDA_R_16BF", 2), "fp16": ("CUDA_R_16F", 2), "fp32": ("CUDA_R_32F", 4)}
"""C's (cuBLASLt's D's) types and bytes for FP8 inputs: the cuBLAS docs' FP8 table pairs a
BF16, FP16 or FP32 C with a D of the same type (an FP8 D is not offered here)."""


SCALE_MODES = {"tensor": ("SCALAR_32F", "SCALAR_32F"), "block": ("VEC128_32F", "BLK128x128_32F")}
"""Our A's and our B's cuBLASLt scale modes (``MatmulMatrixScale``) per scheme: one FP32 scale
a tensor; DeepSeek's block scales, 1 x 128 per row of A and one per 128 x 128 block of B (cuBLAS
12.9 and later, on sm_90; notes/fp8_plan.md)."""


def _lib():
    return nvmath_bindings("the cuBLASLt FP8 baseline", "cublas", "cublasLt")


def compute_name(a_format: str = "e4m3", b_format: str = "e4m3", c_type: str = "bf16",
                 scales: str = "tensor") -> str:
    """The baseline as reports name it."""
    blocks = ", 1x128 / 128x128 block scales" if scales == "block" else ""
    return f"cuBLASLt FP8 {a_format} x {b_format} -> {c_type}, CUBLAS_COMPUTE_32F{blocks}"


def block_scale_layouts(scale_a: np.ndarray, scale_b: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Block scales as cuBLASLt's block modes read them, from A's (M, K / 128) and B's (K / 128,
    N / 128) (the check's Fp8Gemm layout): A's as [K / 128][M rounded up to 4], M contiguous
    (VEC128_32F, on cuBLASLt's B), and B's as [N / 128][K / 128 rounded up to 4], the k blocks
    contiguous (BLK128x128_32F, on cuBLASLt's A); the padding is 0. These are the layouts
    PyTorch's scaled_mm hands cuBLASLt for 1 x 128 and 128 x 128 scales; confirmed only by a
    GPU test against the float64 reference (tests/test_cublaslt.py). The rungs' own scale_a
    [KB][M] is A's when M is a multiple of 4; their scale_b [KB][NB] is B's transposed."""
    sa, sb = np.asarray(scale_a, np.float32), np.asarray(scale_b, np.float32)
    (m, kb), (kb_b, nb) = sa.shape, sb.shape
    if kb != kb_b:
        raise HarnessError(f"block scales disagree on K / 128: A's {sa.shape}, B's {sb.shape}")
    a_lt = np.zeros((kb, -(-m // 4) * 4), np.float32)
    a_lt[:, :m] = sa.T
    b_lt = np.zeros((nb, -(-kb // 4) * 4), np.float32)
    b_lt[:, :kb] = sb.T
    return a_lt, b_lt


def check_fp8(m: int, n: int, k: int, a_format: str, b_format: str, c_type: str) -> None:
    """Refuse, before cuBLASLt sees it, a call its FP8 GEMM cannot make (cuBLAS docs,
    cublasLtMatmul, FP8 requirements)."""
    for what, fmt in (("A", a_format), ("B", b_format)):
        if fmt not in INPUT_TYPES:
            raise HarnessError(f"cuBLASLt FP8: {what}'s format {fmt!r}: expected e4m3 or e5m2")
    if (a_format, b_format) == ("e5m2", "e5m2"):
        raise HarnessError("cuBLASLt FP8 has no e5m2 x e5m2 GEMM (only e4m3 x e4m3, e4m3 x "
                           "e5m2, e5m2 x e4m3): make one operand e4m3")
    if c_type not in C_TYPES:
        raise HarnessError(f"cuBLASLt FP8 {a_format} x {b_format} -> {c_type}: C must be one "
                           f"of {', '.join(C_TYPES)}")
    # FP8 kernels need 16-byte aligned leading dimensions: K bytes for A and B, N elements of C
    c_bytes = C_TYPES[c_type][1]
    if min(m, n, k) < 1 or k % 16 or n * c_bytes % 16:
        raise HarnessError(f"cuBLASLt FP8 at {m}x{n}x{k} -> {c_type}: sizes at least 1, K a "
                           f"multiple of 16 and N of {16 // c_bytes} (16-byte rows of A, B "
                           "and C)")


@dataclass(frozen=True)
class LtOperands:
    """cublasLtMatmul's layout-dependent arguments, in its column-major terms: D (m x n) =
    op(A) (m x k) op(B) (k x n), each operand stored as ``rows x cols`` with leading dimension
    ``ld`` before its op."""

    transa: str
    transb: str
    m: int
    n: int
    k: int
    first: str
    """Which of ours is cuBLASLt's A (``"B"``); its scale and format go with it."""
    a_layout: tuple[int, int, int]
    """(rows, cols, ld) of cuBLASLt's A as stored."""
    b_layout: tuple[int, int, int]
    d_layout: tuple[int, int, int]
    """Also C's (read at beta = 0 by no kernel, but its layout must be given)."""

    @property
    def second(self) -> str:
        """Which of ours is cuBLASLt's B."""
        return "A" if self.first == "B" else "B"


def lt_operands(m: int, n: int, k: int) -> LtOperands:
    """cublasLtMatmul's operands for row-major C (M x N) = A (M x K) B^T, B stored N x K.

    Row-major C is column-major C^T (N x M, ld N) = B A^T. Our B (N x K row-major) is K x N
    column-major with ld K: op T gives the N x K B. Our A (M x K row-major) is K x M
    column-major, ld K: op N gives A^T. So cuBLASLt's A is our B, its B our A, sizes N, M, K:
    the TN form, both operands K-major, that Hopper's FP8 kernels require."""
    return LtOperands("T", "N", n, m, k, "B", (k, n, k), (k, m, k), (n, m, n))


def _set(setter, dtype_of, obj: int, attr, value: int) -> None:
    """One descriptor attribute, from a host buffer of the type the bindings name for it."""
    buf = np.array([value], dtype=dtype_of(attr))
    setter(obj, attr, buf.ctypes.data, buf.nbytes)


def describe_algo(lt, results: np.ndarray) -> str:
    """The algorithm of a heuristic result (cuBLASLt's config attributes), for reports."""
    algo, cfg = results["algo"].ctypes.data, lt.MatmulAlgoConfigAttribute

    def get(attr, enum=None):
        buf = np.zeros(1, dtype=lt.get_matmul_algo_config_attribute_dtype(attr))
        written = np.zeros(1, dtype=np.uint64)
        lt.matmul_algo_config_get_attribute(algo, attr, buf.ctypes.data, buf.nbytes,
                                            written.ctypes.data)
        value = int(buf[0])
        return {e.value: e.name for e in enum}.get(value, value) if enum else value

    try:
        return (f"algo {get(cfg.ID)}, {get(cfg.TILE_ID, lt.MatmulTile)}, "
                f"{get(cfg.STAGES_ID, lt.MatmulStages)}, split-k {get(cfg.SPLITK_NUM)}, "
                f"{get(cfg.CLUSTER_SHAPE_ID, lt.ClusterShape)}, "
                f"workspace {int(results['workspace_size'][0])} B")
    except Exception as exc:  # the record is optional; the GEMM is not
        return f"algorithm unread ({type(exc).__name__}: {exc})"


@dataclass
class _Plan:
    desc: int
    layouts: tuple[int, int, int]
    """cuBLASLt's A, B and D (also C) layouts."""
    results: np.ndarray | None = None
    algo: str = ""


def _release(lt, handle: int, preference: int, plans: dict, free_workspace) -> None:
    for plan in plans.values():
        for layout in plan.layouts:
            lt.matrix_layout_destroy(layout)
        lt.matmul_desc_destroy(plan.desc)
    plans.clear()
    lt.matmul_preference_destroy(preference)
    lt.destroy(handle)
    free_workspace()


class CublasLt:
    """A cuBLASLt handle bound to one stream, with its workspace and its plans."""

    def __init__(self, stream: Stream, workspace_bytes: int = WORKSPACE_BYTES):
        libs = _lib()
        self._start(libs, stream, Buffer(workspace_bytes))

    def _start(self, libs, stream, workspace) -> None:
        self._nvmath, self._cublas, self._lt = libs
        lt = self._lt
        try:
            self.version = int(lt.get_version())
            self.handle = lt.create()
            self._preference = lt.matmul_preference_create()
        except Exception as exc:
            workspace.close()
            raise DeviceError(f"cuBLASLt could not start: {exc}") from None
        v = self.version  # major.minor.patch, as cuBLAS numbers its versions:
        self.version_text = f"{v // 10000}.{v // 100 % 100}.{v % 100}"
        self._stream, self._workspace, self._plans = int(stream.handle), workspace, {}
        self._destroy = context_resource(self, _release, lt, self.handle, self._preference,
                                         self._plans, workspace.close)
        self._scalars = np.array([1.0, 0.0], dtype=np.float32)  # alpha, beta (host pointers)
        self.last_algo = ""  # the algorithm of the last GEMM enqueued (describe_algo)

    def close(self) -> None:
        self._destroy()

    def _plan(self, ops: LtOperands, formats: tuple[str, str], c_type: str,
              aligns: tuple[int, int, int], scales: str = "tensor") -> _Plan:
        """The descriptors of one shape, types (``formats``: cuBLASLt's A's and B's), pointer
        alignment (its A's, B's and D's) and scale scheme (SCALE_MODES)."""
        key = (ops.m, ops.n, ops.k, *formats, c_type, *aligns, scales)
        if key not in self._plans:
            lt, dtypes, cublas = self._lt, self._nvmath.CudaDataType, self._cublas
            desc = lt.matmul_desc_create(cublas.ComputeType.COMPUTE_32F, dtypes.CUDA_R_32F)
            attrs = lt.MatmulDescAttribute
            for attr, op in ((attrs.TRANSA, ops.transa), (attrs.TRANSB, ops.transb)):
                _set(lt.matmul_desc_set_attribute, lt.get_matmul_desc_attribute_dtype, desc,
                     attr, int(getattr(cublas.Operation, op)))
            if scales != "tensor":  # each operand's mode; cuBLASLt's A is our ops.first
                ours = dict(zip("AB", SCALE_MODES[scales], strict=True))
                for attr, mode in ((attrs.A_SCALE_MODE, ours[ops.first]),
                                   (attrs.B_SCALE_MODE, ours[ops.second])):
                    _set(lt.matmul_desc_set_attribute, lt.get_matmul_desc_attribute_dtype,
                         desc, attr, int(getattr(lt.MatmulMatrixScale, mode)))
            types = (INPUT_TYPES[formats[0]], INPUT_TYPES[formats[1]], C_TYPES[c_type][0])
            shapes = (ops.a_layout, ops.b_layout, ops.d_layout)
            self._plans[key] = _Plan(desc, tuple(
                lt.matrix_layout_create(getattr(dtypes, t), *shape)
                for t, shape in zip(types, shapes, strict=True)))
        return self._plans[key]

    def gemm_fp8(self, m: int, n: int, k: int, a: int, b: int, c: int, scale_a: int,
                 scale_b: int, a_format: str = "e4m3", b_format: str = "e4m3",
                 c_type: str = "bf16", scales: str = "tensor") -> None:
        """Enqueue C = (*scale_a) (*scale_b) A B^T on the stream: A (M x K) and B (N x K) FP8
        codes row-major, C (M x N) row-major of ``c_type``, ``scale_a`` and ``scale_b`` device
        addresses of one float32 each; with ``scales="block"``, of the block scales in the
        layouts :func:`block_scale_layouts` gives."""
        check_fp8(m, n, k, a_format, b_format, c_type)
        if scales not in SCALE_MODES:
            raise HarnessError(f"cuBLASLt FP8 scales {scales!r}: expected one of "
                               f"{', '.join(SCALE_MODES)}")
        name = f"{compute_name(a_format, b_format, c_type, scales)} at {m}x{n}x{k}"
        ops, lt = lt_operands(m, n, k), self._lt
        # cuBLASLt's A is our B and its B our A, each with its own format and scale: its
        # A_SCALE_POINTER is our scale_b, its B_SCALE_POINTER our scale_a
        ours = {"A": (int(a), a_format, scale_a), "B": (int(b), b_format, scale_b)}
        (first, first_format, first_scale), (second, second_format, second_scale) = (
            ours[ops.first], ours[ops.second])
        aligns = tuple(min(256, p & -p) if p else 256 for p in (first, second, int(c)))
        try:
            plan = self._plan(ops, (first_format, second_format), c_type, aligns, scales)
            attrs = lt.MatmulDescAttribute
            for attr, scale in ((attrs.A_SCALE_POINTER, first_scale),
                                (attrs.B_SCALE_POINTER, second_scale)):
                _set(lt.matmul_desc_set_attribute, lt.get_matmul_desc_attribute_dtype,
                     plan.desc, attr, int(scale))
        except Exception as exc:
            raise DeviceError(f"cuBLASLt refused the descriptors of {name}: {exc}") from None
        if plan.results is None:
            self._choose(plan, name, aligns)
        a_layout, b_layout, d_layout = plan.layouts
        try:
            lt.matmul(self.handle, plan.desc, self._scalars.ctypes.data, first, a_layout,
                      second, b_layout, self._scalars.ctypes.data + 4, c, d_layout, c,
                      d_layout, plan.results["algo"].ctypes.data, self._workspace.address,
                      self._workspace.nbytes, self._stream)
        except Exception as exc:
            raise DeviceError(f"cublasLtMatmul failed for {name} ({plan.algo}): {exc}") from None
        self.last_algo = plan.algo

    def _choose(self, plan: _Plan, name: str, aligns: tuple[int, int, int]) -> None:
        """cuBLASLt's first heuristic choice for ``plan`` (its scale pointers set), for
        pointers aligned to ``aligns`` bytes (it assumes 256 otherwise)."""
        lt, pref = self._lt, self._lt.MatmulPreferenceAttribute
        results = np.zeros(1, dtype=lt.matmul_heuristic_result_dtype)
        count = np.zeros(1, dtype=np.int32)
        try:
            for attr, value in ((pref.MAX_WORKSPACE_BYTES, self._workspace.nbytes),
                                (pref.MIN_ALIGNMENT_A_BYTES, aligns[0]),
                                (pref.MIN_ALIGNMENT_B_BYTES, aligns[1]),
                                (pref.MIN_ALIGNMENT_C_BYTES, aligns[2]),
                                (pref.MIN_ALIGNMENT_D_BYTES, aligns[2])):
                _set(lt.matmul_preference_set_attribute,
                     lt.get_matmul_preference_attribute_dtype, self._preference, attr, value)
            lt.matmul_algo_get_heuristic(self.handle, plan.desc, *plan.layouts, plan.layouts[2],
                                         self._preference, 1, results.ctypes.data,
                                         count.ctypes.data)
        except Exception as exc:
            raise DeviceError(f"cuBLASLt has no algorithm for {name} "
                              f"(cublasLtMatmulAlgoGetHeuristic: {exc})") from None
        if count[0] < 1:
            raise DeviceError(f"cuBLASLt has no algorithm for {name} within a "
                              f"{self._workspace.nbytes}-byte workspace")
        plan.results, plan.algo = results, describe_algo(lt, results)
