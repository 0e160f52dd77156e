"""Kernels of ``kind = "buffers"`` (notes/buffers_kind.md): their spec (spec.py), their
inputs drawn on the device (draw.py), their references and bounds (references.py), their
checks and timing against a memory ceiling the harness measures itself (measure.py,
roofline.py) and a library baseline (baselines.py), their tables (table.py, profile.py)."""

from harness.kinds.buffers.kind import BuffersKind

KIND = BuffersKind()
