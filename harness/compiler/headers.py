"""Where NVRTC finds the CUDA headers a kernel may include.

NVRTC searches no directory of its own: ``#include <cuda_fp16.h>`` fails unless an include path
is given. The CUDA runtime headers (``cuda_fp16.h``, ``cuda_bf16.h``, ``cuda_runtime.h``, ...)
come from the ``nvidia-cuda-runtime`` wheel or a toolkit's ``include/``; libcu++
(``<cuda/std/...>``) from the ``nvidia-cuda-cccl`` wheel or the toolkit's ``include/cccl``.
``cuda.pathfinder`` finds both (wheels, conda, CUDA_HOME / CUDA_PATH, system installs); the
toolkit folders are searched too where it finds nothing.

NVRTC has no C++ standard library either: ``nvrtc_include/`` beside this file holds
``<cstdint>`` and ``<stdint.h>``, which take the fixed-width integer types from libcu++.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SHIM_DIR = Path(__file__).resolve().parent / "nvrtc_include"
"""The harness's own standard headers for NVRTC (cstdint, stdint.h)."""

TOOLKIT_DEFAULT = Path("/usr/local/cuda")


@dataclass(frozen=True)
class HeaderSet:
    """One set of headers: a file that proves a folder holds it, and who ships it."""

    libname: str
    """``cuda.pathfinder``'s name for it."""
    canary: str
    """A file the folder must contain."""
    toolkit_subdir: str
    """Where a toolkit keeps it, under its root."""
    wheel: str
    """The pip package that ships it."""


HEADER_SETS = (
    HeaderSet("cudart", "cuda_fp16.h", "include", "nvidia-cuda-runtime"),
    HeaderSet("cccl", "cuda/std/cstdint", "include/cccl", "nvidia-cuda-cccl"),
)


@dataclass(frozen=True)
class IncludeSearch:
    """The include folders found, and every place looked at (for an error message)."""

    paths: tuple[str, ...]
    looked: tuple[str, ...]
    missing: tuple[HeaderSet, ...]

    def advice(self) -> str:
        """What to install for the header sets that were not found."""
        if not self.missing:
            return ""
        wheels = " ".join(h.wheel for h in self.missing)
        return (f"install {wheels} (`python3 -m pip install {wheels}`; `pip install -e .` of "
                "the harness brings them), or set CUDA_HOME to a CUDA 13 toolkit")


def _toolkit_roots() -> list[Path]:
    roots = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    return [*roots, TOOLKIT_DEFAULT]


def _pathfinder(libname: str) -> str | None:
    try:
        from cuda import pathfinder
    except ImportError:
        return None
    find = getattr(pathfinder, "find_nvidia_header_directory", None)
    if find is None:  # before cuda-pathfinder 1.2.3: the toolkit folders below still count
        return None
    try:
        return find(libname)
    except Exception:  # noqa: BLE001 - a finder failure means "not found here", nothing more
        return None


@cache
def include_search() -> IncludeSearch:
    """The include folders to give NVRTC: the runtime headers, libcu++, then the harness's own
    standard headers. Looked up once per process."""
    paths: list[str] = []
    looked: list[str] = []
    missing: list[HeaderSet] = []
    for headers in HEADER_SETS:
        found = _pathfinder(headers.libname)
        looked.append(f"cuda.pathfinder {headers.libname!r} (wheels, conda, CUDA_HOME, "
                      "system)")
        candidates = ([Path(found)] if found else []) + [
            root / headers.toolkit_subdir for root in _toolkit_roots()]
        for folder in candidates:
            if (folder / headers.canary).is_file():
                if str(folder) not in paths:
                    paths.append(str(folder))
                break
            looked.append(str(folder))
        else:
            missing.append(headers)
    paths.append(str(SHIM_DIR))
    return IncludeSearch(tuple(paths), tuple(dict.fromkeys(looked)), tuple(missing))


def include_paths() -> tuple[str, ...]:
    """:func:`include_search`'s folders."""
    return include_search().paths


_DRIVER_HEADERS = re.compile(rb"^\s*#\s*include\s*<(cuda\.h|cudaTypedefs\.h)>", re.MULTILINE)
DEFAULT_DEVICE = "-default-device"
"""NVRTC's flag that makes functions without ``__host__``/``__device__`` device functions:
``<cuda.h>`` (for ``CUtensorMap``) declares the driver API's host functions, which NVRTC
refuses in JIT mode ("host functions are not allowed") unless they are device declarations."""


def extra_flags(path: Path) -> tuple[str, ...]:
    """NVRTC flags a kernel's includes need: :data:`DEFAULT_DEVICE` when it (or a file it
    includes with ``#include "..."``) includes ``<cuda.h>`` or ``<cudaTypedefs.h>``; none
    otherwise, so every other kernel compiles exactly as before."""
    from harness.kernels.registry import sources

    if any(_DRIVER_HEADERS.search(data) for _, data in sources(path)):
        return (DEFAULT_DEVICE,)
    return ()
