"""Debug aid for cluster kernels (issue 16, rung 18): which rows of A and which 64-column panel
of B reproduce each 64 x 64 block of C. Run on a GPU from the project root with PYTHONPATH set
(the harness as a library, not the CLI): python3 experiments/wgmma_block_diag.py. It found
that rank 1 of a cluster read B panels 1-3 wrong (notes/18_wgmma_cluster.md)."""

import numpy as np

from harness.kernels.registry import discover
from harness.kinds.gemm.launches import launcher
from harness.kinds.gemm.numerics import to_float64
from harness.kinds.gemm.session import GemmSession

names = ["17_wgmma_persist_bf16:g16", "18_wgmma_cluster_bf16:c2g8",
         "18_wgmma_cluster_bf16:shareA"]
with GemmSession.open() as session:
    stream = session.stream
    kernels = {k.name: k for k in discover()}
    for name in names:
        g = session.load(kernels[name])
        for (m, n, kk) in ((256, 256, 64), (256, 256, 128), (512, 512, 256)):
            ops = session.operands(g.kernel, m, n, kk, seed=7)
            ops.poison_c(stream)
            launcher(g, ops, session)()
            out = to_float64(ops.result(stream)[0], g.kernel.spec.c_type)
            ref = ops.a64 @ ops.b64
            ops.close()
            bad = np.abs(out - ref) > 0.05 + 0.02 * np.abs(ref)
            print(f"{name} {m}x{n}x{kk}: {bad.sum()} bad, NaN {np.isnan(out).sum()}")
            if not bad.any():
                continue
            for rb in range(m // 64):
                row = []
                for cb in range(n // 64):
                    blk = out[64*rb:64*rb+64, 64*cb:64*cb+64]
                    if not bad[64*rb:64*rb+64, 64*cb:64*cb+64].any():
                        row.append("ok")
                        continue
                    hit = "?"
                    # which rows of A (64-row block ra) and which B panel (q) and which k range
                    for ra in range(m // 64):
                        for q in range(n // 64):
                            for k0, k1 in ((0, kk), (0, 64), (64, 128) if kk >= 128 else (0, 64)):
                                cand = ops.a64[64*ra:64*ra+64, k0:k1] @ ops.b64[k0:k1, 64*q:64*q+64]
                                if np.allclose(blk, cand, atol=0.05, rtol=0.02):
                                    hit = f"A{ra}B{q}k{k0}-{k1}"
                    row.append(hit)
                print("   rows", 64*rb, ":", " ".join(f"{x:>12}" for x in row))
