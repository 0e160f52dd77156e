"""A GEMM kernel's SASS read: its instruction family (limits.family) and its cubin's screening
(compiler/screen.py), kept beside the compile cache by the cubin's hash."""

from __future__ import annotations

import hashlib
import json

from harness.compiler.compile import cache_dir
from harness.compiler.sass import disassemble, opcodes
from harness.compiler.screen import Screen, screen
from harness.errors import HarnessError
from harness.kinds.gemm import limits
from harness.kinds.gemm.gemm import LoadedGemm


def screened(gemm: LoadedGemm) -> tuple[str, Screen | None]:
    """The instruction family of a kernel's SASS (limits.family) and its cubin's screening
    (:func:`screened_cubin`)."""
    return screened_cubin(gemm.compiled.cubin)


def screened_cubin(cubin: bytes) -> tuple[str, Screen | None]:
    """The instruction family of a cubin's SASS and its screening, kept beside the compile
    cache by the cubin's hash: a disassembly costs the host most of a second (the runner
    screens every kernel in parallel before its worker starts, so that the worker finds it
    here)."""
    path = cache_dir() / f"{hashlib.sha256(cubin).hexdigest()[:32]}.screen.json"
    try:
        known = json.loads(path.read_text())
        return known["family"], Screen.from_json(known["screen"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        sass = disassemble(cubin)
        found = limits.family(opcodes(sass)), screen(cubin, sass)
    except HarnessError:
        return "unknown", None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"family": found[0], "screen": found[1].to_json()}))
    except OSError:
        pass  # an unwritable cache costs the next run the disassembly, nothing else
    return found


def instruction_family(gemm: LoadedGemm) -> str:
    """The instruction family of a kernel's SASS (:func:`screened`)."""
    return screened(gemm)[0]
