"""A registry kernel loaded on a device and launched through the common GEMM ABI.

``(int M, int N, int K, float alpha, const T* A, const T* B, float beta, float* C)``, followed
by 128-byte TMA tensor maps of A, B and/or C when the spec's [tma] asks for them: before a
launch the block is checked against the device's limits (refused with the reason), the
dynamic shared-memory limit is raised when the kernel needs more than 48 KB, and the carve-out
the spec or the user asks for is set.

A spec that declares ``signature = [...]`` is packed in its own order instead
(:func:`launch_arguments`, harness.kernels.signature), its tensor maps where ``tmap_X`` says,
a spec's ``cluster_dims`` is launched with a cluster-dimension launch attribute (clusters of
more than 8 blocks allowed on the function first) and a ``block_order`` other than ``default``
with the cluster scheduling-policy attribute.
"""

from __future__ import annotations

import numpy as np

from harness.archs import can_run, cubin_runs_on, get_arch
from harness.compiler import occupancy
from harness.compiler.compile import CompiledKernel
from harness.errors import LaunchError, SpecError
from harness.gpu.driver import (
    Buffer,
    Device,
    Function,
    LaunchShape,
    Module,
    Stream,
)
from harness.gpu.tensormaps import tensor_map, tensor_map_2d
from harness.kernels.hostsetup import HostLaunch, HostValues, run_setup
from harness.kernels.registry import Kernel
from harness.kernels.signature import DEFAULT_SIGNATURE, host_keys, leading_dimensions, pack
from harness.kernels.spec import TMA_OPERANDS
from harness.kinds.gemm.operands import scale_offset


def legacy_tensor_maps(kernel: Kernel, m: int, n: int, k: int, a: int, b: int, c: int,
                       encode=tensor_map_2d, operands=TMA_OPERANDS) -> list:
    """The [tma] tensor maps of ``operands`` (default: every one [tma] declares, in A, B, C
    order) for these buffers: A and B of the input precision, C (M x N) of the ``c_type``."""
    spec = kernel.spec
    # (address, inner, outer, element) of each operand as stored: A is M x K; B is K x N,
    # or N x K in "col"; C is M x N
    dims = {"A": (a, k, m, spec.precision),
            "B": (b, n, k, spec.precision) if spec.layout_b == "row"
            else (b, k, n, spec.precision),
            "C": (c, n, m, spec.c_type)}
    maps = []
    for operand in operands:
        if operand in spec.tma:
            address, inner, outer, element = dims[operand]
            box_inner, box_outer = kernel.tma_box(operand)
            maps.append(encode(element, address, inner, outer, box_inner, box_outer,
                               f"{kernel.name} tensor map {operand}",
                               spec.tma[operand].swizzle))
    return maps


def launch_arguments(kernel: Kernel, m: int, n: int, k: int, alpha: float, a: int, b: int,
                     beta: float, c: int, *, d: int | None = None, workspace: int | None = None,
                     host: dict | None = None, encode_2d=tensor_map_2d,
                     encode=tensor_map) -> list:
    """The ctypes arguments of one launch. Without a declared signature: the common ABI
    followed by the [tma] maps (exactly what every kernel took before signatures existed);
    with one, its parameters in declared order (``host``: the host set-up's values by name).
    ``encode_2d`` / ``encode`` build tensor maps
    (``driver.tensor_map_2d`` / ``driver.tensor_map``; fakes in CPU tests)."""
    spec = kernel.spec
    values = {"M": m, "N": n, "K": k, "alpha": alpha, "beta": beta, "A": a, "B": b, "C": c}
    if getattr(spec, "fp8", None) is not None:  # the scales sit after the codes (operands.py)
        values.update(scale_a=a + scale_offset(m * k), scale_b=b + scale_offset(k * n))
    if spec.signature is None:
        return [*pack(DEFAULT_SIGNATURE, values),
                *legacy_tensor_maps(kernel, m, n, k, a, b, c, encode_2d)]
    values.update(leading_dimensions(m, n, k, spec.layout_a, spec.layout_b, spec.layout_c),
                  D=d, workspace=workspace)
    values.update({f"host:{key}": value for key, value in (host or {}).items()})
    addresses = {"A": a, "B": b, "C": c, "D": d}

    def make(operand: str):
        if operand in spec.tma:
            return legacy_tensor_maps(kernel, m, n, k, a, b, c, encode_2d, (operand,))[0]
        dtype = spec.precision if operand in ("A", "B") else spec.c_type
        try:
            desc = spec.tmaps[operand].evaluate(kernel.env(m, n, k))
        except SpecError as exc:
            raise LaunchError(f"{kernel.name}: [tmaps.{operand}] at {m}x{n}x{k}: {exc}") from None
        if addresses[operand] is None:
            raise LaunchError(f"{kernel.name}: no buffer for tensor map {operand}")
        return encode(desc, addresses[operand], dtype, f"{kernel.name} tensor map {operand}")

    return pack(spec.signature, values, make)


