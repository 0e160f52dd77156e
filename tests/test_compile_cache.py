"""The compile cache heals itself and says so: an entry of another shape is compiled again with a
one-line note, never a traceback; an unusable cache is named once per process and compiling
goes on without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness.compiler import cache as cache_mod
from harness.compiler import say
from harness.compiler.compile import cache_dir, compile_kernel
from harness.kernels.registry import PROJECT_ROOT, discover, select

(NAIVE,) = select(discover(), ["01_naive"])


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(say, "_said", set())  # "once per process": per test here


def _entry() -> tuple:
    """The one cache entry's (json path, cubin path)."""
    (meta,) = cache_dir().glob("*.json")
    return meta, meta.with_suffix(".cubin")


def _notes(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("harness:")]


GOOD = {"resources": {"registers": 32, "static_smem_bytes": 0, "stack_frame_bytes": 0,
                      "spill_store_bytes": 0, "spill_load_bytes": 0, "barriers": 0,
                      "constant_bytes": 0}, "log": "", "cubin_sha256": "x", "symbol": "naive"}


@pytest.mark.parametrize(("meta", "problem"), [
    pytest.param([1, 2], "holds a JSON list where an object was expected", id="a-list"),
    pytest.param({k: v for k, v in GOOD.items() if k != "symbol"}, "has no 'symbol'",
                 id="missing-key"),
    pytest.param({**GOOD, "sass_mix": {}}, "has fields this harness does not know "
                 "('sass_mix'; another version of the harness sharing the cache?)",
                 id="newer-field"),
    pytest.param({**GOOD, "resources": {**GOOD["resources"], "tmem_bytes": 0}},
                 "has resources of another shape", id="newer-resource"),
    pytest.param({**GOOD, "resources": {**GOOD["resources"], "registers": "many"}},
                 "has resources of another shape", id="resource-not-a-count"),
    pytest.param("{\"resources\": {", "is not JSON (a write cut short?)", id="torn-json"),
    pytest.param(None, "has a cubin that does not match its hash", id="torn-cubin"),
])
def test_an_entry_of_another_shape_is_compiled_again_with_a_note(meta, problem, capsys):
    first = compile_kernel(NAIVE, "sm_90")
    meta_path, cubin_path = _entry()
    if meta is None:
        cubin_path.write_bytes(first.cubin[:100])
    else:
        meta_path.write_text(meta if isinstance(meta, str) else json.dumps(meta))
    capsys.readouterr()
    again = compile_kernel(NAIVE, "sm_90")
    assert not again.cached and again.cubin == first.cubin
    assert again.resources == first.resources
    (note,) = _notes(capsys)
    assert note.startswith(f"harness: compile cache entry {meta_path} {problem}"), note
    assert note.endswith(": compiling 01_naive for sm_90 again and replacing it")
    healed = compile_kernel(NAIVE, "sm_90")
    assert healed.cached and healed.cubin == first.cubin and not _notes(capsys)


def test_a_cache_dir_that_is_a_file_is_named_once(tmp_path, monkeypatch, capsys):
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_text("")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(not_a_folder))
    built = [compile_kernel(NAIVE, "sm_90") for _ in range(2)]
    assert not any(c.cached for c in built) and built[0].cubin == built[1].cubin
    (note,) = _notes(capsys)
    assert note == (f"harness: the compile cache {not_a_folder} is a file, not a folder: "
                    "compiling without it, so every run compiles cold; set HARNESS_CACHE_DIR to "
                    "a folder that can be written")


def test_an_unwritable_cache_is_named_once_and_compiling_goes_on(monkeypatch, capsys):
    def refuse(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cache_mod.tempfile, "mkstemp", refuse)  # as a read-only folder would
    built = [compile_kernel(NAIVE, "sm_90") for _ in range(2)]
    assert not any(c.cached for c in built)
    (note,) = _notes(capsys)
    assert note.startswith(f"harness: the compile cache {cache_dir()} cannot be written "
                           "(Permission denied): compiling without it")
    assert not list(cache_dir().glob("*.tmp"))


def test_the_cli_builds_through_a_broken_cache_in_one_line(tmp_path):
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_text("")
    env = {**os.environ, "HARNESS_CACHE_DIR": str(not_a_folder), "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-m", "harness", "build", "01_naive", "02_coalesced"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if "compile cache" in line]
    assert len(notes) == 1 and "is a file, not a folder" in notes[0]
    assert "Traceback" not in proc.stderr and "01_naive" in proc.stdout
