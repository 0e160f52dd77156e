"""SM clock and throttle state through NVML (nvidia-ml-py). Reads only; never sets clocks."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.stats import Summary


@dataclass(frozen=True)
class ClockSample:
    median: float
    minimum: float
    maximum: float
    count: int


_NO_SAMPLE = ClockSample(math.nan, math.nan, math.nan, 0)


class ClockSampler:
    """Samples the SM clock of the GPU with the given PCI bus id (NaN when NVML is missing)."""

    def __init__(self, pci_bus_id: str):
        self.handle = None
        self.reason = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
        except Exception as exc:  # NVML absent or the device not found: report, keep timing
            self.reason = f"NVML unavailable: {exc}"

    def sm_clock_mhz(self) -> float:
        if self.handle is None:
            return math.nan
        return float(self._nvml.nvmlDeviceGetClockInfo(self.handle, self._nvml.NVML_CLOCK_SM))

    def sample_until(self, done: Callable[[], bool], interval_s: float = 0.002,
                     max_samples: int = 500) -> ClockSample:
        """Sample while the GPU works (until ``done()``), at least once."""
        if self.handle is None:
            return _NO_SAMPLE
        samples = [self.sm_clock_mhz()]
        while len(samples) < max_samples and not done():
            time.sleep(interval_s)
            samples.append(self.sm_clock_mhz())
        s = Summary.of(samples)
        return ClockSample(s.median, s.minimum, s.maximum, s.count)

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
