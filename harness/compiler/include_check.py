"""Includes screened before the compiler sees them: a kernel may include headers from its own
folder (``#include "..."``, recursively) and from the harness's include path (``<...>``), and
nothing else. A refused include is named by the line that asks for it; its file is never read,
so the compiler cannot echo another file's contents into an error."""

from __future__ import annotations

import os
import re
from pathlib import Path

from harness.errors import CompileError
from harness.kernels.includes import traverse

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"(?P<quoted>[^"\n]*)"|<(?P<angled>[^>\n]*)>'
                      r"|(?P<other>\S.*))?", re.MULTILINE)


def _inside(path: str, folders: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == f or real.startswith(f + os.sep) for f in folders)


def check_includes(kernel: Path, include_paths: tuple[str, ...]) -> None:
    """CompileError where ``kernel`` (or a header it includes from its folder) includes a file
    by an absolute path, a file outside its folder and the include path, or by a macro."""
    home = os.path.realpath(os.path.dirname(os.path.abspath(kernel)))
    allowed = [os.path.realpath(p) for p in include_paths]

    def followed(current: Path, data: bytes) -> list[Path]:
        """The headers of ``current`` to screen next (those in the kernel's folder), each of
        its includes refused here where it must be."""
        text, follow = data.decode(errors="replace"), []
        for match in _INCLUDE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            name = match["quoted"] if match["quoted"] is not None else match["angled"]
            where = f"{current}:{line}: #include {match.group(0).split('include', 1)[1].strip()}"
            if name is None:
                raise CompileError(f"{where}: an include through a macro cannot be checked "
                                   "before compiling; name the header in quotes or <...>")
            if os.path.isabs(name):
                raise CompileError(f"{where} names an absolute path, which the harness refuses; "
                                   "copy the header into the kernel's folder and include it "
                                   "by a relative path")
            places = ([os.path.join(os.path.dirname(current), name)]
                      if match["quoted"] is not None else [])
            places += [os.path.join(folder, name) for folder in allowed]
            found = next((p for p in places if os.path.lexists(p)), None)
            if found is None:
                continue  # missing: the compiler's error says where it looked
            if _inside(found, [home]):
                follow.append(Path(found))
            elif not _inside(found, allowed):
                raise CompileError(f"{where} reaches outside the kernel's folder ({home}) and "
                                   "the harness's include path; the harness refuses it: copy "
                                   "the header into the kernel's folder")
        return follow

    def unreadable(current: Path, exc: OSError) -> None:
        raise CompileError(f"{current}: cannot read the header: {exc.strerror}") from None

    for _ in traverse(Path(os.path.abspath(kernel)), followed, unreadable):
        pass
