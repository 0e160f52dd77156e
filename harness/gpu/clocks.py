"""SM clock, board power and what held the clock, through NVML (nvidia-ml-py). Reads only;
never sets clocks.

Board power over a sampling window (Timer.power gives it one of a few seconds) comes from
NVML's total-energy counter (millijoules since the driver loaded). On the H100 that counter,
like every NVML power reading, moves only every ~100 ms, and under the power cap the board
swings between ~600 and ~770 W on that scale (reports/h100/nvml-power-probe-20261122-225637.md).
So the mean is taken between the first and the last moment the counter moved inside the
window, which removes the counter's step, and it is given only when those moments are at least
``MIN_POWER_SPAN_S`` apart: over a shorter span the swings alone make it a guess. "What held
the clock" is the union of NVML's clocks-event reasons seen while sampling: on a card at its
power limit, "power cap".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from harness.stats import Summary

# NVML's clocks-event reasons (pynvml names) as a report shows them; bits NVML sets that are
# not named here are shown in hex. GPU idle is left out: it is set between launches, not by a
# limit on the kernel.
_LIMIT_NAMES = (
    ("nvmlClocksEventReasonSwPowerCap", "power cap"),
    ("nvmlClocksEventReasonHwSlowdown", "hw slowdown"),
    ("nvmlClocksEventReasonHwPowerBrakeSlowdown", "power brake"),
    ("nvmlClocksEventReasonSwThermalSlowdown", "sw thermal"),
    ("nvmlClocksEventReasonHwThermalSlowdown", "hw thermal"),
    ("nvmlClocksEventReasonSyncBoost", "sync boost"),
    ("nvmlClocksEventReasonApplicationsClocksSetting", "application clocks"),
    ("nvmlClocksEventReasonDisplayClockSetting", "display clocks"),
)


def describe_limits(bits: int, nvml) -> str:
    """NVML clocks-event reason ``bits`` as words ("power cap, sw thermal"); "none" for 0."""
    words = []
    idle = getattr(nvml, "nvmlClocksEventReasonGpuIdle", 0x1)
    bits &= ~idle
    for name, word in _LIMIT_NAMES:
        bit = getattr(nvml, name, 0)
        if bit and bits & bit:
            words.append(word)
            bits &= ~bit
    if bits:
        words.append(hex(bits))
    return ", ".join(words) or "none"


@dataclass(frozen=True)
class ClockSample:
    median: float
    minimum: float
    maximum: float
    count: int
    power_w: float = math.nan
    """Mean board power between the energy counter's first and last move in the window; NaN
    where there is no counter or those moves are under ``MIN_POWER_SPAN_S`` apart."""
    power_span_s: float = 0.0
    """The time between those two moves: what ``power_w`` is a mean over."""
    limits: str = ""
    """What held the SM clock during the window (``describe_limits``); "" if unknown."""


_NO_SAMPLE = ClockSample(math.nan, math.nan, math.nan, 0)

ENERGY_EVERY_S = 0.02
"""How often the energy counter is read while sampling: it moves every ~100 ms, and each read
costs the host about 4 ms (a default run's profile), which delays the timer's next batch."""
MIN_POWER_SPAN_S = 1.0
"""The shortest span of energy-counter movement a mean board power is given for."""


class ClockSampler:
    """Samples the SM clock of the GPU with the given PCI bus id (NaN when NVML is missing)."""

    def __init__(self, pci_bus_id: str):
        self.handle = None
        self.reason = ""
        self._reader: ThreadPoolExecutor | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
        except Exception as exc:  # NVML absent or the device not found: report, keep timing
            self.reason = f"NVML unavailable: {exc}"

    @property
    def nvml(self):
        """The ``pynvml`` module, for readings this class does not take (None without NVML)."""
        return self._nvml if self.handle is not None else None

    def sm_clock_mhz(self) -> float:
        if self.handle is None:
            return math.nan
        return float(self._nvml.nvmlDeviceGetClockInfo(self.handle, self._nvml.NVML_CLOCK_SM))

    def energy_mj(self) -> float:
        """NVML's total-energy counter (mJ since the driver loaded); NaN where unsupported."""
        if self.handle is None:
            return math.nan
        try:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except self._nvml.NVMLError:
            return math.nan

    def _timed_energy(self) -> tuple[float, float]:
        """(host time just after the read, :meth:`energy_mj`)."""
        reading = self.energy_mj()
        return time.perf_counter(), reading

    def _energy_reader(self) -> ThreadPoolExecutor:
        if self._reader is None:
            self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-nvml")
        return self._reader

    def other_contexts(self) -> int | None:
        """How many other processes hold a compute context on this GPU now, by NVML's list
        (this process is one of those listed, under whatever pid its namespace gives it);
        None where NVML lists none, not even this one (a container that hides them), or
        cannot say."""
        if self.handle is None:
            return None
        try:
            listed = len(self._nvml.nvmlDeviceGetComputeRunningProcesses(self.handle))
        except (self._nvml.NVMLError, AttributeError):
            return None
        return listed - 1 if listed else None

    def limit_bits(self) -> int | None:
        """The clocks-event reasons now (a bit mask); None where unsupported."""
        if self.handle is None:
            return None
        try:
            return int(self._nvml.nvmlDeviceGetCurrentClocksEventReasons(self.handle))
        except self._nvml.NVMLError:
            return None

    def sample_until(self, done: Callable[[], bool], interval_s: float = 0.002,
                     max_samples: int = 60_000,
                     tick: Callable[[], None] | None = None,
                     energy_every_s: float = ENERGY_EVERY_S) -> ClockSample:
        """Sample while the GPU works (until ``done()``), at least once; with the SM clock,
        the mean board power over the window and the clock limits seen in it. ``tick`` is
        called between samples (to keep the GPU's queue topped up); the energy counter is read
        at most every ``energy_every_s``."""
        if self.handle is None:  # no clock to read: still wait, and keep the queue going
            while not done():
                if tick is not None:
                    tick()
                time.sleep(interval_s)
            return _NO_SAMPLE
        samples, bits, known = [], 0, False
        # the energy counter is read on a thread of its own: a read costs some 4 ms, which
        # on this thread delayed the next batch and the end of the wait
        pending, energy, asked = self._energy_reader().submit(self._timed_energy), math.nan, 0.0
        first = last = None  # (host time, counter) where the counter moved
        while True:
            samples.append(self.sm_clock_mhz())
            now = self.limit_bits()
            if now is not None:
                bits, known = bits | now, True
            if pending is None and time.perf_counter() - asked >= energy_every_s:
                pending = self._energy_reader().submit(self._timed_energy)
            finished = len(samples) >= max_samples or done()
            if pending is not None and pending.done():  # else left behind at the end
                read_at, reading = pending.result()
                pending, asked = None, time.perf_counter()
                if math.isnan(energy):
                    energy = reading
                elif reading != energy and not math.isnan(reading):
                    last = (read_at, reading)
                    first = first or last
                    energy = reading
            if finished:
                break
            if tick is not None:
                tick()
            time.sleep(interval_s)
        span, power = 0.0, math.nan
        if first is not None and last is not None:
            span = last[0] - first[0]
            if span >= MIN_POWER_SPAN_S:
                power = (last[1] - first[1]) / 1e3 / span
        s = Summary.of(samples)
        return ClockSample(s.median, s.minimum, s.maximum, s.count, power, span,
                           describe_limits(bits, self._nvml) if known else "")

    def info(self) -> dict:
        """Static clock facts for a report's header."""
        if self.handle is None:
            return {"nvml": self.reason}
        nvml = self._nvml
        out = {}
        for key, call in (
            ("max_sm_clock_mhz", lambda: nvml.nvmlDeviceGetMaxClockInfo(self.handle,
                                                                        nvml.NVML_CLOCK_SM)),
            ("max_mem_clock_mhz", lambda: nvml.nvmlDeviceGetMaxClockInfo(self.handle,
                                                                         nvml.NVML_CLOCK_MEM)),
            ("power_limit_w", lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000),
            ("nvml_driver", lambda: _text(nvml.nvmlSystemGetDriverVersion())),
            ("throttle_reasons_now", lambda: hex(
                nvml.nvmlDeviceGetCurrentClocksEventReasons(self.handle))),
        ):
            try:
                out[key] = call()
            except Exception as exc:  # one missing query must not lose the others
                out[key] = f"unavailable: {exc}"
        return out


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
