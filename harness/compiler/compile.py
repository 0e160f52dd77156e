"""Host-side compilation to cubin: ``.cu`` through NVRTC, ``.ptx`` through nvJitLink.

No GPU or driver is needed. Each compile keeps the ptxas resource report with its cubin in an
on-disk cache keyed by every file the build reads (the kernel, the files it includes with
``#include "..."``, recursively, and its host set-up ``<kernel>.py``), options, target and
compiler version (NVRTC's own cache returns an empty log on a hit, so it is turned off with
``--no-cache``).
"""

from __future__ import annotations

import codecs
import hashlib
import json
import multiprocessing
import os
import re
import tempfile
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from harness.archs import ARCHS, can_run, get_arch
from harness.compiler import headers
from harness.compiler.ptxas import Resources, parse_report
from harness.errors import CompileError, HarnessError
from harness.gpu.compilers import (
    compiler_versions,
    cuda_version_for_ptx,
    nvjitlink_ptx,
    nvrtc_compile,
)
from harness.kernels import hostcode, ptxpp
from harness.kernels.registry import Kernel, source_sha256
from harness.kernels.spec import read_spec

CACHE_SCHEMA = 3  # 2: the entry's symbol kept beside the cubin; 3: includes and .py in the key


@dataclass(frozen=True)
class CompileOptions:
    """How a kernel is compiled; each field names the compiler flag it maps to."""

    arch: str = "sm_90"
    """``-arch=sm_XX`` for NVRTC and nvJitLink: the exact target, cubin only (no PTX embedded)."""
    line_info: bool = True
    """``-lineinfo``: source lines in the cubin for profilers; no effect on the code."""
    std: str = "c++17"
    """``-std=`` for NVRTC."""
    defines: tuple[str, ...] = ()
    """``-DNAME=VALUE`` for NVRTC: the kernel's tile parameters."""
    include_paths: tuple[str, ...] = ()
    """``--include-path=DIR`` for NVRTC, one per folder: the CUDA runtime headers, libcu++ and
    the harness's own <cstdint> (:func:`harness.compiler.headers.include_paths`); NVRTC searches
    nothing else for ``#include <...>``."""
    extra: tuple[str, ...] = field(default=())
    """Further flags passed through unchanged."""

    def nvrtc_flags(self) -> list[str]:
        flags = [f"-arch={self.arch}", f"-std={self.std}", "--ptxas-options=-v", "--no-cache"]
        if self.line_info:
            flags.append("-lineinfo")
        flags += [f"--include-path={folder}" for folder in self.include_paths]
        return flags + list(self.defines) + list(self.extra)

    def nvjitlink_flags(self) -> list[str]:
        # -no-cache: nvJitLink (13.0 seen) keeps a disk cache, and a hit carries no ptxas report
        flags = [f"-arch={self.arch}", "-verbose", "-no-cache"]
        if self.line_info:
            flags.append("-lineinfo")
        return flags + list(self.extra)


@dataclass(frozen=True)
class CompiledKernel:
    """A cubin and what ptxas reported about its entry function."""

    kernel: str
    arch: str
    cubin: bytes
    resources: Resources
    log: str
    compiler: str
    cached: bool
    symbol: str
    """The entry function's symbol in the cubin: the spec's entry, or for a C++ entry the
    mangled name NVRTC lowered it to (what the module is asked for)."""


