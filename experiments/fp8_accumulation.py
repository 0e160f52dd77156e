"""What the H100's tensor cores keep when they accumulate FP8 products (issue 36): a probe of
wgmma.mma_async m64n8k32 with e4m3 (and e5m2) operands and an FP32 accumulator.

Run on a GPU from the project root with PYTHONPATH set: python3 experiments/fp8_accumulation.py.
Without a GPU it compiles the probes (nvJitLink, sm_90a) and prints the expected values only.

Every operand is uniform where the layout could matter: B's shared memory holds one byte
everywhere, and every thread's four A registers hold the same 32-bit word, so each row of A
holds the word's four bytes eight times (a row's 32 k values are eight words of its threads:
wgmma's 8-bit A fragments keep four consecutive k of one row in each register). Whatever the
fragment layout, every element of D is then C + steps x b x 8 x (the word's four bytes added),
which float64 gives exactly; what the tensor core gives instead says what it dropped:

- ``products``: C = 0, one wgmma, the word [BIG, SMALL, SMALL, SMALL]: 8 BIG products and 24
  SMALL ones in one instruction; SMALL's exponent is lowered until it no longer counts. The
  products are aligned to the largest and summed in a fixed-point window; how far below the
  largest a product still counts is that window.
- ``accumulator``: C = 2^m, every product 1 (32 per instruction): where 2^m + 32 stops being
  exact, the window that adds the products to C.
- ``c_low_bits``: C = 1 + 2^-q and 32 products of 2^-12: whether C's own bits below the
  window are kept or truncated with the products'.
- ``steps``: C = 0, products 1, 2^s instructions in a row: the running FP32 sum, exact in FP32
  up to 2^29 (ulp 2^6 > 32 beyond).
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import numpy as np

KINDS = {"e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}
"""exponent bits, mantissa bits, bias (OCP FP8: e4m3 has no infinity, e5m2 is IEEE-like)."""

PTX = """
.version 8.0
.target sm_90a
.address_size 64

