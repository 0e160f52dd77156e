"""Offline occupancy against the driver's, on the GPU: every kernel, and a sweep.

The sweep compiles a probe kernel at several register caps (``-maxrregcount``) and static
shared-memory sizes, then asks ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` for every block
size, dynamic shared-memory size and carve-out in the grid below (with the carve-out attribute
actually set), and compares each answer with :func:`harness.compiler.occupancy.predict`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.compiler import occupancy
from harness.compiler.compile import nvrtc_cubin
from harness.compiler.ptxas import parse_report
from harness.gpu.driver import Device, Module

PROBE = r"""
extern "C" __global__ void occ_probe(float* out, int n) {
    __shared__ float pad[STATIC_FLOATS];
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = out[threadIdx.x * 64 + i];
    pad[threadIdx.x % STATIC_FLOATS] = acc[0];
    __syncthreads();
    for (int j = 0; j < n; ++j) {
#pragma unroll
        for (int i = 0; i < 64; ++i)
            acc[i] = fmaf(acc[i], acc[(i + 7) & 63], pad[(i + j) % STATIC_FLOATS]);
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) out[threadIdx.x * 64 + i] = acc[i];
}
"""
REG_CAPS = (16, 24, 32, 40, 48, 64, 72, 80, 96, 128, 168, 255)
STATIC_FLOATS = (1, 2048, 12288)          # 4 B, 8 KB, 48 KB of static shared memory
BLOCK_THREADS = (32, 64, 96, 128, 160, 192, 256, 288, 384, 512, 640, 768, 1024)
DYNAMIC_KB = (0, 1, 3, 8, 16, 24, 33, 40, 48, 64, 80, 100, 132, 164, 196, 227)
CARVEOUTS = (None, 0, 10, 25, 40, 50, 60, 75, 90, 100)


def compare_function(device: Device, function, label: str, registers: int, static_smem: int,
                     configs: Sequence[tuple[int, int, int | None]]) -> list[dict]:
    """Driver vs offline for ``function`` at each (threads, dynamic smem, carve-out)."""
    rows = []
    limit = device.smem_optin_per_block_bytes - static_smem
    function.set_max_dynamic_smem(max(0, limit))
    for threads, dynamic, carveout in configs:
        if occupancy.launch_problems(device.arch, threads, registers, static_smem, dynamic):
            continue
        function.set_carveout(carveout)
        driver = function.max_active_blocks(threads, dynamic)
        offline = occupancy.predict(device.arch, threads, registers, static_smem, dynamic,
                                    carveout)
        rows.append({"function": label, "registers": registers, "static_smem_bytes": static_smem,
                     "block_threads": threads, "dynamic_smem_bytes": dynamic,
                     "carveout_pct": carveout, "driver_blocks_per_sm": driver,
                     "offline_blocks_per_sm": offline.blocks_per_sm,
                     "limiter": offline.limiter, "agree": driver == offline.blocks_per_sm})
    function.set_carveout(None)
    return rows


def sweep(device: Device, say: Callable[[str], None] = lambda _: None) -> list[dict]:
    """The probe sweep: register caps x static smem x block sizes x dynamic smem x carve-outs."""
    configs = [(t, kb * 1024, c) for t in BLOCK_THREADS for kb in DYNAMIC_KB for c in CARVEOUTS]
    rows: list[dict] = []
    for floats in STATIC_FLOATS:
        for cap in REG_CAPS:
            flags = [f"-arch={device.arch.name}", "--ptxas-options=-v", "--no-cache",
                     f"-maxrregcount={cap}", f"-DSTATIC_FLOATS={floats}"]
            cubin, log, _ = nvrtc_cubin(PROBE.encode(), "occ_probe.cu", flags)
            module = Module(cubin, f"occ_probe(maxrreg {cap}, static {floats * 4} B)")
            function = module.function("occ_probe")
            registers, static = function.registers, function.static_smem_bytes
            reported = parse_report(log)["occ_probe"]
            if reported.registers != registers:
                raise AssertionError(f"ptxas reported {reported.registers} registers, the "
                                     f"driver {registers}")
            rows += compare_function(device, function, module.label, registers, static, configs)
            module.close()
            say(f"probe maxrreg {cap:>3}, static {static:>6} B: {len(rows)} configurations")
    return rows
