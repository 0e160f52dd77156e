"""The house's own rules, checked on the code: how a GPU is found and said missing, the import
graph, the docstrings' references, the size of modules."""

from __future__ import annotations

import pytest

from harness.errors import NoGpu
from harness.gpu.driver import GpuStatus


def test_gpu_status_names_the_gpu_or_says_why_there_is_none():
    found = GpuStatus("NVIDIA H100 80GB HBM3")
    assert found.found and found.require("x") == "NVIDIA H100 80GB HBM3"
    missing = GpuStatus(reason="the CUDA driver sees no GPU")
    assert not missing.found and missing.name is None
    with pytest.raises(NoGpu, match=r"^no GPU here \(the CUDA driver sees no GPU\)$"):
        missing.require()
    with pytest.raises(NoGpu, match=r"^no GPU here \(the CUDA driver sees no GPU\): tuning "
                                    r"times kernels$"):
        missing.require("tuning times kernels")
