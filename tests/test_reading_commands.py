"""The commands that read reports (report, diff, index) over every report the harness has
written: each works or says in one line what it cannot read, writes nothing unless asked, and
prints tables that fit 100 columns unless --wide; so do the tables of run, check, compare,
tune, list and the offline run."""

import hashlib
import shutil
import subprocess
import sys

import pytest
from conftest import harness_env

from harness import cli
from harness.kernels.registry import PROJECT_ROOT
from harness.report import index, tables
from harness.report.reading import load_report
from harness.report.width import WIDTH

REPORTS = PROJECT_ROOT / "reports"
COMMITTED = sorted(REPORTS.rglob("*.json")) + sorted(REPORTS.rglob("*.json.gz")) + sorted(
    REPORTS.rglob("*.jsonl"))
RUN_KINDS = ("run", "compare", "tune")


def _kind(path) -> str:
    return index.kind_of(index.report_key(path.name) or path.stem)


def _snapshot(folder) -> dict:
    """Every file under ``folder``: its size, modification time and content hash."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns,
                                         hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _lines_over(text: str, width: int = WIDTH) -> list[str]:
    return [line for line in text.splitlines() if len(line) > width]


def test_report_diff_and_index_over_every_committed_report_write_nothing(
        tmp_path, monkeypatch, capsys):
    """Over a copy of the repo's reports/: exit 0, or 2 with one line on stderr; no traceback
    (one would fail the test here); every table and line within 100 columns; no file made,
    changed or touched."""
    shutil.copytree(REPORTS, tmp_path / "reports")
    monkeypatch.chdir(tmp_path)  # relative paths, as a user types them
    before = _snapshot(tmp_path)
    refused = []
    for path in COMMITTED:
        rel = str(path.relative_to(PROJECT_ROOT))
        for args in (["report", rel], ["diff", rel, rel]):
            status = cli.main(args)
            out, err = capsys.readouterr()
            assert not _lines_over(out), (args, _lines_over(out)[:3])
            if status == 0:
                assert err == "", (args, err)
                continue
            assert status == 2 and err.startswith("harness: error: "), (args, status, err)
            assert len(err.strip().splitlines()) == 1, (args, err)
            assert _kind(path) not in RUN_KINDS, (args, err)
            refused.append(path.name)
    assert cli.main(["index", "--report-dir", "reports"]) == 0
    out, err = capsys.readouterr()
    assert not _lines_over(out) and "INDEX.md is current" in out, _lines_over(out)[:3]
    assert _snapshot(tmp_path) == before
    # what is refused is what is not a run, compare or tune report, and nothing else
    assert {_kind(p) for p in COMMITTED if p.name in refused} & set(RUN_KINDS) == set()
    assert len(refused) < len(COMMITTED)


def test_report_writes_on_asking(tmp_path, capsys):
    folder = tmp_path / "h100"
    folder.mkdir()
    run = folder / "run-20261122-132342.json"
    shutil.copy(REPORTS / "h100" / run.name, run)
    assert cli.main(["report", str(run)]) == 0
    assert "## 4096x4096x4096" in capsys.readouterr().out
    assert [p.name for p in folder.iterdir()] == [run.name]
    out_dir = tmp_path / "elsewhere"
    assert cli.main(["report", str(run), "--out-dir", str(out_dir)]) == 0
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "run-20261122-132342-ladder.md", "run-20261122-132342-ladder.png",
        "run-20261122-132342-roofline.png"]
    assert [p.name for p in folder.iterdir()] == [run.name]
    capsys.readouterr()
    assert cli.main(["report", str(run), "--write", "--size", "2048"]) == 0
    assert f"written:\n  {folder / 'run-20261122-132342-ladder.md'}\n" in capsys.readouterr().out
    assert sorted(p.name for p in folder.iterdir()) == sorted([
        "INDEX.md", run.name, "run-20261122-132342-ladder.md", "run-20261122-132342-ladder.png",
        "run-20261122-132342-roofline.png"])
    assert cli.main(["report", str(run), "--size", "5"]) == 2
    assert "no passing results at 5x5x5; it has 2048x2048x2048, 4096x4096x4096, " \
           "8192x8192x8192" in capsys.readouterr().err


@pytest.mark.parametrize(("command", "says"), [
    ("report", "nothing written"), ("report", "--write"), ("report", "--out-dir"),
    ("diff", "writes nothing"), ("index", "nothing written"), ("index", "--write")])
def test_help_says_what_a_reading_command_writes(command, says):
    out = subprocess.run([sys.executable, "-m", "harness", command, "--help"],
                         capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120).stdout
    assert says in " ".join(out.split())


def _readable() -> list:
    out = []
    for path in COMMITTED:
        if _kind(path) in RUN_KINDS:
            out.append(load_report(path))
    return out


def test_the_tables_run_compare_tune_and_check_print_fit_unless_wide():
    """Every committed run, compare and tune report's results as harness run (and tune),
    compare and check print them: within 100 columns; --wide keeps every column."""
    wider = 0
    for report in _readable():
        results = report.results
        narrow = [tables.console_table(results),
                  tables.console_table(results, tables.columns_without("precision")),
                  tables.check_table(results, width=WIDTH),
                  tables.compare_table(results, fmt="simple", width=WIDTH)]
        for text in narrow:
            assert not _lines_over(text), (report.path, _lines_over(text)[:3])
        wide = tables.console_table(results, wide=True)
        assert wide == tables.table(results)
        wider += bool(_lines_over(wide))
    assert wider  # --wide is wider than the terminal for most of them


def _command(*args, gpu=True):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=600, env=harness_env(gpu))


def test_the_offline_run_list_and_check_plan_fit_unless_wide(capsys):
    """What runs without a GPU: the offline table of harness run, harness list (per file and
    per key) and harness check --plan for every kernel."""
    offline = _command("run", gpu=False)
    assert offline.returncode == 3 and "limiter" in offline.stdout, offline.stderr
    assert not _lines_over(offline.stdout), _lines_over(offline.stdout)[:3]
    assert _lines_over(_command("run", "--wide", gpu=False).stdout)
    for args in (["list"], ["list", "--variants"], ["check", "*", "--plan"]):
        assert cli.main(args) in (0, 1)
        out = capsys.readouterr().out
        assert out and not _lines_over(out), (args, _lines_over(out)[:3])
    assert cli.main(["list", "--wide"]) == 0
    assert _lines_over(capsys.readouterr().out)
