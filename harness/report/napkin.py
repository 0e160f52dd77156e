"""The napkin model beside the measurement (pure Python).

For a kernel at M x N x K, from the [model] table of its spec:
- global bytes its tiling implies: each A tile is read once per block column (ceil(N / tile_n)
  times A), each B tile once per block row (ceil(M / tile_m) times B), C written once;
- arithmetic intensity: 2MNK FLOP over those bytes;
- shared-memory load instructions per FMA (per thread per k step);
- optionally, shared-memory wavefronts per load and per store request, from the layout's bank
  arithmetic declared in the spec: 1 for a conflict-free 32-bit access; a 128-bit load
  returns 512 bytes at 128 per wavefront, so 4 at the least, 2 where threads pair up on one
  address (T and T^1 or T^2, a broadcast included: the return path packs them), more where
  the 8 threads one wavefront serves hit a bank twice (NVIDIA's forum, "unexpected shared
  memory bank conflict"; measured on the H100 by ``harness profile``);
- the compulsory bytes (A, B and C once each): what DRAM must move at the least, and an
  estimate of DRAM's bytes by waves of blocks (``dram_bytes_waves``): the implied bytes are
  what the SMs ask of L2; L2 serves the tiles that blocks running at the same time share;
- the bound: min(FP32 peak at the measured clock, intensity x DRAM bandwidth, the shared-memory
  issue bound), the intensity over the compulsory bytes where A, B and C fit in half of L2
  (``dram_intensity``: the tiling's re-reads are L2 hits), else over the bytes by waves
  where the launch is known, else over the implied bytes. The shared bound assumes one
  warp-wide shared-load instruction per clock per SM (128 B per clock, the sm_80/sm_90
  shared-memory bandwidth): a warp's FMA instruction does 64 FLOP,
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
from harness.stats import ELEMENT_BYTES

# DRAM bandwidth by GPU family, bytes/s, from NVIDIA's datasheets (H100 SXM5 HBM3 3.35 TB/s,
# H200 SXM 4.8 TB/s, A100 SXM4 80GB 2.04 TB/s).
DRAM_BYTES_PER_S = {"h100": 3.35e12, "h200": 4.8e12, "a100": 2.04e12}




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
    out = {"tile_m": tile_m, "tile_n": tile_n, "global_bytes": total,
           "intensity_flop_per_byte": flops / total,
           "compulsory_bytes": (m * k + k * n) * element_bytes + c_bytes,
           "smem_loads_per_fma": values["smem_loads"] / values["fmas"]}
    for op in ("ld", "st"):  # optional: the layout's bank-conflict prediction
        requests = values.get(f"smem_{op}_requests")
        if requests:
            out[f"smem_{op}_wavefronts_per_request"] = (values[f"smem_{op}_wavefronts"]
                                                        / requests)
    return out


def dram_bytes_waves(est: dict, spec: KernelSpec, m: int, n: int, k: int, grid_blocks: int,
                     blocks_in_flight: int, l2_bytes: int) -> float | None:
    """DRAM bytes if L2 keeps what the blocks in flight at one time share, and no more.

    Blocks run in waves of ``blocks_in_flight`` (blocks per SM x SMs) in launch order, x (N)
    fastest. Each A row panel is read once: the blocks of a row run one after the other and
    keep it in use. Each B column panel is read once per wave that touches it, unless B fits
    in half of L2 and is read once in all. C is written once. None where a block is not one
    tile of the model (a tile per thread, a persistent grid): the waves are not of tiles."""
    tile_m, tile_n = est["tile_m"], est["tile_n"]
    gx, gy = math.ceil(n / tile_n), math.ceil(m / tile_m)
    if gx * gy != grid_blocks or blocks_in_flight < 1:
        return None
    e = ELEMENT_BYTES[spec.precision]
    b_bytes = k * n * e
    if b_bytes > l2_bytes // 2:
        b_bytes, start = 0, 0
        while start < grid_blocks:
            length = min(blocks_in_flight, grid_blocks - start)
            b_bytes += min(gx, length) * tile_n * k * e
            start += length
    return m * k * e + b_bytes + m * n * ELEMENT_BYTES[spec.c_type]


def dram_intensity(est: dict, l2_bytes: int | None, waves_bytes: float | None = None
                   ) -> tuple[float, str]:
    """FLOP per DRAM byte for the roofline, and where its bytes come from ("" for the implied
    bytes, as the tiling alone guarantees them). Where A, B and C together fit in half of L2,
    what the tiling reads again is served by L2 and DRAM moves each byte once ("fits L2": the
    compulsory bytes; cold L2 reads each from DRAM the first time); else, where the row's
    launch says its waves, the bytes by waves of blocks (``dram_bytes_waves``: "by waves").
    With the implied bytes alone, 02_coalesced's DRAM roof sat at 837 GFLOP/s at every size,
    and it ran 7-8x above it from L2 (issue 56)."""
    flops = est["intensity_flop_per_byte"] * est["global_bytes"]
    if l2_bytes and est["compulsory_bytes"] <= l2_bytes // 2:
        return flops / est["compulsory_bytes"], "fits L2"
    if waves_bytes:
        return flops / waves_bytes, "by waves"
    return est["intensity_flop_per_byte"], ""


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
