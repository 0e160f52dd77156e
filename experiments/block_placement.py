"""Where the block scheduler puts the blocks of a first wave: which SM (``%smid``) each block
of a one-wave grid lands on, for a block shape and dynamic shared memory that allow
``per_sm`` blocks per SM. A kernel that treats the blocks sharing an SM differently depends
on this order (the STAGGER experiment in 12's notes found that it follows no simple rule).

    python3 experiments/block_placement.py --threads 128 --smem 98352 --per-sm 2
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from collections import defaultdict

SOURCE = rb"""
extern "C" __global__ void where(unsigned *out) {
    extern __shared__ unsigned char smem[];
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    smem[threadIdx.x] = 0;                      // the dynamic allocation is real
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {                                        // stay resident: no block leaves before
        __nanosleep(1000);                      // the whole wave has been placed
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < 200000);
    if (threadIdx.x == 0) out[blockIdx.x] = sm;
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=128)
    ap.add_argument("--smem", type=int, default=98352, help="dynamic shared memory per block")
    ap.add_argument("--per-sm", type=int, default=2, help="blocks per SM the shape allows")
    args = ap.parse_args()

    import numpy as np

    from harness.bench.session import BenchSession
    from harness.compiler.compile import nvrtc_cubin
    from harness.gpu.driver import Buffer, LaunchShape, Module

    with BenchSession() as session:
        device, stream, arch = session.device, session.stream, session.arch
        cubin, _, _ = nvrtc_cubin(SOURCE, "where.cu", [f"--gpu-architecture={arch}"])
        fn = Module(cubin, "block_placement").function("where")
        fn.set_max_dynamic_smem(args.smem)
        resident = fn.max_active_blocks(args.threads, args.smem)
        if resident != args.per_sm:
            sys.exit(f"the shape allows {resident} blocks per SM, not --per-sm {args.per_sm}")
        blocks = device.sm_count * args.per_sm
        out = Buffer(4 * blocks)
        arg = ctypes.c_uint64(out.address)
        fn.launch(LaunchShape((blocks, 1, 1), (args.threads, 1, 1), args.smem), stream, [arg])
        sm = out.download(np.uint32, (blocks,), stream)
        name, sm_count = device.name, device.sm_count
    by_sm = defaultdict(list)
    for block, s in enumerate(sm):
        by_sm[int(s)].append(block)
    print(f"{name}: {blocks} blocks of {args.threads} threads, {args.smem} B dynamic "
          f"smem, {args.per_sm} per SM")
    print("first 16 blocks -> SM:", " ".join(f"{b}:{int(s)}" for b, s in enumerate(sm[:16])))
    pairs = sorted(tuple(v) for v in by_sm.values())
    print("blocks sharing an SM (first 12 SMs by lowest block):", pairs[:12])
    print(f"block b and b + {sm_count} share an SM for",
          sum(1 for v in by_sm.values() if len(v) == 2 and v[1] - v[0] == sm_count),
          f"of {len(by_sm)} SMs; b and b + 1 for",
          sum(1 for v in by_sm.values() if len(v) == 2 and v[1] - v[0] == 1))


if __name__ == "__main__":
    main()
