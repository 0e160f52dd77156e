"""cuBLASLt's FP8 outputs on random inputs, saved for the accumulation model (issue 61): the
GPU suite at f4d6e98 found 3-6% of sampled outputs of rungs 20/21 and cuBLASLt apart from
formats.window_step's sums, where the constructed probes (experiments/fp8_accumulation.py)
all agree with it. This saves the inputs' codes and the outputs (FP32, scales 1) so that
models can be tried on a CPU.

Run on a GPU from the project root: python3 experiments/fp8_tc_dump.py OUT.npz"""

from __future__ import annotations

import sys

import numpy as np

from harness.kinds.gemm.contents import FP8_SPREAD
from harness.kinds.gemm.fp8.formats import FORMATS, tensor_core_dot

SIZES = [(128, 128, 32), (128, 128, 64), (128, 128, 256), (64, 64, 1024)]


def main(path: str) -> int:
    from harness.gpu.cublaslt import CublasLt
    from harness.gpu.driver import Buffer, Device, Stream

    rng = np.random.default_rng(61)
    saved = {}
    with Device(0) as device:
        stream = Stream()
        lt = CublasLt(stream)
        print(f"{device.name}, cuBLASLt {lt.version_text}")
        for fa, fb in (("e4m3", "e4m3"), ("e5m2", "e4m3")):
            for m, n, k in SIZES:
                a = FORMATS[fa].draw(rng, (m, k), FP8_SPREAD[fa])
                b = FORMATS[fb].draw(rng, (n, k), FP8_SPREAD[fb])
                bufs = {"a": Buffer(a.nbytes), "b": Buffer(b.nbytes), "c": Buffer(m * n * 4),
                        "sa": Buffer(4), "sb": Buffer(4)}
                bufs["a"].upload(a, stream)
                bufs["b"].upload(b, stream)
                bufs["sa"].upload(np.float32([1.0]), stream)
                bufs["sb"].upload(np.float32([1.0]), stream)
                lt.gemm_fp8(m, n, k, bufs["a"].address, bufs["b"].address, bufs["c"].address,
                            bufs["sa"].address, bufs["sb"].address, fa, fb, "fp32")
                out = bufs["c"].download(np.float32, (m, n), stream)
                stream.synchronize("dump")
                for buf in bufs.values():
                    buf.close()
                key = f"{fa}_{fb}_{m}x{n}x{k}"
                saved[key + "_a"], saved[key + "_b"], saved[key + "_out"] = a, b, out
                av = FORMATS[fa].decode(a) if hasattr(FORMATS[fa], "decode") else None
                if av is not None:
                    model = tensor_core_dot(av, FORMATS[fb].decode(b).T)
                    print(f"{key}: {100 * np.mean(model != out):.1f}% differ from window_step "
                          f"({lt.last_algo})")
                else:
                    print(f"{key}: saved ({lt.last_algo})")
        lt.close()
    np.savez_compressed(path, **saved)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
