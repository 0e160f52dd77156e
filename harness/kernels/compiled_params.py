"""The parameters a compiled kernel takes, read from its cubin (:func:`cubin_parameter_sizes`)
or its PTX (:func:`ptx_entry_parameters`), and how they differ from those its signature
declares (:func:`parameter_mismatch`)."""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence

_NV_INFO_KPARAM = 0x17
"""EIATTR_KPARAM_INFO: one record per kernel parameter in the cubin's ``.nv.info.<symbol>``."""
_EIFMT_SVAL = 0x04


def cubin_parameter_sizes(cubin: bytes, symbol: str) -> tuple[int, ...] | None:
    """The bytes of each parameter of the kernel ``symbol``, in order, as ptxas recorded them
    in the cubin (``.nv.info.<symbol>``, the records ``cuobjdump -elf`` shows as
    EIATTR_KPARAM_INFO: ordinal, offset, size); None when the cubin does not say."""
    try:
        info = _elf_sections(cubin).get(f".nv.info.{symbol}")
        if info is None:
            return None
        sizes: dict[int, int] = {}
        i = 0
        while i + 4 <= len(info):
            fmt, attr = info[i], info[i + 1]
            if fmt == _EIFMT_SVAL:
                (length,) = struct.unpack_from("<H", info, i + 2)
                if attr == _NV_INFO_KPARAM and length >= 12:
                    _, ordinal_offset, flags = struct.unpack_from("<III", info, i + 4)
                    sizes[ordinal_offset & 0xFFFF] = (flags >> 18) & 0x3FFF
                i += 4 + length
            else:
                i += 4
    except (struct.error, ValueError, IndexError):
        return None
    if not sizes or sorted(sizes) != list(range(len(sizes))):
        return () if not sizes else None
    return tuple(sizes[k] for k in range(len(sizes)))


def _elf_sections(data: bytes) -> dict[str, bytes]:
    """The sections of a 64-bit little-endian ELF file (a cubin) by name."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not a 64-bit ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * entsize) for i in range(count)]
    names_at = headers[names_index][4]
    sections = {}
    for name, _, _, _, offset, size in headers:
        end = data.index(b"\0", names_at + name)
        sections[data[names_at + name:end].decode(errors="replace")] = data[offset:offset + size]
    return sections


_PTX_ENTRY = r"\.entry\s+{name}\s*\("
_PTX_TYPE = re.compile(r"\.(?:[usbf])(8|16|32|64)\b")
_PTX_ARRAY = re.compile(r"\[\s*(\d+)\s*\]")


def ptx_entry_parameters(ptx: str, entry: str) -> tuple[tuple[str, int], ...] | None:
    """Each parameter of ``.entry entry(...)`` in ``ptx``: its declaration as written
    (``.u32 M``) and its bytes (type size x array length); None when the entry or one of its
    parameters cannot be read."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", ptx, flags=re.DOTALL)
    found = re.search(_PTX_ENTRY.format(name=re.escape(entry)), text)
    if not found:
        return None
    close = text.find(")", found.end())
    if close < 0:
        return None
    params = []
    for raw in text[found.end():close].split(","):
        raw = " ".join(raw.split())
        if not raw:
            continue
        declared = raw.removeprefix(".param").strip()
        kind = _PTX_TYPE.search(declared)
        if not raw.startswith(".param") or kind is None:
            return None
        count = 1
        for length in _PTX_ARRAY.findall(declared):
            count *= int(length)
        shown = re.sub(r"\s*\.ptr\b|\s*\.(?:global|const|shared|local)\b|\s*\.align\s+\d+", "",
                       declared).strip()
        params.append((shown, int(kind[1]) // 8 * count))
    return tuple(params)


def parameter_mismatch(declared: Sequence[tuple[str, int]],
                       found: Sequence[tuple[str, int]]) -> str | None:
    """How the parameters a kernel was compiled with (``found``: label and bytes, the label
    empty where only sizes are known) differ from those ``declared`` (label, bytes) in count
    or sizes; None when they agree."""
    sizes = [b for _, b in found]
    if sizes == [b for _, b in declared]:
        return None
    for i, ((label, want), (_, have)) in enumerate(zip(declared, found, strict=False), 1):
        if want != have:
            return (f"parameter {i} is {have} bytes in the kernel, {want} declared "
                    f"({label})")
    if len(found) > len(declared):
        extra = ", ".join(f"{label or '?'} {b}" for label, b in found[len(declared):])
        return (f"the kernel takes {len(found) - len(declared)} more after the declared "
                f"{len(declared)} ({extra} bytes)")
    missing = ", ".join(label for label, _ in declared[len(found):])
    return f"the kernel ends after {len(found)}; declared next: {missing}"


def show_parameters(params: Sequence[tuple[str, int]]) -> str:
    """``n: label bytes, ...`` for an error message."""
    return f"{len(params)}: " + (", ".join(f"{label} {b}".strip() for label, b in params)
                                 or "none")
