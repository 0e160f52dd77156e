"""Which GPUs there are, asked before any context is made: whether one can be used
(:func:`gpu_status`), and each one's name, compile target and UUID."""

from __future__ import annotations

from dataclasses import dataclass

from harness.archs import arch_for_capability
from harness.errors import NoGpu
from harness.gpu.check import check

try:
    from cuda.bindings import driver as cu
except ImportError:  # reported by gpu_status(); modules importing this one need it
    cu = None


@dataclass(frozen=True)
class GpuStatus:
    """Whether a CUDA GPU can be used here: the first GPU's ``name`` when one is found, else
    ``reason``, in one line, why none can."""

    name: str | None = None
    reason: str = ""

    @property
    def found(self) -> bool:
        return self.name is not None

    def require(self, needs: str = "") -> str:
        """The GPU's name; :class:`~harness.errors.NoGpu` ("no GPU here (reason)" and
        ``needs``, what wanted one) when there is none."""
        if not self.found:
            raise NoGpu(f"no GPU here ({self.reason})" + (f": {needs}" if needs else ""))
        return self.name


def gpu_status() -> GpuStatus:
    """The GPU this process would use (device 0), or why there is none."""
    if cu is None:
        return GpuStatus(reason="cuda-bindings is not installed (python3 -m pip install -e .)")
    try:
        (status,) = cu.cuInit(0)
    except RuntimeError:  # the bindings could not load libcuda
        # one short line: cuda-pathfinder's own words run to three lines in a report's header
        return GpuStatus(reason="no CUDA driver: libcuda.so.1 did not load")
    if status != cu.CUresult.CUDA_SUCCESS:
        return GpuStatus(reason=f"no usable CUDA GPU (cuInit: {status.name})")
    status, count = cu.cuDeviceGetCount()
    if status != cu.CUresult.CUDA_SUCCESS or count == 0:
        return GpuStatus(reason="the CUDA driver sees no GPU")
    status, dev = cu.cuDeviceGet(0)
    status, name = cu.cuDeviceGetName(256, dev)
    return GpuStatus(name=name.split(b"\0", 1)[0].decode())


def device_arch_name(ordinal: int = 0) -> str:
    """The compile target of GPU ``ordinal`` (no context is created)."""
    dev = check(cu.cuDeviceGet(ordinal), "cuDeviceGet", f"device {ordinal}")
    attr = cu.CUdevice_attribute
    major = check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                  "cuDeviceGetAttribute")
    minor = check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                  "cuDeviceGetAttribute")
    return arch_for_capability(major, minor).name


def device_count() -> int:
    """How many GPUs the driver shows this process (after its ``CUDA_VISIBLE_DEVICES``); call
    after gpu_status() found one."""
    return check(cu.cuDeviceGetCount(), "cuDeviceGetCount")


def device_name(ordinal: int = 0) -> str:
    dev = check(cu.cuDeviceGet(ordinal), "cuDeviceGet", f"device {ordinal}")
    return check(cu.cuDeviceGetName(256, dev), "cuDeviceGetName").split(b"\0", 1)[0].decode()


def device_uuid(ordinal: int = 0) -> str:
    """GPU ``ordinal``'s UUID as nvidia-smi prints it (``GPU-`` and 8-4-4-4-12 hex digits)."""
    dev = check(cu.cuDeviceGet(ordinal), "cuDeviceGet", f"device {ordinal}")
    return uuid_text(check(cu.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes)


def uuid_text(raw: bytes) -> str:
    """A CUuuid's 16 bytes in nvidia-smi's form (``GPU-`` 8-4-4-4-12)."""
    text = bytes(raw).hex()
    if len(text) != 32:
        return text
    return f"GPU-{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