def cache_dir() -> Path:
    """``$HARNESS_CACHE_DIR``, else ``$XDG_CACHE_HOME/kernel-harness`` (``~/.cache``)."""
    if os.environ.get("HARNESS_CACHE_DIR"):
        return Path(os.environ["HARNESS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "kernel-harness"


def target_arch(kernel: Kernel, device_arch: str) -> str:
    """The compile target for ``kernel`` on a device of ``device_arch``: the device's own, or
    the arch-specific target (``sm_90a``) when the kernel's min_arch needs one."""
    need = get_arch(kernel.spec.min_arch)
    return need.name if need.needs_arch_specific else device_arch


def compile_kernel(kernel: Kernel, arch: str, *, use_cache: bool = True) -> CompiledKernel:
    """Compile ``kernel`` for ``arch`` (or for its arch-specific target, :func:`target_arch`)
    to a cubin, from the cache when the same compile is there."""
    get_arch(arch)  # a clear error for an unknown target before the compiler sees it
    arch = target_arch(kernel, arch)
    spec = kernel.spec
    # a UTF-8 byte-order mark stops NVRTC ("unrecognized token") and nvJitLink (bad input)
    source = spec.path.read_bytes().removeprefix(codecs.BOM_UTF8)
    expanded = None
    if spec.language == "cu":
        options = CompileOptions(arch=arch, defines=kernel.defines,
                                 include_paths=headers.include_paths(),
                                 extra=headers.extra_flags(spec.path))
        flags, compiler = options.nvrtc_flags(), f"nvrtc {compiler_versions()['nvrtc']}"
    else:
        # the PTX macros take the kernel's parameters, as -D does for .cu: the key is the result
        expanded = ptxpp.expand(source.decode(errors="replace"), kernel.param_env, spec.path,
                                arch)
        source = expanded.text.encode()
        options = CompileOptions(arch=arch)
        flags, compiler = options.nvjitlink_flags(), f"nvjitlink {compiler_versions()['nvjitlink']}"
    # every file the build reads: an edited header must rebuild (source_sha256 covers the
    # quoted includes, recursively, and the host set-up beside the kernel)
    identity = [CACHE_SCHEMA, spec.language, flags, compiler, source_sha256(spec.path)]
    if spec.language == "cu" and kernel.entry_expression != spec.entry:
        # template arguments that are not -D macros make variants of one source and flags
        identity.append(kernel.entry_expression)
    key = hashlib.sha256(json.dumps(identity).encode() + source).hexdigest()[:32]
    ptx = expanded.text if expanded is not None else None
    if use_cache:
        hit = _cache_load(key, kernel, arch, compiler)
        if hit:
            _check_parameters(kernel, hit.cubin, hit.symbol, ptx)
            return hit
    symbol = spec.entry
    if spec.language == "cu":
        # a .cu entry is a name NVRTC lowers: a template instantiation, a kernel in a
        # namespace, a plain C++ kernel (mangled: _Z1fiii...) and an extern "C" one (itself);
        # a mangled symbol is taken as it is
        expression = kernel.entry_expression
        names = () if spec.entry.startswith("_Z") else (expression,)
        withheld = {n: v for n, v in kernel.params if not spec.passes_as_macro(n)}
        cubin, log, lowered = nvrtc_device_cubin(source, str(spec.path), flags, names, withheld)
        symbol = lowered.get(expression, symbol)
    else:
        check_ptx_header(source.decode(errors="replace"), spec.path, arch,
                         compiler_versions()["nvjitlink"])
        cubin, log = _nvjitlink(source, spec.path, flags, expanded)
    report = parse_report(log)
    if symbol not in report:
        lowered_from = f" (lowered from {spec.entry!r})" if symbol != spec.entry else ""
        raise CompileError(
            f"{spec.path}: the compiler's resource report has no entry function {symbol!r}"
            f"{lowered_from} (found: {', '.join(report) or 'none'}); check the spec's entry and "
            "that the kernel is extern \"C\" or named as C++ ('ns::kernel<128>') (.cu), or "
            ".visible .entry (.ptx)"
        )
    _check_parameters(kernel, cubin, symbol, ptx)
    compiled = CompiledKernel(kernel.name, arch, cubin, report[symbol], log, compiler, False,
                              symbol)
    if use_cache:
        _cache_store(key, compiled)
    return compiled


def _check_parameters(kernel: Kernel, cubin: bytes, symbol: str, ptx: str | None) -> None:
    """Refuse a kernel whose compiled parameters differ in count or sizes from what its
    launches pass (the spec's signature): both lists, and what to change."""
    problem = kernel.spec.parameter_problem(cubin, symbol, ptx)
    if problem:
        raise CompileError(problem)


def _cache_load(key: str, kernel: Kernel, arch: str, compiler: str) -> CompiledKernel | None:
    folder = cache_dir()
    try:
        meta = json.loads((folder / f"{key}.json").read_text())
        cubin = (folder / f"{key}.cubin").read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(cubin).hexdigest() != meta.get("cubin_sha256") or not meta.get("symbol"):
        return None  # a torn or foreign entry: compile again
    return CompiledKernel(kernel.name, arch, cubin, Resources(**meta["resources"]), meta["log"],
                          compiler, True, meta["symbol"])


def _cache_store(key: str, compiled: CompiledKernel) -> None:
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        meta = {"resources": compiled.resources.as_dict(), "log": compiled.log,
                "cubin_sha256": hashlib.sha256(compiled.cubin).hexdigest(),
                "symbol": compiled.symbol}
        for suffix, data in ((".cubin", compiled.cubin), (".json", json.dumps(meta).encode())):
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, folder / f"{key}{suffix}")
    except OSError:
        pass  # the cache is an optimisation: a read-only home must not stop a compile


def nvrtc_cubin(source: bytes, name: str, flags: list[str], name_expressions: tuple[str, ...] = ()
                ) -> tuple[bytes, str, dict[str, str]]:
    """CUDA C++ ``source`` compiled by NVRTC with ``flags``: the cubin, the compile log and the
    symbols ``name_expressions`` lowered to. A failed compile raises CompileError with NVRTC's
    diagnostics placed in ``name``."""
    out = nvrtc_compile(source, name, flags, name_expressions)
    if not out.ok:
        raise CompileError(_explain_nvrtc(out.log, name, source.decode(errors="replace"), flags))
    return out.cubin, out.log, out.lowered


def nvrtc_device_cubin(source: bytes, name: str, flags: list[str],
                       name_expressions: tuple[str, ...] = (),
                       withheld: dict[str, int] | None = None
                       ) -> tuple[bytes, str, dict[str, str]]:
    """:func:`nvrtc_cubin` of ``source`` as written; where that fails and the file has host code
    (launchers, ``__host__`` functions, ``std::`` containers, their #includes: NVRTC compiles
    device code only), of its device part, the host code blanked
    (:func:`harness.kernels.hostcode.device_part`), with a note of what was left out in the log.
    A failure carries hints: host code the harness could not leave out (its line, and the
    ``#ifndef __CUDACC_RTC__`` guard), ``-D`` parameters that rewrite the source's own names,
    and parameters ``withheld`` from the macros (template arguments) that the source uses as
    macros all the same."""
    text = source.decode(errors="replace")
    defines = [f for f in flags if f.startswith("-D")]
    try:
        return nvrtc_cubin(source, name, flags, name_expressions)
    except CompileError as first:
        device = hostcode.device_part(text, default_device=headers.DEFAULT_DEVICE in flags,
                                      header_found=_nvrtc_has_header)
        if not device.left_out:
            hints = hostcode.nvrtc_hints(str(first), text, name, defines, withheld=withheld)
            raise CompileError("\n".join([str(first), *hints])) from None
    try:
        cubin, log, lowered = nvrtc_cubin(device.text.encode(), name, flags, name_expressions)
    except CompileError as second:
        hints = hostcode.nvrtc_hints(str(second), text, name, defines, device, withheld)
        # what to use on the device instead of a standard header left out (<cuda/std/...>)
        hints += [_missing_header(header) for header in device.headers]
        raise CompileError("\n".join([str(second), device.note(), *hints])) from None
    return cubin, f"{device.note()}\n{log}", lowered


def _nvrtc_has_header(header: str) -> bool:
    """Whether NVRTC finds ``#include <header>`` on the harness's include path."""
    return any((Path(folder) / header).is_file() for folder in headers.include_paths())


_NVRTC_DIAG = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<kind>error|catastrophic error)"
                         r"(?P<msg>.*)$", re.MULTILINE)


