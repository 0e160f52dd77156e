"""The harness's own small kernels (the timer's spins, the crowd, fresh inputs, the references'
element-wise steps, the known-duration probes, the buffers kind's draws and ceiling): one way
to build them. Each source is compiled by NVRTC in this process (they are not measured, so the
compile child's reproducibility is not needed, compiler/child.py) for one architecture, kept in
the compile cache by the hash of its source, flags, architecture and NVRTC's version, and
loaded as a :class:`~harness.gpu.driver.Module` where a context is current.

:func:`ahead` starts compiles on threads (NVRTC lets go of the GIL) so that a session's
kernels build beside its start-up and one another: each took 0.04-0.3 s of a worker's main
thread, one after the other, on every start, cold or warm (issue 37)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError


@dataclass(frozen=True)
class Source:
    """One of the harness's own kernel sources: its CUDA C++ text, the file name NVRTC gives
    it in diagnostics, what it is for (``"the timer's kernels"``: in errors) and its flags
    beyond ``-arch``."""

    text: bytes
    name: str
    what: str
    flags: tuple[str, ...] = ()

    def key(self, arch: str) -> str:
        from harness.gpu.compilers import compiler_versions

        digest = hashlib.sha256()
        for part in (self.text, self.name.encode(), arch.encode(), *map(str.encode, self.flags),
                     compiler_versions()["nvrtc"].encode()):
            digest.update(len(part).to_bytes(8, "little") + part)
        return digest.hexdigest()[:32]


_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="harness-own-kernels")
_LOCK = threading.Lock()
_BUILDS: dict[tuple[str, str], Future] = {}


def current_arch() -> str:
    """The compile target of the current context's device (``sm_90``)."""
    from harness.gpu.check import check
    from harness.gpu.driver import cu, device_arch_name

    return device_arch_name(int(check(cu.cuCtxGetDevice(), "cuCtxGetDevice")))


def ahead(arch: str, *sources: Source) -> None:
    """Start building ``sources`` for ``arch`` on threads (no wait); :func:`cubin` then takes
    what they built, or the error they met."""
    for source in sources:
        _build(source, arch)


def cubin(source: Source, arch: str, error: type[HarnessError] = HarnessError) -> bytes:
    """``source``'s cubin for ``arch``: from a build :func:`ahead` started, the cache, or NVRTC
    now; ``error`` (a HarnessError) says why it did not compile."""
    try:
        return _build(source, arch).result()
    except _Failed as failed:
        raise error(f"{source.what} did not compile ({source.name}, {arch}): "
                    f"{failed}") from None


def module(source: Source, what: str | None = None, arch: str | None = None,
           error: type[HarnessError] = HarnessError):
    """``source`` built for ``arch`` (default: the current context's device) and loaded as a
    Module named ``what`` (default: the source's)."""
    from harness.gpu.driver import Module

    arch = arch or current_arch()
    return Module(cubin(source, arch, error), what or source.what)


class _Failed(Exception):
    """NVRTC's log for a source that did not compile."""


def _build(source: Source, arch: str) -> Future:
    with _LOCK:
        key = (source.key(arch), arch)
        found = _BUILDS.get(key)
        if found is None or (found.done() and found.exception() is not None):
            found = _BUILDS[key] = _POOL.submit(_compiled, source, arch, key[0])
        return found


def _compiled(source: Source, arch: str, key: str) -> bytes:
    path = _cache_path(key)
    with contextlib.suppress(OSError):
        return path.read_bytes()
    from harness.gpu.compilers import nvrtc_compile

    out = nvrtc_compile(source.text, source.name, [f"-arch={arch}", *source.flags])
    if not out.ok:
        raise _Failed(out.log or out.status)
    _store(path, out.cubin)
    return out.cubin


def _cache_path(key: str) -> Path:
    from harness.cache_dir import cache_dir

    return cache_dir() / "own" / f"{key}.cubin"


def _store(path: Path, data: bytes) -> None:
    """Written whole or not at all (a cache that cannot be written is no error: the next
    session compiles again)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".own-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
