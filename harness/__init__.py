"""The kernel harness: compile, check, time and report GEMM kernels against cuBLAS."""

__version__ = "0.1.0"
