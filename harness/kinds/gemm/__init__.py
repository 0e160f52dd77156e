"""The GEMM kind: ``C = alpha A B + beta C`` through the common GEMM ABI (or a declared
signature), M, N, K as its dims, checked against float64 and timed against cuBLAS (cuBLASLt
for FP8, whose operands and check are the precision module kinds/gemm/fp8/).

Its package: the spec's parse (kernels/spec.py's GEMM-shaped fields), the operands and their
contents, the check battery (plan, checks, numerics, chunked), the timed measurement (measure,
launches, capture, timed_size, timed_checks; screening, the SASS read; hang_limits, how long
a stage may go quiet), the session part (session.py), the baselines
(baselines.py) and the figures (figures.py).
"""

from harness.kinds.gemm.kind import GemmKind

KIND = GemmKind()
