"""Host-side compilation to cubin: ``.cu`` through NVRTC, ``.ptx`` through nvJitLink.

No GPU or driver is needed. Each compile keeps the ptxas resource report with its cubin in an
on-disk cache keyed by every file the build reads (the kernel, the files it includes with
``#include "..."``, recursively, and its host set-up ``<kernel>.py``), options, target and
compiler version (NVRTC's own cache returns an empty log on a hit, so it is turned off with
``--no-cache``). An entry this harness cannot use (torn, or written by another version sharing
the folder) is compiled again with a one-line note; a cache folder that cannot be used is named
once per process and compiling goes on without it.

The compilers run in a fresh child process per compile (:mod:`harness.compiler.child`): the same
input gives the same cubin, and Ctrl-C or a time limit stops a compile.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from harness.archs import ARCHS, can_run, compile_target, get_arch
from harness.compiler import child, headers
from harness.compiler.cache import CompiledKernel, cache_dir  # noqa: F401 (re-exported)
from harness.compiler.cache import load as _cache_load
from harness.compiler.cache import store as _cache_store
from harness.compiler.child import CompileTimeout
from harness.compiler.include_check import check_includes
from harness.compiler.ptxas import parse_report
from harness.errors import CompileError, HarnessError
from harness.gpu.compilers import compiler_versions, cuda_version_for_ptx
from harness.kernels import hostcode, includes, ptxpp
from harness.kernels.registry import Kernel, source_sha256

T, R = TypeVar("T"), TypeVar("R")
CACHE_SCHEMA = 4  # 2: the entry's symbol kept beside the cubin; 3: includes and .py in the key;
# 4: compiled in a fresh child (harness.compiler.child), whose code's fingerprint is in the key


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


def target_arch(kernel: Kernel, device_arch: str) -> str:
    """The compile target for ``kernel`` on a device of ``device_arch`` (archs.compile_target)."""
    return compile_target(kernel.spec.min_arch, device_arch)


def compile_kernel(kernel: Kernel, arch: str, *, use_cache: bool = True,
                   limit_s: float | None = None, cached_only: bool = False) -> CompiledKernel:
    """Compile ``kernel`` for ``arch`` (or for its arch-specific target, :func:`target_arch`)
    to a cubin, from the cache when the same compile is there; the compile runs in a child
    process, stopped after ``limit_s`` seconds (:func:`harness.compiler.child.compile_limit_s`).
    ``cached_only``: a CompileError rather than a compile where the cache has none."""
    get_arch(arch)  # a clear error for an unknown target before the compiler sees it
    arch = target_arch(kernel, arch)
    spec = kernel.spec
    # a UTF-8 byte-order mark stops NVRTC ("unrecognized token") and nvJitLink (bad input)
    source = spec.path.read_bytes().removeprefix(codecs.BOM_UTF8)
    expanded = None
    if spec.language == "cu":
        check_includes(spec.path, headers.include_paths())
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
    identity = [CACHE_SCHEMA, spec.language, flags, compiler, child.fingerprint(),
                source_sha256(spec.path)]
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
    if cached_only:
        raise CompileError(f"{kernel.name} for {arch} is not in the compile cache")
    symbol = spec.entry
    if spec.language == "cu":
        # a .cu entry is a name NVRTC lowers: a template instantiation, a kernel in a
        # namespace, a plain C++ kernel (mangled: _Z1fiii...) and an extern "C" one (itself);
        # a mangled symbol is taken as it is
        expression = kernel.entry_expression
        names = () if spec.entry.startswith("_Z") else (expression,)
        withheld = {n: v for n, v in kernel.params if not spec.passes_as_macro(n)}
        cubin, log, lowered = nvrtc_device_cubin(source, str(spec.path), flags, names, withheld,
                                                 what=f"{kernel.name} ({spec.path})",
                                                 limit_s=limit_s)
        symbol = lowered.get(expression, symbol)
    else:
        check_ptx_header(source.decode(errors="replace"), spec.path, arch,
                         compiler_versions()["nvjitlink"])
        cubin, log = _nvjitlink(source, spec.path, flags, expanded,
                                what=f"{kernel.name} ({spec.path})", limit_s=limit_s)
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


def nvrtc_cubin(source: bytes, name: str, flags: list[str], name_expressions: tuple[str, ...] = (),
                *, what: str = "", limit_s: float | None = None
                ) -> tuple[bytes, str, dict[str, str]]:
    """CUDA C++ ``source`` compiled by NVRTC with ``flags`` in a child process
    (:mod:`harness.compiler.child`; ``limit_s``, ``what`` names it): the cubin, the compile log
    and the symbols ``name_expressions`` lowered to. A failed compile raises CompileError with
    NVRTC's diagnostics placed in ``name``."""
    # the child works in / (its memory, and so NVRTC's output, must not depend on where the
    # command runs): it is given absolute paths, and its diagnostics are shown as given here
    here = os.path.join(os.getcwd(), "")
    absolute = [f"--include-path={os.path.abspath(f.split('=', 1)[1])}"
                if f.startswith("--include-path=") else f for f in flags]
    out = child.run("nvrtc", (source, os.path.abspath(name), absolute, name_expressions),
                    what or name, limit_s)
    log = out.log if os.path.isabs(name) else out.log.replace(here, "")
    if not out.ok:
        raise CompileError(_explain_nvrtc(log, name, source.decode(errors="replace"), flags))
    return out.cubin, log, out.lowered


