"""Where the harness keeps what it caches on the host (compiled cubins, its own kernels):
the bottom of the package, so that every layer may ask."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$HARNESS_CACHE_DIR``, else ``$XDG_CACHE_HOME/kernel-harness`` (``~/.cache``)."""
    if os.environ.get("HARNESS_CACHE_DIR"):
        return Path(os.environ["HARNESS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "kernel-harness"
