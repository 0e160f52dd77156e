"""The harness's errors. Every message says what was expected, what was found, and what to do."""

from __future__ import annotations


class HarnessError(Exception):
    """Base of every error the harness raises on purpose."""


class SpecError(HarnessError):
    """A kernel file's spec block is missing, malformed or inconsistent."""


class FormulaError(SpecError):
    """A spec formula that parsed but cannot be evaluated at some values (a division by zero, a
    shift out of range, a name with no value): ``where`` names the kernel file and the kernel,
    ``reason`` what the formula did."""

    def __init__(self, where: str, reason: str):
        self.where, self.reason = where, reason
        super().__init__(f"{where}: {reason}")


class CompileError(HarnessError):
    """NVRTC or nvJitLink rejected a kernel; the message carries the file and the log."""


class NoGpu(HarnessError):
    """A command or call that needs a GPU found none (the CLI exits 3)."""


class DeviceError(HarnessError):
    """The GPU, its driver or a CUDA library failed a call made in this process (a kernel
    fault, memory exhausted, a lost context): the CLI exits 4. A kernel that faults in a worker
    process is a result with status ``fault`` instead."""


class CudaError(DeviceError):
    """A CUDA driver, NVRTC or library call returned an error status."""

    def __init__(self, call: str, name: str, text: str, context: str = ""):
        self.call, self.name, self.text = call, name, text
        where = f" ({context})" if context else ""
        super().__init__(f"{call} failed: {name}: {text}{where}")


class LaunchError(HarnessError):
    """A launch the device cannot hold, refused before it reaches the driver."""


class ReportError(HarnessError):
    """A saved report that cannot be read: the file, where in it, what was expected and what
    was found, in one line."""
