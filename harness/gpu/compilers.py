"""NVRTC and nvJitLink through ``cuda.bindings``: the compilers' side of the chokepoint.

These calls need no GPU and no driver. They return what the compilers said (cubin, logs,
status); turning a failed compile into a readable error is ``harness.compiler.compile``'s job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from harness.gpu.check import check


@dataclass(frozen=True)
class CompilerOutput:
    """What one NVRTC compile or nvJitLink link produced."""

    ok: bool
    cubin: bytes
    log: str
    """NVRTC's program log, or nvJitLink's info log (ok) / error log (failed)."""
    status: str = ""
    """The failing call's own words, where the log may be empty."""
    lowered: dict[str, str] = field(default_factory=dict)
    """NVRTC: each name expression asked for -> the symbol it lowered to (its mangled name)."""


@cache
def compiler_versions() -> dict[str, str]:
    """NVRTC and nvJitLink versions, as ``major.minor`` strings."""
    from cuda.bindings import nvjitlink, nvrtc

    major, minor = check(nvrtc.nvrtcVersion(), "nvrtcVersion")
    link_major, link_minor = nvjitlink.version()
    return {"nvrtc": f"{major}.{minor}", "nvjitlink": f"{link_major}.{link_minor}"}


def nvrtc_compile(source: bytes, name: str, flags: list[str],
                  name_expressions: tuple[str, ...] = ()) -> CompilerOutput:
    """CUDA C++ ``source`` (named ``name`` in diagnostics) compiled to a cubin by NVRTC;
    ``name_expressions`` (C++ names of kernels: ``ns::gemm<128, 64>``) are instantiated and
    their lowered symbols returned."""
    from cuda.bindings import nvrtc

    prog = check(nvrtc.nvrtcCreateProgram(source, name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        for expression in name_expressions:
            check(nvrtc.nvrtcAddNameExpression(prog, expression.encode()),
                  "nvrtcAddNameExpression", expression)
        encoded = [f.encode() for f in flags]
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        size = check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        buf = bytearray(size)
        check(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        log = buf.rstrip(b"\0").decode(errors="replace")
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return CompilerOutput(False, b"", log, status.name)
        size = check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = bytearray(size)
        check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        lowered = {}
        for expression in name_expressions:
            symbol = check(nvrtc.nvrtcGetLoweredName(prog, expression.encode()),
                           "nvrtcGetLoweredName", expression)
            lowered[expression] = (symbol.decode() if isinstance(symbol, bytes)
                                   else str(symbol))
        return CompilerOutput(True, bytes(cubin), log, lowered=lowered)
    finally:
        check(nvrtc.nvrtcDestroyProgram(prog), "nvrtcDestroyProgram")


def nvjitlink_ptx(source: bytes, name: str, flags: list[str]) -> CompilerOutput:
    """PTX ``source`` assembled and linked to a cubin by nvJitLink."""
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(len(flags), flags)
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, source, len(source), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            return CompilerOutput(False, b"", _nvjitlink_log(handle, "error"), str(exc))
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return CompilerOutput(True, bytes(cubin), _nvjitlink_log(handle, "info"))
    finally:
        nvjitlink.destroy(handle)


def _nvjitlink_log(handle, which: str) -> str:
    from cuda.bindings import nvjitlink

    size = getattr(nvjitlink, f"get_{which}_log_size")(handle)
    buf = bytearray(size)
    if size:
        getattr(nvjitlink, f"get_{which}_log")(handle, buf)
    return buf.rstrip(b"\0").decode(errors="replace")


def cuda_version_for_ptx(version: str) -> tuple[int, int] | None:
    """The oldest CUDA (major, minor) that reads PTX ISA ``version``; None when unknown."""
    from cuda.bindings.utils import get_minimal_required_cuda_ver_from_ptx_ver

    try:
        code = get_minimal_required_cuda_ver_from_ptx_ver(version)
    except ValueError:
        return None
    return code // 1000, code % 1000 // 10
