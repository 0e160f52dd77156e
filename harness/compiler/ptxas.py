"""The ptxas resource report (``-v`` / ``-verbose``), parsed per entry function."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Resources:
    """What ptxas says one kernel uses."""

    registers: int
    static_smem_bytes: int = 0
    stack_frame_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    barriers: int = 0
    constant_bytes: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


_FUNCTION = re.compile(r"(?:Compiling entry function|Function properties for) '?([\w$.]+)'?")
_FIELDS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "static_smem_bytes": re.compile(r"(\d+) bytes smem"),
    "stack_frame_bytes": re.compile(r"(\d+) bytes stack frame"),
    "spill_store_bytes": re.compile(r"(\d+) bytes spill stores"),
    "spill_load_bytes": re.compile(r"(\d+) bytes spill loads"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "constant_bytes": re.compile(r"(\d+) bytes cmem\[0\]"),
}


def parse_report(log: str) -> dict[str, Resources]:
    """Resources per function from a ptxas verbose log (functions it names, in any order)."""
    found: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in log.splitlines():
        if not line.startswith("ptxas"):
            continue  # nvJitLink repeats a summary of its own ("info : ..."); ptxas's is the one
        header = _FUNCTION.search(line)
        if header:
            current = header.group(1)
            found.setdefault(current, {})
            continue
        if current is None:
            continue
        for key, pattern in _FIELDS.items():
            match = pattern.search(line)
            if match:
                found[current][key] = int(match.group(1))
    return {name: Resources(**{"registers": 0, **values}) for name, values in found.items()
            if "registers" in values}
