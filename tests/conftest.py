"""GPU tests carry the ``gpu`` marker and are skipped, with the reason, where no GPU is found."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.gpu.driver import gpu_status

TESTS = Path(__file__).resolve().parent
FIXTURE_KERNELS = TESTS / "kernels"


def pytest_collection_modifyitems(config, items):
    ok, why = gpu_status()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def device():
    from harness.gpu.driver import Device

    with Device(0) as dev:
        yield dev
