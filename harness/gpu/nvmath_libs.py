"""nvmath-python's low-level bindings, as the baselines import them (gpu/cublas.py,
gpu/cublaslt.py), with one message when the package is missing."""

from __future__ import annotations

import importlib

from harness.errors import HarnessError


def nvmath_bindings(what: str, *names: str) -> tuple:
    """nvmath-python and its low-level bindings ``names`` (``cublas``, ``cublasLt``), or an
    error saying how to install it, for ``what`` needs them."""
    try:
        import nvmath

        return (nvmath, *(importlib.import_module(f"nvmath.bindings.{n}") for n in names))
    except ImportError as exc:
        raise HarnessError(
            f"{what} needs nvmath-python ({exc}); install it with "
            "`python3 -m pip install nvmath-python` (offline: see README, 'GPU host without a "
            "package registry')"
        ) from None
