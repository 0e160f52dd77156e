"""The one chokepoint for ``cuda.bindings`` results: ``(status, *values)`` tuples that never raise.

Every driver and NVRTC call goes through :func:`check`, which raises :class:`CudaError` naming
the call, the CUDA error name and its text.
"""

from __future__ import annotations

from typing import Any

from harness.errors import CudaError


def check(result: tuple, call: str, context: str = "") -> Any:
    """Return the values of a bindings result, or raise naming ``call`` and the error."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        name, text = _describe(status)
        raise CudaError(call, name, text, context)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _describe(status) -> tuple[str, str]:
    from cuda.bindings import driver, nvrtc

    if isinstance(status, driver.CUresult):
        _, name = driver.cuGetErrorName(status)
        _, text = driver.cuGetErrorString(status)
        return _decode(name) or status.name, _decode(text) or "no description"
    if isinstance(status, nvrtc.nvrtcResult):
        _, text = nvrtc.nvrtcGetErrorString(status)
        return status.name, _decode(text) or "no description"
    return str(status), "no description"


def _decode(value) -> str:
    return value.decode() if isinstance(value, bytes) else (value or "")
