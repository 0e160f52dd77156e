"""The ``harness`` command line.

Exit status: 0 when the command did what was asked and everything it judged passed; 1 when it
ran and something it judged did not pass (a kernel failed its checks, faulted, hung, cannot
compile or cannot launch; the occupancy calculators disagree); 2 for bad input (arguments, a
kernel name, a spec, a file or folder that cannot be read or written), refused in one line
before a GPU is looked for; 3 when the command needs a GPU and none is found (it says so in one
line, after whatever it could do without one); 4 when the GPU, its driver or a CUDA library
failed a call in this process (a fault, memory exhausted, in ceiling, energy, launch or
occupancy; a kernel that faults in a worker is a result, status 1); 130 when interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import bench, kernels, profile, reports
from harness.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_DEVICE,
    EXIT_INTERRUPTED,
    EXIT_NO_GPU,
    WIDE_COMMANDS,
    check_options,
    wide_flag,
)
from harness.errors import DeviceError, HarnessError, NoGpu

_GROUPS = (kernels, bench, profile, reports)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="harness", description="Compile, check, time and report GEMM kernels against "
        "cuBLAS.", epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel-dir", action="append", type=Path, metavar="DIR",
                        help="a folder of kernel files, added to the project's cu/ and ptx/ "
                             "(repeatable); a kernel file's path works as a KERNEL too")
    parser.add_argument("--no-builtin", action="store_true",
                        help="leave the project's own kernels out (only --kernel-dir folders "
                             "and paths)")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in _GROUPS:
        group.add_parsers(sub)
    for command in WIDE_COMMANDS:
        wide_flag(sub.choices[command])
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line (and the exit status of bad input)."""

    def error(self, message: str):
        hint = f"`{self.prog} --help` lists the arguments"
        if message.startswith("unrecognized") and any(
                flag in message for flag in ("--kernel-dir", "--no-builtin")):
            hint = "--kernel-dir and --no-builtin go before the command: harness --no-builtin list"
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} ({hint})\n")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        check_options(args)
        return args.run(args)
    except NoGpu as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return EXIT_NO_GPU
    except DeviceError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return EXIT_DEVICE
    except HarnessError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # a file the arguments name that cannot be read or written
        where = f": {exc.filename}" if exc.filename else ""
        print(f"harness: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("harness: interrupted; results so far are in the JSON-lines file", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
