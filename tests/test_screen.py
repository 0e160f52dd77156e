"""The cubin screening lists what a kernel could keep state in or read time from."""

import pytest
from conftest import FIXTURE_KERNELS

from harness.compiler.compile import compile_kernel
from harness.compiler.sass import disassemble
from harness.compiler.screen import Screen, elf_state, screen
from harness.errors import HarnessError
from harness.kernels.registry import discover, select

ADVERSARIAL = discover([FIXTURE_KERNELS / "adversarial"])


def _screen(name: str, kernels=ADVERSARIAL) -> Screen:
    (kernel,) = select(kernels, [name])
    cubin = compile_kernel(kernel, "sm_90").cubin
    return screen(cubin, disassemble(cubin))


def test_a_launch_counter_is_mutable_state():
    found = _screen("lazy_after_n")
    assert dict(found.globals) == {"blocks_done": 4, "launches": 4}
    assert found.stateful and found.atomics >= 2 and not found.clocks
    assert "mutable device globals: blocks_done (4 B), launches (4 B)" in found.lines()[0]


def test_a_replay_cache_and_its_timer_are_listed():
    found = _screen("cached_replay")
    assert dict(found.globals)["cache"] == 4 << 22 and found.clocks == ("globaltimer",)
    assert "reads %globaltimer" in found.lines()


def test_clock_reads_without_state():
    found = _screen("jitter")
    assert found.clocks == ("clock",) and not found.stateful


def test_a_plain_kernel_has_nothing_to_report():
    (naive,) = select(discover(), ["01_naive"])
    cubin = compile_kernel(naive, "sm_90").cubin
    found = screen(cubin, disassemble(cubin))
    assert found == Screen() and found.lines() == ()
    assert Screen.from_json(found.to_json()) == found


def test_shared_memory_atomics_are_not_global_ones():
    assert _screen("splitk_atomic").atomics == 0


def test_not_a_cubin():
    with pytest.raises(HarnessError, match="not an ELF64 cubin"):
        elf_state(b"PK\x03\x04 not an elf")