def nvrtc_device_cubin(source: bytes, name: str, flags: list[str],
                       name_expressions: tuple[str, ...] = (),
                       withheld: dict[str, int] | None = None, *, what: str = "",
                       limit_s: float | None = None
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
        return nvrtc_cubin(source, name, flags, name_expressions, what=what, limit_s=limit_s)
    except CompileTimeout:
        raise
    except CompileError as first:
        # the quoted includes' host code is left out too, in memory (files on disk unchanged)
        device = includes.device_source(text, name, header_found=_nvrtc_has_header,
                                        default_device=headers.DEFAULT_DEVICE in flags)
        if not device.left_out:
            hints = hostcode.nvrtc_hints(str(first), text, name, defines, withheld=withheld)
            raise CompileError("\n".join([str(first), *hints])) from None
    try:
        cubin, log, lowered = nvrtc_cubin(device.text.encode(), name, flags, name_expressions,
                                          what=what, limit_s=limit_s)
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
    texts = {name: source.splitlines()}  # each file a diagnostic names: the kernel, a header

    def lines_of(file: str) -> list[str]:
        if file not in texts:
            try:
                texts[file] = Path(file).read_text(errors="replace").splitlines()
            except OSError:  # a file NVRTC named but this process cannot read: no line shown
                texts[file] = []
        return texts[file]

    parts = []
    for m in _NVRTC_DIAG.finditer(log):
        number, lines = int(m["line"]), lines_of(m["file"])
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


def compile_ptx(source: str, name: str, arch: str) -> bytes:
    """The cubin of PTX text that is no kernel file (an experiment's probe), by nvJitLink in a
    child process, with the harness's flags for ``arch``; uncached. ``name`` labels errors."""
    get_arch(arch)
    return _nvjitlink(source.encode(), Path(name), CompileOptions(arch=arch).nvjitlink_flags())[0]


def _nvjitlink(source: bytes, path: Path, flags: list[str],
               expanded: ptxpp.Expanded | None = None, *, what: str = "",
               limit_s: float | None = None) -> tuple[bytes, str]:
    out = child.run("nvjitlink", (source, str(path), flags), what or str(path), limit_s)
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


def compile_all(kernels: Sequence[Kernel], arch: str, jobs: int | None = None) -> list[str]:
    """Fill the compile cache for ``kernels``, ``jobs`` compiles at a time (every core by
    default): a GPU host's cold cache costs minutes compiled one by one. The errors, one line
    each (a kernel that does not compile is reported again where it is used)."""
    work = list({(k.spec.path, k.name, k.params): k for k in kernels}.values())

    def one(kernel: Kernel) -> str:
        try:
            compile_kernel(kernel, arch)
        except HarnessError as exc:
            return f"{kernel.name}: {exc}"
        return ""

    return [e for e in in_parallel(one, work, jobs) if e]


def in_parallel(work: Callable[[T], R], items: Sequence[T], jobs: int | None = None,
                done: Callable[[T, R], None] | None = None) -> list[R]:
    """``work(item)`` for each item, ``jobs`` at a time (every core by default), the results
    in the items' order; ``done(item, result)`` is called as each finishes (progress). Each
    compile runs in a child process already, so threads suffice; on Ctrl-C (or any error)
    every compile in flight is ended and no other starts."""
    if not items:
        return []
    pool = ThreadPoolExecutor(max_workers=max(1, min(jobs or os.cpu_count() or 1, len(items))))
    try:
        futures = {pool.submit(work, item): item for item in items}
        for future in as_completed(futures):
            if done is not None:
                done(futures[future], future.result())
        return [future.result() for future in futures]
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        child.stop_all()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        child.resume()
