"""Fill the compile cache and the SASS-family cache for every kernel variant and every point of
the named kernels' [tune] spaces, on this host for this GPU's architecture, before a
comparison of wall times (issue 24: one GPU against several). A run pays a cold compile and a
disassembly (most of a second each) once per kernel on a host; whichever configuration ran
first would pay them all.

    python3 experiments/warm_caches.py [--arch sm_90] [--tune 10_hoisted ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

from harness.compiler.compile import compile_kernel
from harness.errors import HarnessError
from harness.kernels.registry import Kernel, load_registry
from harness.kinds.gemm.screening import instruction_family
from harness.run import tune


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--tune", nargs="*", default=[], metavar="STEM")
    parser.add_argument("--jobs", type=int, default=8)
    args = parser.parse_args()
    registry = load_registry()
    kernels = [k.for_arch(args.arch) for k in registry.kernels]
    for stem in args.tune:
        spec = registry.select([stem])[0].spec
        base = Kernel(spec.stem, spec, tuple(sorted(spec.params.items())))
        kernels += [p.for_arch(args.arch) for p in
                    tune.points(base, {n: list(v) for n, v in spec.tune.items()})]

    def warm(kernel: Kernel) -> str:
        try:
            compiled = compile_kernel(kernel, args.arch)
        except HarnessError as exc:
            return f"{kernel.name}: not compiled ({str(exc).splitlines()[0][:80]})"
        return f"{kernel.name}: {instruction_family(SimpleNamespace(compiled=compiled))}"

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        lines = list(pool.map(warm, kernels))
    print("\n".join(lines))
    print(f"{len(kernels)} kernels compiled and disassembled in "
          f"{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
