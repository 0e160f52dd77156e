"""Attention as a kind: forward attention with BF16/FP16 inputs and FP32 accumulation
(docs/attention.md). The registry finds :data:`KIND` by the folder's name."""

from harness.kinds.attention.kind import AttentionKind

KIND = AttentionKind()

__all__ = ["KIND", "AttentionKind"]
