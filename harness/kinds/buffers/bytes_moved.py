"""A buffers kernel's bytes, derived from its buffers (issue 57 item 7): each input read once
and each output written once (an ``inout`` buffer both), scratch not at all. GB/s is these
bytes over the time; a figure the spec declares (``bytes``) is used instead only where it
says why (``bytes_reason``), and the report says which it is (MemoryFigures.bytes_source)."""

from __future__ import annotations

from harness.errors import LaunchError

DERIVED = "buffers"
"""MemoryFigures.bytes_source of bytes derived from the buffers."""


def derived(spec, nbytes: dict[str, int]) -> int:
    """Each input's bytes once, each output's once (``nbytes``: by buffer name)."""
    return (sum(nbytes[b.name] for b in spec.buffers.values() if b.drawn)
            + sum(nbytes[b.name] for b in spec.buffers.values() if b.checked))


def settle(spec, declared: int, from_buffers: int, where: str) -> tuple[int, str]:
    """The bytes a row's GB/s is taken over and where they come from: the buffers', or the
    declared figure with its stated reason. A declared figure that differs with no reason is
    an error (a kernel's word is not a measurement)."""
    if declared == from_buffers:
        return from_buffers, DERIVED
    reason = getattr(spec, "bytes_reason", "")
    if reason:
        return declared, f"declared ({declared} B, the buffers give {from_buffers} B): {reason}"
    raise LaunchError(
        f"{where}: the spec declares bytes = {declared}, but its buffers move {from_buffers} "
        "(each input read once, each output written once); GB/s is taken over the buffers' "
        "bytes: correct bytes, or keep it and say why with bytes_reason = \"...\" (the "
        "report shows it)")
