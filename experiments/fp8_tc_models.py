"""Models of the tensor core's FP8 accumulation tried against the H100's outputs (issue 61):
reads the arrays experiments/fp8_tc_dump.py saved (FP8 codes of A and B, cuBLASLt's FP32
outputs, scales 1; the committed ones keep each GEMM's first 64 rows and columns) and prints,
per GEMM, the models whose outputs differ least, the old model's share and FP32 sums'.

Each model adds a k step's products and the FP32 accumulator in a window: every term cut at
``places`` binary places below the anchor (the largest term's exponent, ``value``, or the
largest sum of the operands' exponents, ``expsum``, which ignores a product's carry), toward
zero, the rest added exactly and stored to FP32 (round to nearest, or toward zero), in steps of
32, 16 or 8 k; optionally products pre-summed exactly in groups of 2 or 4 first; and each
step's sum cut to 14 significant bits (``sum14``), with runs of 64-256 k promoted into FP32
(round to nearest) between them. The last is the H100's: it matches every output
(harness/kinds/gemm/fp8/formats.window_step).

Run on a CPU: python3 experiments/fp8_tc_models.py reports/h100/fp8-tc-models-362163b.npz"""

from __future__ import annotations

import itertools
import sys

import numpy as np

from harness.kinds.gemm.fp8.formats import FORMATS, exponent_of


def _f32(x: np.ndarray, toward_zero: bool) -> np.ndarray:
    y = x.astype(np.float32)
    if toward_zero:
        over = np.abs(y.astype(np.float64)) > np.abs(x)
        y = np.where(over, np.nextafter(y, np.float32(0)), y)
    return y.astype(np.float64)


def model(av, bv, places, anchor, toward_zero, group=1, k_step=32, sum14=False, run=None):
    m, k = av.shape
    if run is not None and run < k:  # promotion: each run's sum added into FP32
        total = np.zeros((m, bv.shape[0]), dtype=np.float32)
        for s in range(0, k, run):
            part = model(av[:, s:s + run], bv[:, s:s + run], places, anchor, toward_zero,
                         group, k_step, sum14)
            total = (total.astype(np.float64) + part).astype(np.float32)
        return total.astype(np.float64)
    n = bv.shape[0]
    ae, be = exponent_of(av), exponent_of(bv)
    acc = np.zeros((m, n))
    for s in range(0, k, k_step):
        p = av[:, None, s:s + k_step] * bv[None, :, s:s + k_step]
        if group > 1:
            p = p.reshape(m, n, -1, group).sum(-1)
            anc = exponent_of(p)
        elif anchor == "value":
            anc = exponent_of(p)
        else:
            anc = np.where(p == 0, -1000, ae[:, None, s:s + k_step] + be[None, :, s:s + k_step])
        terms = np.concatenate([acc[..., None], p], axis=-1)
        top = np.concatenate([exponent_of(acc)[..., None], anc], axis=-1).max(-1, keepdims=True)
        unit = np.exp2(top - places)
        total = (np.trunc(terms / unit) * unit).sum(-1)
        if sum14:
            kept = np.where(total == 0, 1.0, np.exp2(exponent_of(total) - places))
            total = np.trunc(total / kept) * kept
        acc = _f32(total, toward_zero)
    return acc


OLD = "value 13 places, k32, groups of 1, store RN"
"""The model the check used until 8c3d6ba: anchored at each product's own exponent, the sum
stored to FP32 as it is."""


def main(path: str) -> int:
    data = np.load(path)
    for key in sorted({name.rsplit("_", 1)[0] for name in data.files}):
        fa, fb, _ = key.split("_")
        out = data[key + "_out"].astype(np.float64)
        av, bv = FORMATS[fa].decode(data[key + "_a"]), FORMATS[fb].decode(data[key + "_b"])
        exact = (av @ bv.T).astype(np.float32).astype(np.float64)
        rows = [(100 * np.mean(exact != out), "FP32 sum of the exact products")]
        for anchor, places, rz, group, step in itertools.product(
                ("value", "expsum"), (12, 13, 14, 15), (False, True), (1, 2, 4), (32, 16, 8)):
            if group > 1 and (anchor == "expsum" or step != 32):
                continue
            got = model(av, bv, places, anchor, rz, group, step)
            rows.append((100 * np.mean(got != out), f"{anchor} {places} places, k{step}, "
                         f"groups of {group}, store {'RZ' if rz else 'RN'}"))
        for anchor, run in itertools.product(("value", "expsum"), (None, 64, 128, 256)):
            got = model(av, bv, 13, anchor, False, sum14=True, run=run)
            rows.append((100 * np.mean(got != out), f"{anchor} 13 places, k32, sum to 14 bits, "
                         f"promoted every {run or 'never'}"))
        rows.sort()
        old = next(r for r in rows if r[1] == OLD)  # formats.window_step before 8c3d6ba
        fp32 = next(r for r in rows if r[1].startswith("FP32"))
        print(f"{key}: " + "; ".join(f"{share:.1f}% {name}" for share, name in rows[:3])
              + f"; old model {old[0]:.1f}%; FP32 sums {fp32[0]:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
