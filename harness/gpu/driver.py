"""The CUDA driver layer: device and context, modules, launches; memory (memory.py), streams and
events (streams.py) and what lives in the context (context.py) are found here too (which GPUs
there are, before any context: devices.py; tensor maps: tensormaps.py).

Everything goes through :func:`harness.gpu.check.check`. Resources are released by context
managers or ``weakref.finalize``.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

from harness.archs import Arch, arch_for_capability
from harness.errors import HarnessError
from harness.gpu.check import check
from harness.gpu.context import _CONTEXT_RESOURCES, _RETAINS, context_resource
from harness.gpu.devices import (  # noqa: F401 (callers find them here, as they always did)
    GpuStatus,
    cu,
    device_arch_name,
    device_count,
    device_name,
    device_uuid,
    gpu_status,
    uuid_text,
)
from harness.gpu.memory import Buffer
from harness.gpu.streams import Event, EventPool, Stream  # noqa: F401 (callers find them here)

_ATTR = cu.CUdevice_attribute if cu else None


class Device:
    """One GPU with its primary context current on this thread; use as a context manager."""

    def __init__(self, ordinal: int = 0):
        status = gpu_status()
        if not status.found:
            raise HarnessError(f"no GPU: {status.reason}")
        self.ordinal = ordinal
        self.handle = check(cu.cuDeviceGet(ordinal), "cuDeviceGet", f"device {ordinal}")
        self.context = check(cu.cuDevicePrimaryCtxRetain(self.handle), "cuDevicePrimaryCtxRetain")
        check(cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self._release = weakref.finalize(self, cu.cuDevicePrimaryCtxRelease, self.handle)
        _RETAINS[0] += 1

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Release the context; the last open Device first frees what it still holds."""
        if not self._release.alive:
            return
        _RETAINS[0] -= 1
        if _RETAINS[0] == 0:
            while _CONTEXT_RESOURCES:
                _CONTEXT_RESOURCES.pop()()
        self._release()

    def attribute(self, attr) -> int:
        return check(cu.cuDeviceGetAttribute(attr, self.handle), "cuDeviceGetAttribute",
                     str(attr))

    @cached_property
    def name(self) -> str:
        raw = check(cu.cuDeviceGetName(256, self.handle), "cuDeviceGetName")
        return raw.split(b"\0", 1)[0].decode()

    @cached_property
    def compute_capability(self) -> tuple[int, int]:
        return (self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))

    @cached_property
    def arch(self) -> Arch:
        return arch_for_capability(*self.compute_capability)

    @cached_property
    def sm_count(self) -> int:
        return self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)

    @cached_property
    def l2_bytes(self) -> int:
        return self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)

    @cached_property
    def max_sm_clock_mhz(self) -> float:
        """The SM clock's maximum (boost) rate."""
        return self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1e3

    @cached_property
    def dram_bytes_per_s(self) -> float:
        """Peak DRAM bandwidth: memory clock x 2 (double data rate) x bus width (3.35 TB/s on
        an H100 SXM: 2619 MHz, 5120 bits)."""
        clock_khz = self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)
        bus_bits = self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
        return clock_khz * 1e3 * 2 * bus_bits / 8

    @cached_property
    def smem_optin_per_block_bytes(self) -> int:
        return self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)

    @cached_property
    def smem_per_sm_bytes(self) -> int:
        return self.attribute(_ATTR.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)

    @cached_property
    def pci_bus_id(self) -> str:
        raw = check(cu.cuDeviceGetPCIBusId(64, self.handle), "cuDeviceGetPCIBusId")
        return raw.split(b"\0", 1)[0].decode() if isinstance(raw, bytes) else str(raw)

    @cached_property
    def driver_version(self) -> str:
        version = check(cu.cuDriverGetVersion(), "cuDriverGetVersion")
        return f"{version // 1000}.{version % 1000 // 10}"

    @cached_property
    def total_memory_bytes(self) -> int:
        return check(cu.cuDeviceTotalMem(self.handle), "cuDeviceTotalMem")

    def synchronize(self) -> None:
        check(cu.cuCtxSynchronize(), "cuCtxSynchronize")


@contextmanager
def profiler_range() -> Iterator[None]:
    """Launches inside are the ones a profiler started with ``--profile-from-start off``
    (Nsight Compute) records (cuProfilerStart / cuProfilerStop)."""
    check(cu.cuProfilerStart(), "cuProfilerStart")
    try:
        yield
    finally:
        check(cu.cuProfilerStop(), "cuProfilerStop")


