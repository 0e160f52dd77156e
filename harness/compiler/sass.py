"""The SASS instruction mix of a cubin, read with ``cuobjdump -sass`` (no GPU needed).

``cuobjdump`` and the ``nvdisasm`` it runs come from the CUDA toolkit on PATH or from the
``nvidia-cuda-cuobjdump`` and ``nvidia-cuda-nvdisasm`` wheels,
so a machine with no toolkit can still see whether loads are 128 bits wide, whether the tensor-core
instructions are there and whether anything spilled.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from harness.errors import HarnessError

# (column, base opcode, access width in bits or None for any), in report order.
CATEGORIES: tuple[tuple[str, str, int | None], ...] = (
    ("FFMA", "FFMA", None), ("LDS", "LDS", 32), ("LDS.64", "LDS", 64), ("LDS.128", "LDS", 128),
    ("STS", "STS", None), ("LDG", "LDG", 32), ("LDG.64", "LDG", 64), ("LDG.128", "LDG", 128),
    ("LDGSTS", "LDGSTS", None), ("STG", "STG", None), ("BAR", "BAR", None),
    ("LDSM", "LDSM", None), ("HMMA", "HMMA", None), ("HGMMA", "HGMMA", None),
    ("QGMMA", "QGMMA", None), ("LDL", "LDL", None), ("STL", "STL", None),
)
_INSTRUCTION = re.compile(
    r"/\*[0-9a-f]{4,}\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


def _width(opcode: str) -> int:
    parts = opcode.split(".")[1:]
    return 128 if "128" in parts else 64 if "64" in parts else 32


def find_tool(name: str) -> Path:
    """A CUDA binary tool on PATH, else the one its wheel (nvidia-cuda-<name>) installs."""
    found = shutil.which(name)
    if found:
        return Path(found)
    try:
        import nvidia.cu13 as cu13_pkg

        for folder in cu13_pkg.__path__:
            candidate = Path(folder) / "bin" / name
            if candidate.exists():
                return candidate
    except ImportError:
        pass
    raise HarnessError(f"{name} not found: install the CUDA toolkit or "
                       f"`python3 -m pip install nvidia-cuda-{name}`")


def disassemble(cubin: bytes) -> str:
    """The SASS listing of ``cubin`` (cuobjdump runs nvdisasm, so both must be found)."""
    cuobjdump, nvdisasm = find_tool("cuobjdump"), find_tool("nvdisasm")
    env = {**os.environ, "PATH": os.pathsep.join([str(nvdisasm.parent),
                                                  os.environ.get("PATH", "")])}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        done = subprocess.run([str(cuobjdump), "-sass", f.name], capture_output=True,
                              text=True, timeout=120, env=env)
    if done.returncode != 0:
        raise HarnessError(f"cuobjdump -sass failed: {done.stderr.strip()}")
    return done.stdout


def opcodes(sass: str) -> Counter:
    """How many times each full opcode (``LDS.U.128``, ``FFMA``) appears in the listing."""
    # "@!PT" never executes: ptxas places such placeholders (e.g. beside LDGSTS); skip them
    return Counter(m.group(2) for m in _INSTRUCTION.finditer(sass)
                   if (m.group(1) or "").strip() != "@!PT")


def instruction_mix(sass: str) -> dict[str, int]:
    """Counts per category of :data:`CATEGORIES` (static counts: instructions in the code,
    not executions), plus the total."""
    counts = opcodes(sass)
    mix = {name: sum(n for op, n in counts.items() if op.split(".")[0] == base
                     and (width is None or _width(op) == width))
           for name, base, width in CATEGORIES}
    mix["total"] = sum(counts.values())
    return mix
