"""The harness's own kernels (harness/gpu/own_kernels.py): each source compiles, a build is
kept in the compile cache and taken from it, a source that does not compile is said in one
error naming what it is for, and a failed build is not kept."""

from __future__ import annotations

import pytest

from harness.bench.known import KNOWN_SOURCE
from harness.errors import CompileError, HarnessError
from harness.gpu import compilers, own_kernels
from harness.gpu.compare_sums import SOURCE as SUMS_SOURCE
from harness.gpu.crowd import SOURCE as CROWD_SOURCE
from harness.gpu.fp8_walk import SOURCE as FP8_WALK_SOURCE
from harness.gpu.reference import SOURCE as REFERENCE_SOURCE
from harness.gpu.timing.kernels import SOURCE as TIMER_SOURCE
from harness.kinds.buffers.draw import DRAW_SOURCE
from harness.kinds.buffers.roofline import READ
from harness.kinds.gemm.capture import FRESH_SOURCE

ALL = (TIMER_SOURCE, FRESH_SOURCE, CROWD_SOURCE, REFERENCE_SOURCE, KNOWN_SOURCE, READ,
       DRAW_SOURCE, FP8_WALK_SOURCE, SUMS_SOURCE)
BROKEN = own_kernels.Source(b"__global__ void f( {", "broken.cu", "a broken test source")


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(own_kernels, "_BUILDS", {})
    return tmp_path


def test_every_own_source_compiles_and_is_cached(fresh_cache):
    own_kernels.ahead("sm_90", *ALL)
    cubins = [own_kernels.cubin(source, "sm_90") for source in ALL]
    assert all(c.startswith(b"\x7fELF") for c in cubins)
    kept = sorted((fresh_cache / "own").glob("*.cubin"))
    assert len(kept) == len(ALL)
    assert sorted(p.read_bytes() for p in kept) == sorted(cubins)


def test_a_kept_build_is_taken_from_the_cache(fresh_cache, monkeypatch):
    first = own_kernels.cubin(CROWD_SOURCE, "sm_90")
    monkeypatch.setattr(own_kernels, "_BUILDS", {})  # a new process: only the cache is left

    def refuse(*_):
        raise AssertionError("compiled again where the cache holds the cubin")

    monkeypatch.setattr(compilers, "nvrtc_compile", refuse)
    assert own_kernels.cubin(CROWD_SOURCE, "sm_90") == first


def test_another_arch_or_source_is_another_entry(fresh_cache):
    assert CROWD_SOURCE.key("sm_90") != CROWD_SOURCE.key("sm_80")
    assert CROWD_SOURCE.key("sm_90") != REFERENCE_SOURCE.key("sm_90")
    flagged = own_kernels.Source(CROWD_SOURCE.text, CROWD_SOURCE.name, CROWD_SOURCE.what,
                                 ("-lineinfo",))
    assert flagged.key("sm_90") != CROWD_SOURCE.key("sm_90")


def test_a_source_that_does_not_compile_is_one_error_naming_it(fresh_cache):
    with pytest.raises(HarnessError) as raised:
        own_kernels.cubin(BROKEN, "sm_90")
    message = str(raised.value)
    assert message.startswith("a broken test source did not compile (broken.cu, sm_90): ")
    assert "error" in message
    with pytest.raises(CompileError):
        own_kernels.cubin(BROKEN, "sm_90", CompileError)
    assert not list(fresh_cache.glob("own/*.cubin"))


def test_a_cache_that_cannot_be_written_still_builds(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(blocked))
    monkeypatch.setattr(own_kernels, "_BUILDS", {})
    assert own_kernels.cubin(CROWD_SOURCE, "sm_90").startswith(b"\x7fELF")
