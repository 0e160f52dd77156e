"""The files a kernel file includes with ``#include "..."`` (next to the including file,
recursively, each once), and the kernel's device part across them: each included file's host
code blanked in memory (:func:`harness.kernels.hostcode.device_part`) and inlined between
``#line`` directives, so NVRTC's diagnostics name the header's own lines and the files on disk
are never changed."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.kernels.hostcode import DevicePart, LeftOut, device_part
from harness.kernels.kernel_path import read_regular

QUOTED = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(?P<name>[^"\n]+)"[^\n]*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once\b[^\n]*$", re.MULTILINE)


def traverse(start: Path, children: Callable[[Path, bytes], Iterable[Path]],
             unreadable: Callable[[Path, OSError], None] | None = None
             ) -> Iterator[tuple[Path, bytes | None]]:
    """``start`` and the files ``children(file, its bytes)`` name, breadth first, each once,
    with their bytes (None: it could not be read, ``unreadable(file, error)`` told first; its
    children are not asked)."""
    seen: set[Path] = set()
    todo = [Path(start)]
    while todo:
        current = todo.pop(0)
        if current in seen:
            continue
        seen.add(current)
        try:
            data = read_regular(current)
        except OSError as exc:
            if unreadable is not None:
                unreadable(current, exc)
            yield current, None
            continue
        yield current, data
        todo += children(current, data)


def walk(path: Path) -> Iterator[tuple[Path, bytes | None]]:
    """``path`` and, recursively, the quoted includes found next to the file naming them, in
    the order they appear, each once, with their bytes (None: not found there, perhaps on the
    include path; the compiler's to find or report)."""
    return traverse(path, lambda current, data: [
        current.parent / m["name"] for m in QUOTED.finditer(data.decode(errors="replace"))])


@dataclass(frozen=True)
class HeaderLeftOut(LeftOut):
    """Host code left out of an included file: its lines there, and the file."""

    file: str = ""

    def describe(self) -> str:
        return f"{self.file} {super().describe()}"


def device_source(source: str, path: str, **options) -> DevicePart:
    """``source`` (the file ``path``) with its host code blanked and each quoted include found
    next to it inlined, recursively and once, with its own host code blanked; ``options`` go to
    :func:`harness.kernels.hostcode.device_part`."""
    seen: set[Path] = {Path(os.path.abspath(path))}
    left: list[LeftOut] = []
    text = _inline(source, Path(os.path.abspath(path)), seen, left, options)
    return DevicePart(text, tuple(left))


def _inline(source: str, path: Path, seen: set[Path], left: list[LeftOut],
            options: dict[str, Callable | bool], header: bool = False) -> str:
    part = device_part(source, **options)
    if header:
        left += [HeaderLeftOut(p.first_line, p.last_line, p.what, path.name)
                 for p in part.left_out]
    else:
        left += part.left_out
    text = _PRAGMA_ONCE.sub("", part.text) if header else part.text

    def replace(match: re.Match) -> str:
        target = path.parent / match["name"]
        if not target.is_file():
            return match[0]  # on the include path: NVRTC's to find
        target = Path(os.path.abspath(target))
        if target in seen:
            return ""
        seen.add(target)
        line = text.count("\n", 0, match.start()) + 1
        inner = _inline(target.read_text(errors="replace"), target, seen, left, options, True)
        return (f'#line 1 "{_quoted(target)}"\n{inner}\n'
                f'#line {line + 1} "{_quoted(path)}"')

    return QUOTED.sub(replace, text)


def _quoted(path: Path) -> str:
    return str(path).replace("\\", "\\\\").replace('"', '\\"')
