"""A registry kernel loaded on a device and launched through the common GEMM ABI.

``(int M, int N, int K, float alpha, const T* A, const T* B, float beta, float* C)``, followed
by 128-byte TMA tensor maps of A, B and/or C when the spec's [tma] asks for them: before a
launch the block is checked against the device's limits (refused with the reason), the
dynamic shared-memory limit is raised when the kernel needs more than 48 KB, and the carve-out
the spec or the user asks for is set.
"""

from __future__ import annotations

import ctypes

from harness.archs import can_run, cubin_runs_on, get_arch
from harness.build import occupancy
from harness.build.compile import CompiledKernel
from harness.errors import LaunchError
from harness.gpu.driver import Device, Function, LaunchShape, Module, Stream, tensor_map_2d
from harness.kernels.registry import Kernel
from harness.kernels.spec import TMA_OPERANDS


class LoadedGemm:
    """One compiled kernel loaded into the current context."""

    def __init__(self, device: Device, kernel: Kernel, compiled: CompiledKernel,
                 carveout_pct: int | None = None):
        self.device, self.kernel, self.compiled = device, kernel, compiled
        need = get_arch(kernel.spec.min_arch)
        if not can_run(need, device.arch):
            raise LaunchError(
                f"{kernel.name} needs {need.name} (min_arch in {kernel.spec.path.name}); this GPU "
                f"({device.name}) is {device.arch.name}, compute capability "
                f"{'.'.join(map(str, device.compute_capability))}: run it on a newer GPU"
            )
        target = get_arch(compiled.arch)
        if not cubin_runs_on(target, device.arch):
            raise LaunchError(f"{kernel.name} was compiled for {compiled.arch}, which cannot run "
                              f"on {device.arch.name}; compile it for {device.arch.name}")
        self.module = Module(compiled.cubin, kernel.name)
        self.function: Function = self.module.function(kernel.spec.entry)
        self.carveout_pct = carveout_pct if carveout_pct is not None else kernel.spec.carveout_pct
        if self.carveout_pct is not None:
            self.function.set_carveout(self.carveout_pct)
        self.registers = self.function.registers
        self.static_smem_bytes = self.function.static_smem_bytes
        self._dynamic_limit = device.arch.smem_default_per_block_bytes

    def shape(self, m: int, n: int, k: int) -> LaunchShape:
        return LaunchShape(self.kernel.grid_dims(m, n, k, self.device.sm_count),
                           self.kernel.block_dims,
                           self.kernel.dynamic_smem_bytes(m, n, k))

    def prepare(self, m: int, n: int, k: int) -> LaunchShape:
        """The launch shape at m x n x k, after checking the device can hold the block."""
        shape = self.shape(m, n, k)
        problems = occupancy.kernel_launch_problems(
            self.kernel, self.device.arch, m, n, k, self.registers, self.static_smem_bytes,
            self.device.sm_count)
        if problems:
            raise LaunchError(f"{self.kernel.name} at {m}x{n}x{k} cannot launch: "
                              + "; ".join(problems))
        if shape.dynamic_smem_bytes > self._dynamic_limit:
            self.function.set_max_dynamic_smem(shape.dynamic_smem_bytes)
            self._dynamic_limit = shape.dynamic_smem_bytes
        return shape

    def launcher(self, m: int, n: int, k: int, alpha: float, a: int, b: int, beta: float,
                 c: int, stream: Stream):
        """A no-argument callable that enqueues this GEMM (arguments packed once)."""
        shape = self.prepare(m, n, k)
        args = (ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k), ctypes.c_float(alpha),
                ctypes.c_uint64(a), ctypes.c_uint64(b), ctypes.c_float(beta), ctypes.c_uint64(c),
                *self.tensor_maps(m, n, k, a, b, c))

        def launch() -> None:
            self.function.launch(shape, stream, args)

        return launch

    def tensor_maps(self, m: int, n: int, k: int, a: int, b: int, c: int) -> list:
        """The TMA tensor maps the spec's [tma] asks for, in A, B, C order, for these buffers:
        A and B of the input precision, C (M x N) of the spec's ``c_type``."""
        spec = self.kernel.spec
        # (address, inner, outer, element) of each operand as stored: A is M x K; B is K x N,
        # or N x K in "col"; C is M x N
        dims = {"A": (a, k, m, spec.precision),
                "B": (b, n, k, spec.precision) if spec.layout_b == "row"
                else (b, k, n, spec.precision),
                "C": (c, n, m, spec.c_type)}
        maps = []
        for operand in TMA_OPERANDS:
            if operand in spec.tma:
                address, inner, outer, element = dims[operand]
                box_inner, box_outer = self.kernel.tma_box(operand)
                maps.append(tensor_map_2d(element, address, inner, outer, box_inner, box_outer,
                                          f"{self.kernel.name} tensor map {operand}",
                                          spec.tma[operand].swizzle))
        return maps

    def occupancy(self, m: int, n: int, k: int) -> dict:
        """Driver and offline occupancy for the launch at m x n x k, side by side."""
        shape = self.prepare(m, n, k)
        threads = self.kernel.block_threads
        driver_blocks = self.function.max_active_blocks(threads, shape.dynamic_smem_bytes)
        predicted = occupancy.predict(self.device.arch, threads, self.registers,
                                      self.static_smem_bytes, shape.dynamic_smem_bytes,
                                      self.carveout_pct)
        grid_blocks = shape.grid[0] * shape.grid[1] * shape.grid[2]
        return {
            "driver_blocks_per_sm": driver_blocks,
            "offline": predicted.as_dict(),
            "agree": driver_blocks == predicted.blocks_per_sm,
            "waves_per_sm": (occupancy.waves_per_sm(grid_blocks, driver_blocks,
                                                    self.device.sm_count)
                             if driver_blocks else None),
            "grid_blocks": grid_blocks,
        }
