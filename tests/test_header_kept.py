"""Issue 56 item 6: a kernel kept in a header beside its host code, unmodified. The .cu holds
only the spec and the #include; the entry is found in the header, the header's host code is
left out in memory for NVRTC, and the header on disk is never changed."""

import hashlib

import pytest
from conftest import FIXTURE_KERNELS

from harness.compiler.offline import build_row
from harness.errors import SpecError
from harness.kernels.includes import device_source
from harness.kernels.registry import kernels_in, source_sha256
from harness.kernels.spec import read_spec

FOLDER = FIXTURE_KERNELS / "header_kept"
KERNEL, HEADER = FOLDER / "header_kept.cu", FOLDER / "tiled.cuh"


def test_a_kernel_in_a_header_builds_and_the_header_is_untouched():
    before = hashlib.sha256(HEADER.read_bytes()).hexdigest()
    [kernel] = kernels_in(read_spec(KERNEL))
    row = build_row(kernel, "sm_90a")
    assert row["status"] == "ok", row.get("message")
    assert row["registers"] > 0
    assert hashlib.sha256(HEADER.read_bytes()).hexdigest() == before


def test_the_headers_host_code_is_left_out_in_memory_with_its_lines():
    source = KERNEL.read_text()
    part = device_source(source, str(KERNEL), default_device=True)
    assert "tiledGemm" in part.text and "cudaMalloc" not in part.text
    assert "cuTensorMapEncodeTiled" not in part.text and "#pragma once" not in part.text
    assert f'#line 1 "{HEADER}"' in part.text
    note = part.note()
    assert "tiled.cuh lines" in note and "make_map" in note and "run_tiled" in note


def test_an_edited_header_is_an_edited_kernel(tmp_path):
    (tmp_path / "k.cu").write_text(KERNEL.read_text())
    (tmp_path / "tiled.cuh").write_text(HEADER.read_text())
    before = source_sha256(tmp_path / "k.cu")
    (tmp_path / "tiled.cuh").write_text(HEADER.read_text() + "// edited\n")
    assert source_sha256(tmp_path / "k.cu") != before


def test_an_entry_in_no_file_names_the_files_searched(tmp_path):
    (tmp_path / "tiled.cuh").write_text(HEADER.read_text())
    path = tmp_path / "k.cu"
    path.write_text(KERNEL.read_text().replace("HK::tiledGemm<TILE>", "HK::otherGemm<TILE>"))
    with pytest.raises(SpecError, match=r"entry symbol 'HK::otherGemm<TILE>' is not defined in "
                                        r"the file or the files it includes \(searched: .*k\.cu, "
                                        r".*tiled\.cuh\)"):
        read_spec(path)