def _explain_nvrtc(log: str, name: str, source: str, flags: list[str]) -> str:
    lines = source.splitlines()
    parts = []
    for m in _NVRTC_DIAG.finditer(log):
        number = int(m["line"])
        shown = lines[number - 1].strip() if 0 < number <= len(lines) else ""
        parts.append(f"{m['file']}:{number}: {m['kind']}{m['msg']}\n    {number} | {shown}")
    head = "\n".join(parts) or log.strip()
    hints = "".join(f"\n{_missing_header(h)}" for h in dict.fromkeys(_NO_HEADER.findall(log)))
    return (f"{name}: NVRTC could not compile the kernel (flags: {' '.join(flags)})\n{head}"
            f"{hints}\n--- full compiler log ---\n{log.strip()}")


_NO_HEADER = re.compile(r'(?:could not|cannot) open source file "([^"]+)"')
_CUDA_HEADER = re.compile(r"^(cuda\w*\.h|cuda/.*|crt/.*|mma\.h|sm_\d+.*\.h|"
                          r"cooperative_groups.*|vector_\w+\.h|\w+_types\.h)$")


def _missing_header(header: str) -> str:
    """What to do about an ``#include`` NVRTC could not open: where the harness looked, and what
    to install (a CUDA header) or include instead (a C++ standard header)."""
    search = headers.include_search()
    where = (f"the include path is {', '.join(search.paths)}; looked in "
             f"{'; '.join(search.looked)}")
    if _CUDA_HEADER.match(header):
        todo = search.advice() or ("it is not among the CUDA headers found: check the name, "
                                   "or set CUDA_HOME to a toolkit that has it")
        return f"header {header!r} not found: {where}. To fix: {todo}"
    std = f"c{header.removesuffix('.h')}" if header.endswith(".h") else header
    return (f"header {header!r} not found: NVRTC has no C++ standard library (the harness adds "
            f"<cstdint> and <stdint.h>); include libcu++'s <cuda/std/{std}> instead where it "
            f"exists, or a header of your own next to the kernel with #include \"...\" ({where})")


_PTX_VERSION = re.compile(r"^\s*\.version\s+(\d+\.\d+)", re.MULTILINE)
_PTX_TARGET = re.compile(r"^\s*\.target\s+([\w]+)", re.MULTILINE)