PORTABLE_CLUSTER = 8
"""Blocks a cluster may hold on any GPU that has clusters; more (16 on an H100) needs the
kernel's non-portable-cluster-size attribute, which the launcher sets."""


def scalar_problems(kernel: Kernel, alpha: float, beta: float) -> list[str]:
    """A kernel whose signature has no alpha (beta) computes with alpha = 1 (beta = 0): a
    launch asking for another value cannot be honoured."""
    spec, problems = kernel.spec, []
    if not spec.has_alpha and alpha != 1.0:
        problems.append(f"its signature has no alpha (it computes alpha = 1), asked for "
                        f"alpha = {alpha}")
    if not spec.has_beta and beta != 0.0:
        problems.append(f"its signature has no beta (it computes beta = 0, C not read), asked "
                        f"for beta = {beta}")
    return problems


def declared_launch_problems(kernel: Kernel) -> list[str]:
    """What a declared signature asks for that this harness cannot launch: a column-major
    operand described by a [tma] map (which assumes row-major)."""
    spec = kernel.spec
    problems = [f"{key} = \"col\" with [tma] (its maps describe a row-major {key[-1].upper()}; "
                "declare the map in [tmaps] instead)"
                for key in ("layout_a", "layout_c")
                if getattr(spec, key) == "col" and key[-1].upper() in spec.tma]
    return problems


def host_values(kernel: Kernel, device: Device, shape: LaunchShape, m: int, n: int, k: int,
                buffers: dict[str, int], workspace_bytes: int) -> HostValues | None:
    """The kernel's host set-up at m x n x k (None when its signature needs none), told the
    workspace's size in bytes; its errors as launch errors naming the set-up file and line."""
    keys = host_keys(kernel.spec.abi)
    if not keys:
        return None
    launch = HostLaunch(
        m, n, k, params=dict(kernel.param_env), grid=shape.grid, block=shape.block,
        sm_count=device.sm_count, device_name=device.name, arch=device.arch.name,
        buffers=buffers, workspace_bytes=workspace_bytes)
    try:
        found = run_setup(kernel.spec.path, keys, launch)
    except SpecError as exc:
        raise LaunchError(f"{kernel.name}: {exc}") from None
    for p in kernel.spec.abi:
        if p.name != "host":
            continue
        value, limits = found.values[p.key], _INT_RANGES.get(p.type)
        if limits is not None and not isinstance(value, int):
            raise LaunchError(f"{kernel.name}: host set-up value {p.key!r} is {value!r}; the "
                              f"signature declares it {p.type}")
        if limits is not None and not limits[0] <= value <= limits[1]:
            raise LaunchError(f"{kernel.name}: host set-up value {p.key!r} is {value}, outside "
                              f"{p.type}'s {limits[0]}..{limits[1]}: it would reach the kernel "
                              "wrapped; return a value the declared type holds, or declare a "
                              "wider type")
    return found


