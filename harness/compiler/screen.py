"""What a cubin could use to tell timed launches from checked ones (pure Python, no GPU).

A kernel that adapts to its verifier needs somewhere to keep what it learnt between launches,
or a clock: mutable device globals (``__device__`` variables, in the ELF's ``.nv.global``
sections), the device heap (``malloc``), clock and timer reads (``SR_CLOCKLO``,
``SR_GLOBALTIMERLO`` in the SASS) and atomics on global memory. None of these is banned
(persistent schedulers count tiles with atomics on a global), but a kernel that has state gets
the stateful checks at full strength (measure.py), and every report lists what was found.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from harness.errors import HarnessError

_GLOBAL_SECTIONS = (".nv.global", ".nv.global.init")
_CLOCK = re.compile(r"\bSR_(GLOBALTIMER|CLOCK)(LO|HI)?\b")
_ATOMIC = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?((?:ATOMG|ATOM|RED|REDG)"
                     r"(?:\.[A-Z0-9_]+)*)\b")
_HEAP = ("malloc", "free", "__nv_malloc")


@dataclass(frozen=True)
class Screen:
    """What a cubin holds that lets a kernel keep state or read time."""

    globals: tuple[tuple[str, int], ...] = ()
    """Mutable device globals: (symbol, bytes)."""
    heap: bool = False
    """Calls the device heap (malloc): memory that outlives a launch."""
    clocks: tuple[str, ...] = ()
    """Clock and timer registers read (``globaltimer``, ``clock``)."""
    atomics: int = 0
    """Atomic instructions on global memory in the SASS (static count)."""

    @property
    def stateful(self) -> bool:
        """Whether anything outlives a launch: a global or the heap."""
        return bool(self.globals) or self.heap

    def lines(self) -> tuple[str, ...]:
        """One phrase per finding, for reports (empty: nothing found)."""
        out = []
        if self.globals:
            total = sum(size for _, size in self.globals)
            names = ", ".join(f"{name} ({size:,} B)" for name, size in self.globals[:4])
            more = f" and {len(self.globals) - 4} more" if len(self.globals) > 4 else ""
            out.append(f"mutable device globals: {names}{more}, {total:,} B in all")
        if self.heap:
            out.append("device heap (malloc)")
        if self.clocks:
            out.append(f"reads {' and '.join('%' + c for c in self.clocks)}")
        if self.atomics:
            out.append(f"{self.atomics} atomics on global memory")
        return tuple(out)

    def to_json(self) -> dict:
        return {"globals": [list(g) for g in self.globals], "heap": self.heap,
                "clocks": list(self.clocks), "atomics": self.atomics}

    @classmethod
    def from_json(cls, data: dict) -> Screen:
        return cls(tuple((str(n), int(s)) for n, s in data.get("globals", ())),
                   bool(data.get("heap")), tuple(data.get("clocks", ())),
                   int(data.get("atomics", 0)))


def screen(cubin: bytes, sass: str) -> Screen:
    """The cubin's mutable globals and heap calls (from its ELF) and clock reads and global
    atomics (from its SASS listing)."""
    globals_, heap = elf_state(cubin)
    clocks = sorted({("globaltimer" if m.group(1) == "GLOBALTIMER" else "clock")
                     for m in _CLOCK.finditer(sass)})
    return Screen(globals_, heap, tuple(clocks), len(_ATOMIC.findall(sass)))


def elf_state(cubin: bytes) -> tuple[tuple[tuple[str, int], ...], bool]:
    """(mutable device globals as (name, bytes), whether the heap is called) from an ELF64
    cubin's section headers and symbol table."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise HarnessError("not an ELF64 cubin: cannot screen it")
    try:
        shoff, = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize)
                    for i in range(shnum)]
        names = sections[shstrndx]

        def text(table_offset: int, at: int) -> str:
            end = cubin.index(b"\0", table_offset + at)
            return cubin[table_offset + at:end].decode(errors="replace")

        section_names = [text(names[4], s[0]) for s in sections]
        found, heap = [], False
        for sec in sections:
            if sec[1] != 2:  # SHT_SYMTAB
                continue
            strtab = sections[sec[6]][4]
            for i in range(sec[5] // 24):
                st_name, st_info, _, st_shndx, _, st_size = struct.unpack_from(
                    "<IBBHQQ", cubin, sec[4] + i * 24)
                name = text(strtab, st_name)
                if st_shndx == 0 and name in _HEAP:
                    heap = True
                if (st_info & 0xF) == 1 and 0 < st_shndx < len(sections) and any(
                        section_names[st_shndx] == s or section_names[st_shndx].startswith(s + ".")
                        for s in _GLOBAL_SECTIONS):
                    found.append((name, int(st_size)))
    except (struct.error, ValueError, IndexError) as exc:
        raise HarnessError(f"the cubin's ELF could not be read for screening: {exc}") from None
    return tuple(sorted(set(found))), heap
