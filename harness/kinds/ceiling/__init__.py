"""The ceiling kind: a register-only microbenchmark of one instruction's issue rate (the
``mma.sync``/``wgmma`` ceilings a tensor-core GEMM is stated against), ABI
``(u64 sink, u32 iterations)``, run by ``harness ceiling`` (probe.py)."""

from harness.kinds.ceiling.kind import CeilingKind

KIND = CeilingKind()
