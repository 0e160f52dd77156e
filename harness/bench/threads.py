"""How many threads a process of the harness may keep busy on the host (kind-neutral)."""

from __future__ import annotations

import os


def host_threads() -> int:
    """The threads a process of the harness may keep busy on the host: its share of the cores
    where one is set (``OMP_NUM_THREADS``: the workers of several GPUs share the host), else
    the cores, at most 16."""
    share = os.environ.get("OMP_NUM_THREADS", "")
    cores = os.cpu_count() or 1
    return max(1, min(16, cores, int(share) if share.isdigit() and int(share) > 0 else cores))
