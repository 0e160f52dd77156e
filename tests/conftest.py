"""GPU tests carry the ``gpu`` marker and are skipped, with the reason, where no GPU is found.

A test carries the marker when it launches anything on a GPU or when what it asserts depends
on whether a GPU is present; every test that takes the ``device`` fixture (directly or through
another fixture) is marked here, so that ``pytest -m gpu`` selects it. A test of a command's
no-GPU path runs the command with the GPU hidden (:func:`harness_env`), on any machine."""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

import pytest

from harness.gpu.driver import gpu_status

TESTS = Path(__file__).resolve().parent
FIXTURE_KERNELS = TESTS / "kernels"


def pytest_collection_modifyitems(config, items):
    # before the -m filter (pytest's own hook of this name runs after a conftest's)
    for item in items:
        if "device" in getattr(item, "fixturenames", ()) and "gpu" not in item.keywords:
            item.add_marker(pytest.mark.gpu)
    status = gpu_status()
    if status.found:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {status.reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def harness_env(gpu: bool = True) -> dict[str, str]:
    """The environment for a ``python -m harness`` subprocess: this process's, or with
    ``gpu=False`` this process's with every GPU hidden from CUDA (``CUDA_VISIBLE_DEVICES``
    empty: cuInit finds no device), so that the command takes its no-GPU path on any machine."""
    env = dict(os.environ)
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


@pytest.fixture(scope="session")
def device():
    from harness.gpu.driver import Device

    with Device(0) as dev:
        yield dev


@pytest.fixture(autouse=True)
def _gpu_turns(request):
    """Under pytest-xdist the GPU tests run in several workers at once, and a second CUDA
    context at work time-slices a timing (the suite at d446304: a 2 us spin read 5.6 us, and
    a kernel that replays a cached result read slower than the hardware's limit while checks
    ran in other workers). A GPU test marked ``gpu_shared`` (checks that time nothing) runs
    beside other shared ones; every other GPU test has the GPU to itself: a lock file shared
    by the workers, with a turnstile so that a waiting exclusive test is not starved.
    (xdist_group would put every GPU test in one worker, one after another: longer than a
    device command may run.)"""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if "gpu" not in request.node.keywords or run is None:
        yield
        return
    shared = "gpu_shared" in request.node.keywords
    base = Path(tempfile.gettempdir()) / f"harness-gpu-{run}"
    with open(f"{base}.turnstile", "a") as turnstile, open(f"{base}.lock", "a") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _no_gpu_for_cpu_tests(request, monkeypatch):
    """A test without the ``gpu`` marker cannot reach the GPU, in its own process or in a
    subprocess it starts (``CUDA_VISIBLE_DEVICES`` empty, as with :func:`harness_env`
    ``gpu=False``; ``gpu_status`` says no GPU): under
    pytest-xdist it runs beside the GPU tests, and a second CUDA context time-slices theirs
    (seen on the H100: a 200 us spin measured 334 us of itself while a plugin test in another
    worker ran the check battery). A test that needs the GPU says so with the marker."""
    if "gpu" not in request.node.keywords:
        from harness.gpu import driver

        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
        # in this process too: the harness asks gpu_status() before it opens a device, and a
        # CPU-only test must find none, as in CI
        monkeypatch.setattr(driver, "gpu_status", lambda: driver.GpuStatus(
            reason="hidden from a test without the gpu marker"))


_CACHE_FILLED = []


@pytest.fixture(autouse=True)
def _compile_cache_filled(request):
    """Before this process's first GPU test, every kernel the GPU tests load is compiled in
    parallel processes (as is and with the device's tuned parameters): compiled one by one, a
    GPU host's cold compile cache costs minutes of the suite. Without a GPU, and in a
    pytest-xdist worker that runs no GPU test, tests compile as they go."""
    if _CACHE_FILLED or "gpu" not in request.node.keywords:
        return
    _CACHE_FILLED.append(True)
    if not gpu_status().found:
        return
    from harness.compiler.compile import compile_all
    from harness.gpu.driver import device_arch_name
    from harness.kernels.registry import discover

    arch = device_arch_name()
    folders = [FIXTURE_KERNELS / name for name in ("bad", "classes", "isolation", "adversarial",
                                                   "headers", "signatures")]
    folders.append(FIXTURE_KERNELS.parent.parent / "examples")
    kernels = discover() + [k for folder in folders for k in discover([folder])]
    compile_all(kernels + [k.for_arch(arch) for k in kernels], arch)
