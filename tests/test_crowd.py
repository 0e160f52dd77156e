"""The crowd (gpu/crowd.py): launches behind blocks that hold most SMs, before a check calls
a kernel's launches alike; what a launch wrong or different there is named."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

from harness.gpu.crowd import PRESSES, Press
from harness.kinds.buffers.checks import Battery, _pressed_alike
from harness.kinds.gemm.checks import KEEPS_STATE, NONDETERMINISTIC, Checked, repeat_finding
from harness.kinds.gemm.numerics import CheckResult


def test_a_press_holds_a_share_of_the_sms_and_outstays_its_hold():
    assert Press(0.5, 40.0).blocks(132) == 66  # one block an SM
    assert Press(0.875, 120.0).blocks(132) == 116
    assert Press(0.01, 40.0).blocks(10) == 1
    with pytest.raises(ValueError, match="share"):
        Press(1.0, 40.0)
    with pytest.raises(ValueError, match="a while"):
        Press(0.5, 0.0)
    assert "88% of the SMs" in str(PRESSES[-1])


def _again(results):
    """A stand-in for the battery's launch on the first inputs: each call the next of
    ``results`` (ok, outputs), the press it was given kept."""
    calls = []

    def again(content, press=None):
        ok, outs = results[len(calls)]
        calls.append(press)
        return ok, 0.0, "out: wrong: detail", outs

    return again, calls


FIRST = {"out": np.array([1.0, 2.0], dtype=np.float32)}
OTHER = {"out": np.array([1.0, np.nextafter(np.float32(2.0), np.float32(3.0))],
                         dtype=np.float32)}


def test_launches_alike_behind_every_press_pass():
    again, calls = _again([(True, FIRST)] * len(PRESSES))
    found = Battery()
    assert _pressed_alike(again, FIRST, "at 7", found)
    assert calls == list(PRESSES) and found.finding == "ok" and found.total == 0


def test_other_bits_behind_a_crowd_are_undeclared_nondeterminism():
    again, calls = _again([(True, FIRST), (True, OTHER)])
    found = Battery()
    assert not _pressed_alike(again, FIRST, "at 65537", found)
    assert found.finding == "nondeterministic (undeclared)"
    assert str(PRESSES[1]) in found.failure and calls == list(PRESSES)


WRONG = {"out": np.array([1.0, 7.0], dtype=np.float32)}


@pytest.mark.parametrize("after, finding", [
    ((True, FIRST), "race"), ((False, WRONG), "race"),
    ((False, OTHER), "keeps state between launches")])
def test_wrong_behind_a_crowd_is_a_race_unless_wrong_alike_after_it(after, finding):
    again, calls = _again([(False, OTHER), after])
    found = Battery()
    assert not _pressed_alike(again, FIRST, "at 257", found)
    assert found.finding == finding and calls == [PRESSES[0], None]


def _run(passed: bool, out) -> Checked:
    r = CheckResult(passed, 64, 64, 64, 1, 1.0, 0.0, 0.0, 0.0, 0 if passed else 5, 0, 1e-6,
                    "ok" if passed else "wrong values: 5 outside")
    return Checked(np.array(out, dtype=np.float32), r, 0)


GEMM = SimpleNamespace(kernel=SimpleNamespace(spec=SimpleNamespace(nondeterministic=False,
                                                                   c_type="fp32")))


def test_a_gemm_wrong_only_behind_the_crowd_is_a_race():
    # the runs check_launched makes with a crowd: two alike, one behind it, one after it
    runs = [_run(True, [[1.0]]), _run(True, [[1.0]]), _run(False, [[9.0]]), _run(True, [[1.0]])]
    assert repeat_finding(GEMM, runs).finding == "race"


def test_a_gemm_wrong_from_the_third_launch_on_keeps_state():
    runs = [_run(True, [[1.0]]), _run(True, [[1.0]]), _run(False, [[9.0]]), _run(False, [[9.0]])]
    assert repeat_finding(GEMM, runs).finding == KEEPS_STATE


def test_a_gemm_wrong_alike_with_a_right_launch_between_keeps_state():
    # timer_skim: wrong when launched soon after its last launch, so right behind the crowd
    runs = [_run(True, [[1.0]]), _run(False, [[9.0]]), _run(False, [[9.0]]),
            _run(True, [[1.0]]), _run(False, [[9.0]])]
    assert repeat_finding(GEMM, runs).finding == KEEPS_STATE


def test_a_gemm_wrong_and_unlike_is_a_race():
    runs = [_run(True, [[1.0]]), _run(False, [[9.0]]), _run(True, [[1.0]]),
            _run(False, [[7.0]]), _run(True, [[1.0]])]
    assert repeat_finding(GEMM, runs).finding == "race"


def test_wrong_and_unlike_runs_of_a_kernel_that_holds_state_keep_state(monkeypatch):
    # timer_skim on the H200 at 750d6e4, beside seven other test workers: blocks that start
    # within 300 us of the last launch's end skim, the others do not, so its wrong runs differ
    from harness.compiler.screen import Screen
    from harness.kinds.gemm import screening
    monkeypatch.setattr(screening, "screened_cubin", lambda cubin: (
        "fma", Screen(globals=(("last_end_ns", 8),), clocks=("globaltimer",))))
    gemm = SimpleNamespace(kernel=GEMM.kernel, compiled=SimpleNamespace(cubin=b""))
    runs = [_run(True, [[1.0]]), _run(False, [[9.0]]), _run(True, [[1.0]]),
            _run(False, [[7.0]]), _run(True, [[1.0]])]
    found = repeat_finding(gemm, runs)
    assert found.finding == KEEPS_STATE
    assert "last_end_ns (8 B)" in found.message and "%globaltimer" in found.message
    monkeypatch.setattr(screening, "screened_cubin", lambda cubin: ("fma", Screen()))
    assert repeat_finding(gemm, runs).finding == "race"


def test_a_gemm_with_other_bits_behind_the_crowd_is_nondeterministic():
    runs = [_run(True, [[1.0]]), _run(True, [[1.0]]), _run(True, [[1.0000001]]),
            _run(True, [[1.0]])]
    assert repeat_finding(GEMM, runs).finding == NONDETERMINISTIC


_WHERE = rb"""
extern "C" __global__ void where(unsigned int* sm, unsigned long long ns) {
    unsigned int id; asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    if (threadIdx.x == 0) sm[blockIdx.x] = id;
}
"""


@pytest.mark.gpu
def test_a_crowd_keeps_a_kernels_blocks_off_most_sms(device):
    """528 one-warp blocks of 5 us spread over (nearly) every SM of an idle GPU, and over
    fewer than half of them behind a crowd that holds 87.5% of the SMs for 120 us; the
    kernel starts while the crowd is there (it does not wait out the crowd's stay)."""
    from harness.gpu.compilers import nvrtc_compile
    from harness.gpu.crowd import Crowd
    from harness.gpu.driver import Buffer, LaunchShape, Module, Stream

    out = nvrtc_compile(_WHERE, "where.cu", [f"-arch={device.arch.name}"])
    assert out.ok, out.log
    where = Module(out.cubin, "where").function("where")
    stream, sms = Stream(), device.sm_count
    blocks = 4 * sms
    seen = Buffer(4 * blocks)
    crowd = Crowd(stream, sms)

    def launch():
        where.launch(LaunchShape((blocks, 1, 1), (32, 1, 1), 0), stream,
                     (ctypes.c_uint64(seen.address), ctypes.c_uint64(5000)))

    launch()
    stream.synchronize()
    idle = len(set(seen.download(np.uint32, (blocks,), stream)))
    crowd.around(launch, Press(0.875, 120.0))
    stream.synchronize()
    crowd.side.synchronize()
    pressed = len(set(seen.download(np.uint32, (blocks,), stream)))
    assert idle >= 0.9 * sms, f"idle: {idle} of {sms} SMs"
    assert pressed < 0.5 * sms, f"behind the crowd: {pressed} of {sms} SMs"
