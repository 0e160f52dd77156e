"""The compile cache: a cubin and its ptxas report per key (compile.py makes the key from every
file the build reads, the flags, the compiler and the compile child's fingerprint), written
atomically; an entry it cannot use is said in one line and compiled again, an unusable folder
is named once and compiling goes on without it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path

from harness.cache_dir import cache_dir
from harness.compiler.ptxas import Resources
from harness.compiler.say import note
from harness.kernels.registry import Kernel


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


_ENTRY_KEYS = frozenset({"resources", "log", "cubin_sha256", "symbol"})
_RESOURCE_FIELDS = frozenset(f.name for f in fields(Resources))


def _unusable(folder: Path, why: str) -> None:
    note(f"the compile cache {folder} {why}: compiling without it, so every run compiles "
          "cold; set HARNESS_CACHE_DIR to a folder that can be written", once=str(folder))


def _entry_problem(meta: object) -> str:
    """What is wrong with a cache entry's metadata ("" when it is one this harness writes)."""
    if not isinstance(meta, dict):
        return f"holds a JSON {type(meta).__name__} where an object was expected"
    if missing := sorted(_ENTRY_KEYS - meta.keys()):
        return f"has no {', '.join(map(repr, missing))}"
    if extra := sorted(meta.keys() - _ENTRY_KEYS):
        return (f"has fields this harness does not know ({', '.join(map(repr, extra))}; "
                "another version of the harness sharing the cache?)")
    resources = meta["resources"]
    if not isinstance(resources, dict) or set(resources) != _RESOURCE_FIELDS or not all(
            type(v) is int and v >= 0 for v in resources.values()):
        return f"has resources of another shape ({json.dumps(resources)[:80]})"
    if not all(isinstance(meta[k], str) for k in ("log", "cubin_sha256", "symbol")) \
            or not meta["symbol"]:
        return "has a log, hash or symbol that is not a string"
    return ""


def load(key: str, kernel: Kernel, arch: str, compiler: str) -> CompiledKernel | None:
    """The cached compile under ``key``; None when there is none or it cannot be used (a
    damaged or foreign entry is said in one line and compiled again; an unreadable cache once
    per process)."""
    folder = cache_dir()
    meta_path = folder / f"{key}.json"
    try:
        data = meta_path.read_bytes()
    except FileNotFoundError:
        return None  # not compiled yet (or only its cubin was written: a store cut short)
    except NotADirectoryError:
        _unusable(folder, "is a file, not a folder")
        return None
    except OSError as exc:
        _unusable(folder, f"cannot be read ({exc.strerror or exc})")
        return None
    try:
        meta = json.loads(data)
    except ValueError:  # not UTF-8, or not JSON
        problem = "is not JSON (a write cut short?)"
    else:
        problem = _entry_problem(meta)
    if not problem:
        try:
            cubin = (folder / f"{key}.cubin").read_bytes()
        except OSError as exc:
            problem = f"has no readable cubin ({exc.strerror})"
        else:
            if hashlib.sha256(cubin).hexdigest() != meta["cubin_sha256"]:
                problem = "has a cubin that does not match its hash (a write cut short?)"
    if problem:
        note(f"compile cache entry {meta_path} {problem}: compiling {kernel.name} for {arch} "
              "again and replacing it")
        return None
    return CompiledKernel(kernel.name, arch, cubin, Resources(**meta["resources"]), meta["log"],
                          compiler, True, meta["symbol"])


def store(key: str, compiled: CompiledKernel) -> None:
    """Keep ``compiled`` under ``key``, each file written whole and renamed into place; a cache
    that cannot be written is said once per process, and the compile goes on without it."""
    folder = cache_dir()
    if folder.exists() and not folder.is_dir():
        _unusable(folder, "is a file, not a folder")
        return
    meta = {"resources": compiled.resources.as_dict(), "log": compiled.log,
            "cubin_sha256": hashlib.sha256(compiled.cubin).hexdigest(),
            "symbol": compiled.symbol}
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".cubin", compiled.cubin), (".json", json.dumps(meta).encode())):
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, folder / f"{key}{suffix}")
            tmp = None
    except OSError as exc:
        _unusable(folder, f"cannot be written ({exc.strerror or exc})")
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
