"""TMA tensor maps (``cuTensorMapEncodeTiled``) as a kernel takes them by value: the 2-D maps
of a spec's ``[tma]`` table (:func:`tensor_map_2d`) and the maps of rank 1..5 its
``[tmaps.X]`` describes (:func:`tensor_map`), each checked before the driver sees it."""

from __future__ import annotations

import ctypes

from harness.errors import HarnessError
from harness.gpu.check import check

try:
    from cuda.bindings import driver as cu
except ImportError:  # reported by driver.gpu_status(); encoding a map needs the bindings
    cu = None


_TMA_TYPES = {"bf16": "BFLOAT16", "fp16": "FLOAT16", "fp32": "FLOAT32", "tf32": "FLOAT32",
              "fp8": "UINT8", "e4m3": "UINT8", "e5m2": "UINT8"}
"""FP8 codes travel as bytes: TMA copies them and never reads their values."""
_ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4, "fp8": 1, "e4m3": 1, "e5m2": 1}
_SWIZZLE_BYTES = {"128B": 128, "64B": 64, "32B": 32, "none": 0}


def tensor_map_2d(element: str, address: int, inner: int, outer: int, box_inner: int,
                  box_outer: int, label: str, swizzle: str = "128B") -> ctypes.Array:
    """A 2-D TMA tensor map (``cuTensorMapEncodeTiled``) of a row-major ``outer x inner``
    matrix of ``element`` (a precision or C type) at ``address``: ``box_inner x box_outer``
    boxes laid out in shared memory with ``swizzle`` (128B, 64B, 32B or none), zeros outside
    the matrix for loads, stores clipped to it. Returned as the 128 bytes a kernel takes by
    value."""
    try:
        data_type = getattr(cu.CUtensorMapDataType,
                            f"CU_TENSOR_MAP_DATA_TYPE_{_TMA_TYPES[element]}")
    except KeyError:
        raise HarnessError(f"{label}: no tensor-map element type for {element!r}; expected "
                           f"one of {', '.join(_TMA_TYPES)}") from None
    if swizzle not in _SWIZZLE_BYTES:
        raise HarnessError(f"{label}: swizzle must be one of {', '.join(_SWIZZLE_BYTES)}, found "
                           f"{swizzle!r}")
    element_bytes = _ELEMENT_BYTES[element]
    span, row_bytes = _SWIZZLE_BYTES[swizzle], box_inner * element_bytes
    if span and row_bytes > span or not 1 <= box_outer <= 256:
        raise HarnessError(
            f"{label}: tensor-map box {box_inner} x {box_outer} does not fit a {span}-byte swizzle "
            f"(inner box at most {span // element_bytes} {element} elements, outer 1..256); "
            "change the spec's [tma] box" if span else
            f"{label}: tensor-map box {box_inner} x {box_outer}: the outer box must be 1..256 "
            "rows; change the spec's [tma] box")
    if row_bytes % 16 or not 1 <= box_inner <= 256:
        raise HarnessError(
            f"{label}: tensor-map box {box_inner} x {box_outer}: the inner box must be 1..256 "
            f"elements and a multiple of 16 bytes ({16 // element_bytes} {element} elements), "
            f"found {row_bytes} bytes; change the spec's [tma] box")
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    swizzle_enum = ("NONE" if swizzle == "none" else swizzle)
    tmap = check(cu.cuTensorMapEncodeTiled(
        data_type, 2, address, [u64(inner), u64(outer)], [u64(inner * element_bytes)],
        [u32(box_inner), u32(box_outer)], [u32(1), u32(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{swizzle_enum}"),
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled",
        f"{label}: {outer} x {inner} {element}, box {box_inner} x {box_outer}, swizzle {swizzle}")
    return (ctypes.c_ubyte * 128).from_buffer_copy(ctypes.string_at(tmap.getPtr(), 128))


_INTERLEAVES = {"none": "NONE", "16B": "16B", "32B": "32B"}
_L2_PROMOTIONS = {"none": "NONE", "64B": "L2_64B", "128B": "L2_128B", "256B": "L2_256B"}
_OOB_FILLS = {"none": "NONE", "nan": "NAN_REQUEST_ZERO_FMA"}


def tensor_map(desc, address: int, dtype: str, label: str = "tensor map",
               api=None) -> ctypes.Array:
    """A tensor map of rank 1..5 (``cuTensorMapEncodeTiled``) as a kernel's ``[tmaps.X]``
    describes it, evaluated (``harness.kernels.tmap_spec.TensorMapDesc``: shape, strides in
    elements, box, element strides, swizzle, interleave, L2 promotion, OOB fill), over
    ``dtype`` elements (a precision or C type) at ``address``. Returned as the 128 bytes a
    kernel takes by value. ``api`` is ``cuda.bindings.driver`` (a fake one in CPU tests)."""
    api = api or cu
    if dtype not in _TMA_TYPES:
        raise HarnessError(f"{label}: no tensor-map element type for {dtype!r}; expected one "
                           f"of {', '.join(_TMA_TYPES)}")
    rank, element_bytes = desc.rank, _ELEMENT_BYTES[dtype]
    lengths = {"shape": len(desc.shape), "strides": len(desc.strides) + 1,
               "box": len(desc.box), "element_strides": len(desc.element_strides)}
    if not 1 <= rank <= 5 or any(n != rank for n in lengths.values()):
        raise HarnessError(f"{label}: rank {rank} with shape, strides (+1), box and element "
                           f"strides of lengths {lengths}; each must have rank entries")
    stride_bytes = [s * element_bytes for s in desc.strides]
    if any(b % 16 or b <= 0 for b in stride_bytes):
        raise HarnessError(f"{label}: global strides {list(desc.strides)} elements are "
                           f"{stride_bytes} bytes; each must be a positive multiple of 16")
    if any(not 1 <= b <= 256 for b in desc.box) or any(
            not 1 <= e <= 8 for e in desc.element_strides):
        raise HarnessError(f"{label}: box {list(desc.box)} (each 1..256) or element strides "
                           f"{list(desc.element_strides)} (each 1..8) out of range")
    if address % 16:
        raise HarnessError(f"{label}: address 0x{address:x} is not 16-byte aligned")
    for key, table in (("swizzle", _SWIZZLE_BYTES), ("interleave", _INTERLEAVES),
                       ("l2_promotion", _L2_PROMOTIONS), ("oob_fill", _OOB_FILLS)):
        if getattr(desc, key) not in table:
            raise HarnessError(f"{label}: {key} must be one of {', '.join(table)}, found "
                               f"{getattr(desc, key)!r}")
    u64, u32 = api.cuuint64_t, api.cuuint32_t
    swizzle = "NONE" if desc.swizzle == "none" else desc.swizzle
    tmap = check(api.cuTensorMapEncodeTiled(
        getattr(api.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{_TMA_TYPES[dtype]}"),
        rank, address, [u64(d) for d in desc.shape], [u64(b) for b in stride_bytes],
        [u32(b) for b in desc.box], [u32(e) for e in desc.element_strides],
        getattr(api.CUtensorMapInterleave,
                f"CU_TENSOR_MAP_INTERLEAVE_{_INTERLEAVES[desc.interleave]}"),
        getattr(api.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{swizzle}"),
        getattr(api.CUtensorMapL2promotion,
                f"CU_TENSOR_MAP_L2_PROMOTION_{_L2_PROMOTIONS[desc.l2_promotion]}"),
        getattr(api.CUtensorMapFloatOOBfill,
                f"CU_TENSOR_MAP_FLOAT_OOB_FILL_{_OOB_FILLS[desc.oob_fill]}")),
        "cuTensorMapEncodeTiled",
        f"{label}: rank {rank} {dtype}, shape {list(desc.shape)}, box {list(desc.box)}, "
        f"swizzle {desc.swizzle}")
    return (ctypes.c_ubyte * 128).from_buffer_copy(ctypes.string_at(tmap.getPtr(), 128))