.visible .entry fp8_probe_{kind}(
    .param .u64 p_out,
    .param .u32 p_a,
    .param .u32 p_b,
    .param .f32 p_c,
    .param .u32 p_steps
)
.maxntid 128, 1, 1
{{
    .reg .pred  %p, %acc;
    .reg .b32   %r<10>, %a<4>;
    .reg .f32   %d<4>;
    .reg .b64   %rd<4>, %db;
    .shared .align 1024 .b8 bsm[4096];

    ld.param.u64    %rd1, [p_out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32    %r1, [p_a];
    ld.param.u32    %r2, [p_b];
    ld.param.f32    %d0, [p_c];
    ld.param.u32    %r3, [p_steps];
    mov.u32         %r4, %tid.x;
    mov.u32         %r5, bsm;
    mad.lo.u32      %r6, %r4, 4, %r5;
{fill}
    fence.proxy.async.shared::cta;
    bar.sync        0;
    mov.b32         %a0, %r1;
    mov.b32         %a1, %r1;
    mov.b32         %a2, %r1;
    mov.b32         %a3, %r1;
    mov.f32         %d1, %d0;
    mov.f32         %d2, %d0;
    mov.f32         %d3, %d0;
    // B descriptor, no swizzle: start >> 4, leading byte offset 128 >> 4, stride byte offset
    // 256 >> 4; B is one byte everywhere, so any address in bsm reads the same
    shr.u32         %r7, %r5, 4;
    and.b32         %r7, %r7, 0x3FFF;
    or.b32          %r7, %r7, 0x80000;
    mov.b64         %db, {{%r7, 16}};
    setp.eq.u32     %acc, %r3, %r3;
    setp.eq.u32     %p, %r3, 0;
    @%p bra         $STORE;
$LOOP:
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n8k32.f32.{kind}.{kind} {{%d0, %d1, %d2, %d3}},
        {{%a0, %a1, %a2, %a3}}, %db, %acc, 1, 1;
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
    sub.u32         %r3, %r3, 1;
    setp.ne.u32     %p, %r3, 0;
    @%p bra         $LOOP;
$STORE:
    mul.wide.u32    %rd2, %r4, 16;
    add.u64         %rd3, %rd1, %rd2;
    st.global.v4.f32 [%rd3], {{%d0, %d1, %d2, %d3}};
    ret;
}}
"""


def ptx(kind: str) -> str:
    fill = "\n".join(f"    st.shared.b32   [%r6 + {512 * i}], %r2;" for i in range(8))
    return PTX.format(kind=kind, fill=fill)


def value(byte: int, kind: str) -> float:
    """The exact value of an FP8 byte."""
    e_bits, m_bits, bias = KINDS[kind]
    sign = -1.0 if byte & 0x80 else 1.0
    e = (byte >> m_bits) & ((1 << e_bits) - 1)
    m = byte & ((1 << m_bits) - 1)
    if e == 0:
        return sign * m / (1 << m_bits) * 2.0 ** (1 - bias)
    return sign * (1 + m / (1 << m_bits)) * 2.0 ** (e - bias)


def power(e: int, kind: str) -> int:
    """The byte of 2^e (normal or subnormal); ValueError where the format has none."""
    e_bits, m_bits, bias = KINDS[kind]
    top = (1 << e_bits) - (2 if kind == "e5m2" else 1)  # e5m2's top exponent: inf/NaN
    if 1 <= e + bias <= top:
        return (e + bias) << m_bits
    shift = 1 - bias - e  # subnormal: m / 2^m_bits x 2^(1 - bias)
    if 1 <= shift <= m_bits:
        return 1 << (m_bits - shift)
    raise ValueError(f"2^{e} is not a {kind} value")


def word(*bytes_: int) -> int:
    return sum(b << (8 * i) for i, b in enumerate(bytes_))


def expected(a_bytes, b_byte: int, c: float, steps: int, kind: str) -> float:
    """Every element of D in float64: C + steps x b x 8 x (the word's bytes added)."""
    row = 8 * sum(value(x, kind) for x in a_bytes)
    return c + steps * value(b_byte, kind) * row


def cases(kind: str) -> list[dict]:
    one = power(0, kind)
    out = []
    big = 8 if kind == "e4m3" else 8
    lowest = -9 if kind == "e4m3" else -16
    for s in range(0, lowest - 1, -1):  # products: 8 x 2^big and 24 x 2^s in one instruction
        out.append({"probe": "products", "a": [power(big, kind)] + [power(s, kind)] * 3,
                    "b": one, "c": 0.0, "steps": 1, "small_exp": s, "big_exp": big})
    for s in range(0, lowest - 1, -1):  # the same with BIG = 1
        out.append({"probe": "products", "a": [one] + [power(s, kind)] * 3, "b": one,
                    "c": 0.0, "steps": 1, "small_exp": s, "big_exp": 0})
    for m in range(4, 31):  # C = 2^m plus 32 products of 1
        out.append({"probe": "accumulator", "a": [one] * 4, "b": one, "c": 2.0 ** m,
                    "steps": 1, "c_exp": m})
    for m in range(-20, 1):  # C = 1 plus 32 products of 2^m / 32 ... as bytes allow
        try:
            small = power(m, kind)
        except ValueError:
            continue
        out.append({"probe": "accumulator_small", "a": [small] * 4, "b": one, "c": 1.0,
                    "steps": 1, "product_exp": m})
    tiny = power(-6, kind)  # 32 products of 2^-12 (2^-7 in all) onto C = 1 + 2^-q: are C's
    for q in range(8, 24):  # own bits below the window kept, or truncated with the products'?
        out.append({"probe": "c_low_bits", "a": [tiny] * 4, "b": tiny, "c": 1.0 + 2.0 ** -q,
                    "steps": 1, "c_low_exp": -q})
    for s in range(0, lowest - 1, -1):  # mixed signs: 8 x 2^big and 24 x -2^s; dropped
        out.append({"probe": "mixed_signs", "a": [power(big, kind)] + [power(s, kind) | 0x80] * 3,
                    "b": one, "c": 0.0, "steps": 1, "small_exp": s, "big_exp": big})
    for q in range(8, 24):  # C = -(1 + 2^-q) plus 32 products of 2^-12: C's low bits, negative
        out.append({"probe": "c_negative", "a": [tiny] * 4, "b": tiny, "c": -(1.0 + 2.0 ** -q),
                    "steps": 1, "c_low_exp": -q})
    for s in (0, 4, 8, 12, 16, 20):  # 2^s instructions of 32 products of 1 in a row
        out.append({"probe": "steps", "a": [one] * 4, "b": one, "c": 0.0, "steps": 1 << s,
                    "steps_exp": s})
    return out


def run(kind: str, launch) -> list[dict]:
    rows = []
    for case in cases(kind):
        want = expected(case["a"], case["b"], case["c"], case["steps"], kind)
        got = launch(word(*case["a"]), word(*[case["b"]] * 4), case["c"], case["steps"])
        values = sorted(set(float(v) for v in got))
        rows.append({**case, "kind": kind, "expected": want, "got": values,
                     "exact": values == [float(np.float32(want))]
                     and float(np.float32(want)) == want, **models(case, kind)})
    return rows


def models(case: dict, kind: str) -> dict:
    """The window's model of the case (formats.window_step), its terms truncated toward zero
    and toward minus infinity: which of the two the H100 gives (a single instruction's cases
    only)."""
    from harness.kinds.gemm.fp8.formats import window_step

    if case["steps"] != 1:
        return {}
    products = np.array([value(x, kind) * value(case["b"], kind) for x in case["a"]] * 8)
    c = np.array([case["c"]], dtype=np.float32)
    return {f"model_{name}": float(window_step(c, products[None, :], floor=floor)[0])
            for name, floor in (("zero", False), ("floor", True))}


def main() -> int:
    from harness.compiler.compile import compile_ptx

    cubins = {kind: compile_ptx(ptx(kind), f"fp8_probe_{kind}.ptx", "sm_90a") for kind in KINDS}
    print(f"compiled: {', '.join(f'{k} {len(c)} B' for k, c in cubins.items())}")
    from harness.gpu.driver import gpu_status

    status = gpu_status()
    if not status.found:
        for kind in KINDS:
            for case in cases(kind):
                print(kind, case["probe"], expected(case["a"], case["b"], case["c"],
                                                    case["steps"], kind))
        print(f"no GPU ({status.reason}): expected values only")
        return 0
    from harness.gpu.driver import Buffer, Device, LaunchShape, Module, Stream

    rows = []
    with Device(0):
        stream = Stream()
        out = Buffer(128 * 4 * 4)
        for kind, cubin in cubins.items():
            function = Module(cubin, f"fp8_probe_{kind}").function(f"fp8_probe_{kind}")

            def launch(a: int, b: int, c: float, steps: int, function=function):
                args = (ctypes.c_uint64(out.address), ctypes.c_uint32(a), ctypes.c_uint32(b),
                        ctypes.c_float(c), ctypes.c_uint32(steps))
                function.launch(LaunchShape((1, 1, 1), (128, 1, 1), 0), stream, args)
                stream.synchronize("fp8 probe")
                return out.download(np.float32, (512,), stream)

            rows += run(kind, launch)
        out.close()
    for r in rows:
        key = {k: r[k] for k in ("small_exp", "big_exp", "c_exp", "product_exp", "steps_exp",
                                 "c_low_exp") if k in r}
        got = r["got"][0] if len(r["got"]) == 1 else r["got"]
        lost = "" if r["exact"] else f"  (off by {got - r['expected']:.6g})" \
            if len(r["got"]) == 1 else "  (elements differ)"
        which = [name for name in ("zero", "floor") if r.get(f"model_{name}") == got]
        model = f"  model: toward {' and '.join(which)}" if which else (
            "  model: neither" if "model_zero" in r else "")
        print(f"{r['kind']} {r['probe']:<17} {json.dumps(key):<36} expected "
              f"{r['expected']:.10g}  got {got}{'  exact' if r['exact'] else lost}{model}")
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