_INT_RANGES = {"i32": (-(1 << 31), (1 << 31) - 1), "u32": (0, (1 << 32) - 1),
               "i64": (-(1 << 63), (1 << 63) - 1), "u64": (0, (1 << 64) - 1)}


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
        self.function: Function = self.module.function(compiled.symbol)
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
                 c: int, stream: Stream, d: int | None = None):
        """A no-argument callable that enqueues this GEMM (arguments packed once); ``d``: the
        output buffer of a kernel with a separate D."""
        shape = self.prepare(m, n, k)
        spec = self.kernel.spec
        if spec.signature is None and not spec.cluster and spec.block_order == "default":
            args = launch_arguments(self.kernel, m, n, k, alpha, a, b, beta, c)

            def launch() -> None:
                self.function.launch(shape, stream, args)

            return launch
        return self._declared_launcher(shape, m, n, k, alpha, a, b, beta, c, stream, d)

    def _declared_launcher(self, shape: LaunchShape, m, n, k, alpha, a, b, beta, c,
                           stream: Stream, d: int | None = None):
        """A declared signature's, a cluster kernel's or a block order's launch (issue 22)."""
        problems = declared_launch_problems(self.kernel) + scalar_problems(self.kernel, alpha,
                                                                           beta)
        if problems:
            raise LaunchError(f"{self.kernel.name} cannot launch yet: " + "; ".join(problems))
        workspace = contents = None
        nbytes = 0
        param = next((p for p in self.kernel.spec.abi if p.name == "workspace"), None)
        if param is not None:
            nbytes = int(self.kernel.evaluate(param.bytes, self.kernel.env(m, n, k)))
            # whole words (zeroed by cuMemsetD32); the launch closure keeps it alive
            workspace = Buffer(max(4, -(-nbytes // 4) * 4))
        if self.kernel.spec.has_d and d is None:
            raise LaunchError(f"{self.kernel.name} writes a separate output D: launch it with "
                              "a D buffer")
        buffers = {"A": a, "B": b, "C": c, **({"D": d} if d is not None else {})}
        host = host_values(self.kernel, self.device, shape, m, n, k, buffers, nbytes)
        if host is not None and host.workspace:
            # the set-up's bytes kept on the device, copied over the zeroed workspace before
            # every launch (a device-to-device copy: graph-capturable, no host in the loop)
            contents = Buffer(len(host.workspace))
            contents.upload(np.frombuffer(host.workspace, np.uint8), stream)
        args = launch_arguments(self.kernel, m, n, k, alpha, a, b, beta, c, d=d,
                                workspace=workspace.address if workspace else None,
                                host=host.values if host else None)
        cluster = self.kernel.cluster_dims
        if cluster is not None and any(g % c for g, c in zip(shape.grid, cluster, strict=True)):
            raise LaunchError(f"{self.kernel.name} at {m}x{n}x{k}: grid {shape.grid} is not a "
                              f"whole number of clusters {cluster}; round the grid formulas up "
                              "to whole clusters")
        # a __cluster_dims__ compiled into the kernel forms the clusters by itself
        attribute = cluster if self.kernel.spec.cluster_from == "spec" else None
        order = self.kernel.spec.block_order
        if cluster is not None and cluster[0] * cluster[1] * cluster[2] > PORTABLE_CLUSTER:
            self.function.allow_large_clusters()

        def prepare() -> None:  # before every launch, outside a timed region
            if workspace is not None:
                workspace.fill_u32(0, stream)
            if contents is not None:
                workspace.copy_from(contents, stream)

        def run() -> None:
            self.function.launch(shape, stream, args, cluster=attribute, block_order=order)

        def launch() -> None:
            prepare()
            run()

        launch.prepare, launch.run = prepare, run  # the timer times ``run`` after ``prepare``
        return launch

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
