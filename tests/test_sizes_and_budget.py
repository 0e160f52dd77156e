"""Issue 38: problem sizes are read one way in every command that takes ``--size`` (refused in
one line, exit 2, before any work: ``check --plan --size 0`` too), and ``harness build`` holds
a kernel to its spec's ``[budget]``."""

import argparse

import pytest

from harness.cli import _parser, main
from harness.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, check_options
from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT

NAIVE = PROJECT_ROOT / "cu" / "sgemm" / "01_naive.cu"
# what each command that takes --size needs besides it (a kernel, a report file)
SIZE_COMMANDS = {
    "build": [], "occupancy": ["01_naive"], "run": [], "check": ["01_naive", "--plan"],
    "compare": ["01_naive", "02_coalesced"], "tune": ["03_smem_tiled", "--dry-run"],
    "energy": ["01_naive"], "launch": ["01_naive"], "profile": ["01_naive"],
    "report": ["no-such-run.json"], "diff": ["old.json", "new.json"],
}


def commands_with_size() -> set[str]:
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name for name, parser in sub.choices.items()
            if any("--size" in a.option_strings for a in parser._actions)}


def test_the_table_names_every_command_that_takes_a_size():
    assert commands_with_size() == set(SIZE_COMMANDS)


@pytest.mark.parametrize("command", sorted(SIZE_COMMANDS))
@pytest.mark.parametrize("size", ["0", "-4", "1,2", "4096x", "big", "", "1,2,3,4"])
def test_a_bad_size_is_refused_in_one_line_by_every_command(command, size, capsys):
    assert main([command, *SIZE_COMMANDS[command], "--size", size]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err == f"harness: error: size {size!r} is not N or M,N,K with positive integers\n"


def test_check_plan_refuses_size_zero(capsys):
    assert main(["check", "01_naive", "--plan", "--size", "0"]) == EXIT_BAD_INPUT
    assert "size '0' is not N or M,N,K" in capsys.readouterr().err
    assert main(["check", "01_naive", "--plan", "--size", "1024", "--json"]) == EXIT_OK


def test_a_size_past_the_abi_is_refused_before_any_work(capsys):
    assert main(["check", "01_naive", "--plan", "--size", "3000000000"]) == EXIT_BAD_INPUT
    assert "M = 3000000000 exceeds 2147483647" in capsys.readouterr().err


@pytest.mark.parametrize(("given", "ok"), [
    (None, True), ("4096", True), (["1024", "512,256,128"], True), (["1024", "0"], False),
    ("1x2x3", True), ("12,,3", False)])
def test_check_options_reads_one_size_or_a_list(given, ok):
    args = argparse.Namespace(size=given)
    if ok:
        check_options(args)
    else:
        with pytest.raises(HarnessError, match=r"^size '.*' is not N or M,N,K"):
            check_options(args)


def with_budget(tmp_path, table: str):
    path = tmp_path / "fat_naive.cu"
    path.write_text(NAIVE.read_text().replace("*/", f"[budget]\n{table}\n*/", 1))
    return path


def test_build_fails_a_kernel_over_its_budget(tmp_path, capsys):
    path = with_budget(tmp_path, "max_registers = 16\nmax_spill_bytes = 0")
    assert main(["build", str(path)]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert ("- fat_naive (sm_90): over budget: registers 32 > max_registers 16 (the limits of "
            "its spec's [budget])") in out
    assert main(["build", str(path), "--json"]) == EXIT_FAILED
    assert '"status": "over budget"' in capsys.readouterr().out


def test_build_passes_a_kernel_within_its_budget(tmp_path, capsys):
    path = with_budget(tmp_path, "max_registers = 64\nmax_spill_bytes = 0\n"
                                 "min_occupancy_pct = 50")
    assert main(["build", str(path)]) == EXIT_OK
    assert "over budget" not in capsys.readouterr().out
