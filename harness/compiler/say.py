"""One-line notes for people from the build, on stderr (stdout carries a command's result)."""

from __future__ import annotations

import sys
import threading

_said: set[str] = set()
_lock = threading.Lock()


def note(line: str, once: str | None = None) -> None:
    """``harness: line`` on stderr; with ``once`` (a key), only the first time this process
    says it (an unusable cache is named once, not at every compile)."""
    if once is not None:
        with _lock:
            if once in _said:
                return
            _said.add(once)
    print(f"harness: {line}", file=sys.stderr, flush=True)