def check_ptx_header(source: str, path: Path, arch: str, linker_version: str) -> None:
    """Refuse, before assembling, a PTX whose ``.version`` this nvJitLink cannot read or whose
    ``.target`` the compile target (the GPU's arch) cannot run, saying what to change."""
    version, target = _PTX_VERSION.search(source), _PTX_TARGET.search(source)
    if not version or not target:
        missing = ".version" if not version else ".target"
        raise CompileError(f"{path}: no {missing} directive; a PTX file starts with "
                           "'.version X.Y', '.target sm_NN' and '.address_size 64'")
    have = tuple(int(x) for x in linker_version.split("."))
    need = cuda_version_for_ptx(version[1])
    if need is None or need > have:
        needs = f"CUDA {need[0]}.{need[1]}" if need else "a CUDA newer than any known here"
        raise CompileError(
            f"{path}: .version {version[1]} needs {needs} to assemble; this nvJitLink is "
            f"{linker_version}: lower .version to one it reads (PTX ISA {have[0] - 4}.{have[1]} "
            f"for CUDA {have[0]}.{have[1]}) or install a newer nvidia-nvjitlink")
    target_name = target[1]
    if target_name not in ARCHS:
        raise CompileError(f"{path}: .target {target_name} is not an architecture the harness "
                           f"knows ({', '.join(ARCHS)})")
    if get_arch(target_name).needs_arch_specific and arch != target_name:
        raise CompileError(
            f"{path}: .target {target_name} assembles only for {target_name}, and the compile "
            f"target is {arch}: declare min_arch = \"{target_name}\" in the spec (the harness "
            f"then compiles for {target_name}), or use .target {arch}")
    if not can_run(get_arch(target_name), get_arch(arch)):
        raise CompileError(
            f"{path}: .target {target_name} cannot run on {arch} (the GPU's architecture): "
            f"lower .target to {arch} or older, and min_arch in the spec with it")


def _nvjitlink(source: bytes, path: Path, flags: list[str],
               expanded: ptxpp.Expanded | None = None) -> tuple[bytes, str]:
    out = nvjitlink_ptx(source, str(path), flags)
    if not out.ok:
        raise CompileError(explain_ptx_error(out.log, path, source.decode(errors="replace"),
                                             flags, out.status, expanded))
    return out.cubin, out.log


_PTXAS_DIAG = re.compile(r"ptxas[^,\n]*?(?:, line (?P<line>\d+))?; (?P<kind>error|fatal)\s*:\s*"
                         r"(?P<msg>.*)")


def explain_ptx_error(log: str, path: Path, source: str, flags: list[str], status: str,
                      expanded: ptxpp.Expanded | None = None) -> str:
    """An nvJitLink/ptxas failure as ``file:line: message`` with the PTX line shown; with PTX
    macros, at the line the author wrote, with the loop values and the expanded line."""
    lines = source.splitlines()
    parts = []
    for m in _PTXAS_DIAG.finditer(log):
        if m["line"]:
            number = int(m["line"])
            shown = lines[number - 1].strip() if 0 < number <= len(lines) else ""
            origin = expanded.origin(number) if expanded and expanded.changed else None
            if origin is None:
                parts.append(f"{path}:{number}: {m['kind']}: {m['msg'].strip()}\n"
                             f"    {number} | {shown}")
                continue
            where = origin.describe().removeprefix(f"line {origin.line}").strip()
            parts.append(f"{origin.path or path}:{origin.line}: {m['kind']}: {m['msg'].strip()}"
                         f"{' ' + where if where else ''}\n"
                         f"    {origin.line} | {expanded.written(origin)}\n"
                         f"    expanded line {number} | {shown}")
        else:
            parts.append(f"{path}: {m['kind']}: {m['msg'].strip()}")
    head = "\n".join(parts) or log.strip() or status
    return (f"{path}: nvJitLink could not assemble the PTX (flags: {' '.join(flags)})\n{head}\n"
            f"--- full linker log ---\n{log.strip()}")


def _compile_one(job: tuple[str, str, tuple, str]) -> str:
    path, name, params, arch = job
    kernel = Kernel(name, read_spec(Path(path)), params)
    try:
        compile_kernel(kernel, arch)
    except HarnessError as exc:  # the caller's own compile reports it
        return f"{name}: {exc}"
    return ""


def compile_all(kernels: Sequence[Kernel], arch: str, jobs: int | None = None) -> list[str]:
    """Fill the compile cache for ``kernels`` in ``jobs`` processes (every core by default):
    a GPU host's cold cache costs minutes compiled one by one. The errors, one line each (a
    kernel that does not compile is reported again where it is used)."""
    work = list(dict.fromkeys((str(k.spec.path), k.name, k.params, arch) for k in kernels))
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1, mp_context=context) as pool:
        return [e for e in pool.map(_compile_one, work) if e]
