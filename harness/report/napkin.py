"""The napkin model beside the measurement (pure Python).

For a kernel at M x N x K, from the [model] table of its spec:
- global bytes its tiling implies: each A tile is read once per block column (ceil(N / tile_n)
  times A), each B tile once per block row (ceil(M / tile_m) times B), C written once;
- arithmetic intensity: 2MNK FLOP over those bytes;
- shared-memory load instructions per FMA (per thread per k step);
- the bound: min(FP32 peak at the measured clock, intensity x DRAM bandwidth, the shared-memory
  issue bound). The last assumes one warp-wide shared-load instruction per clock per SM (128 B
  per clock, the sm_80/sm_90 shared-memory bandwidth): a warp's FMA instruction does 64 FLOP,
  so shared loads cap an SM at 64 / (loads per FMA) FLOP per clock.
Caches make real DRAM traffic lower than the implied bytes for small tiles (the naive kernels
run far above their roofline point for that reason): the model says what the tiling alone
guarantees.
"""

from __future__ import annotations

import math

from harness.archs import get_arch
from harness.errors import HarnessError
from harness.kernels.registry import Kernel
from harness.kernels.spec import KernelSpec

# DRAM bandwidth by GPU family, bytes/s, from NVIDIA's datasheets (H100 SXM5 HBM3 3.35 TB/s,
# H200 SXM 4.8 TB/s, A100 SXM4 80GB 2.04 TB/s).
DRAM_BYTES_PER_S = {"h100": 3.35e12, "h200": 4.8e12, "a100": 2.04e12}


ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}


def model(spec: KernelSpec, params: dict[str, int], m: int, n: int, k: int,
          name: str | None = None) -> dict:
    """Implied global bytes, intensity and shared loads per FMA for one launch of the kernel
    ``name`` (default: the file stem); A and B at the size of the spec's input precision, C at
    its c_type's."""
    if not spec.model:
        raise HarnessError(f"{spec.path}: no [model] table, so no napkin model")
    values = Kernel(name or spec.stem, spec, tuple(sorted(params.items()))).model_values()
    tile_m, tile_n = values["tile_m"], values["tile_n"]
    element_bytes = ELEMENT_BYTES[spec.precision]
    a_bytes = m * k * element_bytes * math.ceil(n / tile_n)
    b_bytes = k * n * element_bytes * math.ceil(m / tile_m)
    c_bytes = m * n * ELEMENT_BYTES[spec.c_type]
    total = a_bytes + b_bytes + c_bytes
    flops = 2.0 * m * n * k
    return {"tile_m": tile_m, "tile_n": tile_n, "global_bytes": total,
            "intensity_flop_per_byte": flops / total,
            "smem_loads_per_fma": values["smem_loads"] / values["fmas"]}


SHARED_LOADS_PER_CLOCK_PER_SM = 1.0


def bound(intensity: float, smem_loads_per_fma: float, arch: str, sm_count: int,
          clock_mhz: float, gpu_slug: str, precision: str = "fp32") -> tuple[float, str]:
    """The napkin bound in GFLOP/s and which roof sets it (compute, DRAM or shared)."""
    clock_hz = clock_mhz * 1e6
    roofs = {"compute": get_arch(arch).fma_flops_per_clock_per_sm[precision] * sm_count
             * clock_hz / 1e9}
    if gpu_slug in DRAM_BYTES_PER_S:
        roofs["DRAM"] = intensity * DRAM_BYTES_PER_S[gpu_slug] / 1e9
    if smem_loads_per_fma > 0:
        roofs["shared"] = (64 * SHARED_LOADS_PER_CLOCK_PER_SM / smem_loads_per_fma * sm_count
                           * clock_hz / 1e9)
    name = min(roofs, key=roofs.get)
    return roofs[name], name
