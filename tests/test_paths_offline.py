"""Kernel paths and specs checked offline (issue 56, item 7): file names with a colon, paths
that are no regular file, includes outside the kernel's folder, py: references, and
assert_builds on a file with variants."""

from __future__ import annotations

import os
import re
import shutil
import threading
from pathlib import Path

import pytest

from harness.errors import HarnessError, SpecError
from harness.kernels.kernel_path import read_regular, split_variant
from harness.kernels.registry import PROJECT_ROOT, Registry, load_registry
from harness.kernels.spec import read_spec

FIRST = PROJECT_ROOT / "examples" / "first_kernel.cu"
TILED = PROJECT_ROOT / "cu" / "sgemm" / "03_smem_tiled.cu"


def _select(pattern: str):
    return Registry([], [], None).select([pattern])


# --- a colon in a file name -----------------------------------------------------------------

@pytest.mark.parametrize("given", ["./col:on.cu", "col:on.cu", "{dir}/col:on.cu"])
def test_a_file_whose_name_holds_a_colon_is_named_by_its_path(tmp_path, monkeypatch, given):
    shutil.copy(FIRST, tmp_path / "col:on.cu")
    monkeypatch.chdir(tmp_path)
    (kernel,) = _select(given.format(dir=tmp_path))
    assert kernel.spec.path.name == "col:on.cu" and kernel.variant is None


def test_a_colon_file_with_variants_takes_a_variant_after_its_name(tmp_path, monkeypatch):
    shutil.copy(TILED, tmp_path / "ti:led.cu")
    monkeypatch.chdir(tmp_path)
    assert [k.variant for k in _select("ti:led.cu")] == ["t16", "t32"]
    assert [k.variant for k in _select("./ti:led.cu:t32")] == ["t32"]
    with pytest.raises(HarnessError, match=r"ti:led.cu has no variant 't64'"):
        _select("ti:led.cu:t64")


