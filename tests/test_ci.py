"""CI runs the README's install and test commands as printed: ``.ci/run`` reads them from
README.md (``.ci/readme_commands.py``), so that a README command cannot change without CI
running it, and runs no install or pytest command of its own besides the non-editable smoke
install."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".ci" / "run"


def _reader():
    spec = importlib.util.spec_from_file_location("readme_commands",
                                                  ROOT / ".ci" / "readme_commands.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_holds_the_commands_ci_runs():
    reader = _reader()
    text = (ROOT / "README.md").read_text()
    install = reader.commands(text, "install")
    tests = reader.commands(text, "tests")
    assert any(c.startswith("python3 -m venv .venv") for c in install), install
    assert any("pip install -e '.[test]'" in c for c in install), install
    pytest_runs = [c for c in tests if "-m pytest" in c]
    assert pytest_runs, tests
    # the README promises the suite's time on 2 cores: its command runs in parallel
    assert all(re.search(r"-n (auto|\d+)", c) for c in pytest_runs), pytest_runs
    # the GPU host's commands (a subsection of Install) are not CI's
    assert not any("--target" in c for c in install)


def test_ci_runs_what_the_readme_says_and_nothing_of_its_own():
    text = CI.read_text()
    assert 'INSTALL=$(readme install)' in text and 'TESTS=$(readme tests)' in text
    assert '<<<"$INSTALL"' in text and '<<<"$TESTS"' in text
    code = [line.split("#", 1)[0] for line in text.splitlines()]
    # the suite and the editable install come from the README only
    assert not [c for c in code if "pytest" in c], "CI runs a pytest command of its own"
    assert not [c for c in code if "install -e" in c], "CI runs an install of its own"
    # ruff from the README's venv (its `test` extra), not whatever the base interpreter has
    assert '"$lint" -m ruff check harness tests experiments' in text
    assert 'lint="$src/.venv/bin/python3"' in text
    for python in ("3.11", "3.12", "3.13"):
        assert python in text


def test_a_changed_readme_command_is_the_command_ci_runs(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Install\n\nprose\n\n    python3 -m venv v && . v/bin/activate\n"
                      "    # a comment\n    pip install -e .\n\n### GPU host\n\n    not this\n\n"
                      "## Tests\n\n```bash\npython3 -m pytest -n 3\n```\n\n## Layout\n\n"
                      "    nor this\n")
    run = [sys.executable, str(ROOT / ".ci" / "readme_commands.py")]
    install = subprocess.run([*run, "install", str(readme)], capture_output=True, text=True,
                             check=True).stdout
    tests = subprocess.run([*run, "tests", str(readme)], capture_output=True, text=True,
                           check=True).stdout
    assert install.splitlines() == ["python3 -m venv v && . v/bin/activate", "pip install -e ."]
    assert tests.splitlines() == ["python3 -m pytest -n 3"]


@pytest.mark.parametrize(("text", "match"), [
    ("# x\n\n## Tests\n\n    pytest\n", "no '## Install' section"),
    ("# x\n\n## Install\n\nprose only\n\n## Tests\n\n    pytest\n",
     "'## Install' section holds no commands"),
])
def test_a_readme_without_the_commands_stops_ci(text, match):
    with pytest.raises(SystemExit, match=match):
        _reader().commands(text, "install")
