"""Files written whole or not at all: a report is never seen half written, by a reader or
after a kill."""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path


def write_atomic(path: Path, data: str | bytes, replace: bool = True) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder that is then
    renamed to it, so that no reader (nor a kill) ever sees half a file. ``replace=False``:
    never over a file already there (FileExistsError), for a report's name."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with tmp.open("xb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            _link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _link(tmp: Path, path: Path) -> None:
    """``tmp`` at ``path`` unless a file is there (a hard link is made or refused at once);
    where the file system has no hard links, a rename after a check."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError:
        if path.exists():
            raise FileExistsError(errno.EEXIST, "a file is there already", str(path)) from None
        os.replace(tmp, path)