def test_split_variant_prefers_what_exists(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert split_variant("my.cu:t16") == ("my.cu", "t16")
    assert split_variant("stem:variant") == ("stem", "variant")
    (tmp_path / "a:b.cu").write_text("")
    assert split_variant("a:b.cu") == ("a:b.cu", "")
    assert split_variant("a:b.cu:v") == ("a:b.cu", "v")


# --- paths that are no regular file ---------------------------------------------------------

def test_a_folder_named_as_a_kernel_says_so(tmp_path):
    shutil.copy(FIRST, tmp_path / "first_kernel.cu")
    with pytest.raises(HarnessError, match=r"is a directory: name a \.cu or \.ptx file in it "
                                           r"\(it holds first_kernel\.cu\)"):
        _select(str(tmp_path))
    (tmp_path / "d.cu").mkdir()
    with pytest.raises(HarnessError, match=r"d\.cu is a directory"):
        _select(str(tmp_path / "d.cu"))


def test_a_symlink_loop_named_as_a_kernel_says_so(tmp_path):
    os.symlink(tmp_path / "b.cu", tmp_path / "a.cu")
    os.symlink(tmp_path / "a.cu", tmp_path / "b.cu")
    with pytest.raises(HarnessError, match=r"a\.cu is a symbolic link that leads back to "
                                           r"itself \(a loop\)"):
        _select(str(tmp_path / "a.cu"))


def test_a_dangling_symlink_named_as_a_kernel_says_where_it_points(tmp_path):
    os.symlink(tmp_path / "gone.cu", tmp_path / "k.cu")
    with pytest.raises(HarnessError, match=r"k\.cu is a symbolic link to .*gone\.cu, which does "
                                           "not exist"):
        _select(str(tmp_path / "k.cu"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
def test_a_fifo_is_refused_and_never_waited_on(tmp_path):
    fifo = tmp_path / "f.cu"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def attempt():
        for read in (lambda: _select(str(fifo)), lambda: read_spec(fifo),
                     lambda: load_registry([tmp_path], None)):
            try:
                outcome.append(read())
            except (HarnessError, SpecError) as exc:
                outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # free the blocked reader before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO named as a kernel blocked")
    by_path, by_spec, folder = outcome
    assert "is a FIFO (named pipe), not a regular file" in str(by_path)
    assert "cannot read the kernel file: it is a FIFO (named pipe)" in str(by_spec)
    assert [b.path.name for b in folder.broken] == ["f.cu"]


def test_read_regular_refuses_a_folder(tmp_path):
    with pytest.raises(OSError, match="it is a directory, not a regular file"):
        read_regular(tmp_path)
    (tmp_path / "x").write_bytes(b"abc")
    assert read_regular(tmp_path / "x") == b"abc"


def test_a_missing_path_keeps_its_message(tmp_path):
    with pytest.raises(HarnessError, match=r"no kernel file .*nothere\.cu: expected the path"):
        _select(str(tmp_path / "nothere.cu"))


# --- assert_builds on a file with variants --------------------------------------------------

def test_assert_builds_builds_every_variant_and_lists_the_failures():
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs NVRTC (cuda-bindings)")
    from harness.testing import assert_builds

    rows = assert_builds(str(TILED))
    assert [r["kernel"] for r in rows] == ["03_smem_tiled:t16", "03_smem_tiled:t32"]
    assert assert_builds(f"{TILED}:t16")["kernel"] == "03_smem_tiled:t16"
    with pytest.raises(AssertionError, match=r"2 of 2 variants failed: 03_smem_tiled:t16 "
                                             r"\(sm_90\) is over its budget"):
        assert_builds(str(TILED), max_registers=1)


# --- a py: reference, checked without running it --------------------------------------------

def _buffers_kernel(tmp_path: Path, reference: str) -> Path:
    from test_buffers import HEAD

    kernel = tmp_path / "k.cu"
    text = HEAD.format(extra="", buffers="").replace('reference = "copy"',
                                                      f'reference = "{reference}"')
    kernel.write_text(text)
    return kernel


def test_a_py_reference_without_its_file_is_a_spec_error(tmp_path):
    kernel = _buffers_kernel(tmp_path, "py:ref")
    with pytest.raises(SpecError, match=r"reference = 'py:ref' lives in k\.py beside the kernel, "
                                        "which does not exist"):
        read_spec(kernel)


def test_a_py_reference_naming_no_function_is_a_spec_error_and_runs_nothing(tmp_path):
    kernel = _buffers_kernel(tmp_path, "py:ref")
    marker = tmp_path / "ran"
    (tmp_path / "k.py").write_text(f"open({str(marker)!r}, 'w').close()\n"
                                   "def other(x, N):\n    return {'out': x}\n")
    with pytest.raises(SpecError, match=r"k\.py defines no 'ref' at its top level \(its "
                                        r"functions: other\)"):
        read_spec(kernel)
    assert not marker.exists()
    (tmp_path / "k.py").write_text("def ref(x, N):\n    return {'out': x}\n")
    assert read_spec(kernel).buffers.reference == "py:ref"


# --- includes outside the kernel's folder ---------------------------------------------------

def test_includes_outside_the_kernels_folder_are_refused_unread(tmp_path):
    from harness.compiler.include_check import check_includes
    from harness.errors import CompileError

    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    (tmp_path / "secret.h").write_text("SECRET LINE\n")
    (home / "sub" / "ok.cuh").write_text('#include "inner.cuh"\n')
    (home / "sub" / "inner.cuh").write_text("\n")
    kernel = home / "k.cu"
    kernel.write_text('#include "sub/ok.cuh"\n#include <cstdint>\n')
    check_includes(kernel, ())
    for line, says in (('#include "/etc/passwd"', 'k.cu:2: #include "/etc/passwd" names an '
                                                 "absolute path"),
                       ('#include "../secret.h"', "reaches outside the kernel's folder"),
                       ("#include HEADER", "an include through a macro cannot be checked")):
        kernel.write_text(f'#include "sub/ok.cuh"\n{line}\n')
        with pytest.raises(CompileError, match=re.escape(says)) as caught:
            check_includes(kernel, ())
        assert "SECRET" not in str(caught.value) and "root:" not in str(caught.value)
    (home / "sub" / "inner.cuh").write_text('#include "../../secret.h"\n')
    kernel.write_text('#include "sub/ok.cuh"\n')
    with pytest.raises(CompileError, match=r"inner\.cuh:1: #include \"\.\./\.\./secret\.h\" "
                                           "reaches outside"):
        check_includes(kernel, ())