class Module:
    """A loaded cubin."""

    def __init__(self, cubin: bytes, label: str):
        self.label = label
        self.handle = check(cu.cuModuleLoadData(cubin), "cuModuleLoadData", label)
        self._unload = context_resource(self, cu.cuModuleUnload, self.handle)

    def global_buffer(self, name: str) -> Buffer:
        """The module's ``.global`` variable ``name``, as a Buffer that lives as long as the
        module (fill and download it like any other, on a stream)."""
        dptr, nbytes = check(cu.cuModuleGetGlobal(self.handle, name.encode()),
                             "cuModuleGetGlobal", f"{self.label}: .global {name}")
        return Buffer.view(dptr, nbytes)

    def function(self, entry: str) -> Function:
        handle = check(cu.cuModuleGetFunction(self.handle, entry.encode()),
                       "cuModuleGetFunction", f"{self.label}: entry {entry!r}")
        return Function(handle, f"{self.label} ({entry})", self)

    def close(self) -> None:
        self._unload()


@dataclass(frozen=True)
class LaunchShape:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int

    def __str__(self) -> str:
        return (f"grid {self.grid}, block {self.block}, "
                f"dynamic smem {self.dynamic_smem_bytes} B")


class Function:
    """A kernel entry point of a loaded module."""

    def __init__(self, handle, label: str, module: Module):
        self.handle, self.label, self._module = handle, label, module

    def get(self, attr) -> int:
        return check(cu.cuFuncGetAttribute(attr, self.handle), "cuFuncGetAttribute",
                     f"{self.label}: {attr}")

    def set(self, attr, value: int) -> None:
        check(cu.cuFuncSetAttribute(self.handle, attr, value), "cuFuncSetAttribute",
              f"{self.label}: {attr} = {value}")

    @property
    def registers(self) -> int:
        return self.get(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS)

    @property
    def static_smem_bytes(self) -> int:
        return self.get(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)

    def set_max_dynamic_smem(self, nbytes: int) -> None:
        self.set(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)

    def set_carveout(self, percent: int | None) -> None:
        """Preferred shared-memory carve-out in percent; None restores the driver default."""
        value = -1 if percent is None else percent
        self.set(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                 value)

    def max_active_blocks(self, block_threads: int, dynamic_smem_bytes: int) -> int:
        """The driver's blocks per SM (honours the carve-out and dynamic-smem limit set)."""
        return check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            self.handle, block_threads, dynamic_smem_bytes),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
            f"{self.label}: {block_threads} threads, {dynamic_smem_bytes} B dynamic smem")

    def allow_large_clusters(self) -> None:
        """Let this kernel launch clusters of more than the 8 portable blocks (up to 16 on an
        H100): CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED."""
        self.set(cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)

    def launch(self, shape: LaunchShape, stream: Stream, args: Sequence[ctypes._SimpleCData],
               cluster: tuple[int, int, int] | None = None, block_order: str = "default"):
        """Launch with ``cuLaunchKernelEx``; ``args`` are ctypes values in parameter order;
        ``cluster``: thread-block cluster dimensions (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION),
        None for none; ``block_order``: the cluster scheduling policy (spec.BLOCK_ORDERS).
        With neither, no launch attribute at all."""
        config = cu.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = shape.grid
        config.blockDimX, config.blockDimY, config.blockDimZ = shape.block
        config.sharedMemBytes = shape.dynamic_smem_bytes
        config.hStream = stream.handle
        config.numAttrs = 0
        attrs = launch_attributes(cluster, block_order=block_order)
        if attrs:
            config.attrs, config.numAttrs = attrs, len(attrs)
        pointers = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        check(cu.cuLaunchKernelEx(config, self.handle, ctypes.addressof(pointers), 0),
              "cuLaunchKernelEx", f"{self.label}: {shape}")


_SCHEDULING_POLICIES = {"default": "DEFAULT", "spread": "SPREAD",
                        "load_balancing": "LOAD_BALANCING"}


def launch_attributes(cluster: Sequence[int] | None, api=None,
                      block_order: str = "default") -> list:
    """The ``CUlaunchAttribute`` list of a launch: a CLUSTER_DIMENSION attribute when
    ``cluster`` (x, y, z; missing trailing dimensions are 1) is given, and a
    CLUSTER_SCHEDULING_POLICY_PREFERENCE attribute when ``block_order`` is not ``default``
    (``spread`` or ``load_balancing``); none for a plain launch. ``api`` is
    ``cuda.bindings.driver`` (a fake one in CPU tests)."""
    api = api or cu
    attrs = []
    if cluster is not None:
        dims = (*tuple(int(d) for d in cluster), 1, 1)[:3]
        if any(d < 1 for d in dims):
            raise HarnessError(f"cluster dimensions {dims} must all be at least 1")
        attr = api.CUlaunchAttribute()
        attr.id = api.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = dims
        attrs.append(attr)
    if block_order not in _SCHEDULING_POLICIES:
        raise HarnessError(f"block order {block_order!r}: expected one of "
                           f"{', '.join(_SCHEDULING_POLICIES)}")
    if block_order != "default":
        attr = api.CUlaunchAttribute()
        attr.id = api.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
        attr.value.clusterSchedulingPolicyPreference = getattr(
            api.CUclusterSchedulingPolicy,
            f"CU_CLUSTER_SCHEDULING_POLICY_{_SCHEDULING_POLICIES[block_order]}")
        attrs.append(attr)
    return attrs
