"""Host set-up (issue 22 item 3): ``<kernel>.py`` beside a kernel gives the values and the
workspace contents a declaration cannot; its errors name the file and line. CPU only."""

import ctypes
from pathlib import Path

import numpy as np
import pytest

from harness.bench.result import signature_text
from harness.errors import LaunchError, SpecError
from harness.kernels import hostsetup
from harness.kernels.registry import Kernel, source_sha256
from harness.kernels.signature import host_keys, pack, parse_signature
from harness.kernels.spec import read_spec
from harness.kinds.gemm import gemm

SPEC = """/* harness
entry = "k"
summary = "A kernel with host set-up."
precision = "bf16"
c_type = "fp32"
min_arch = "sm_90"
block = ["128"]
grid = ["2 * (SMS // 2)"]
signature = ["M", "N", "K", "A", "B", "C",
             { name = "workspace", bytes = "4 * cdiv(M, BM) * cdiv(N, BM)", fill = "host" },
             { host = "tiles", type = "i32" }]
[params]
BM = 128
*/
extern "C" __global__ void k() {}
"""

SETUP = """import numpy as np


def setup(launch):
    tiles_m, tiles_n = -(-launch.m // launch.params["BM"]), -(-launch.n // launch.params["BM"])
    order = [i * tiles_n + j for j in range(tiles_n) for i in range(tiles_m)]  # column order
    return {"workspace": np.asarray(order, np.int32), "tiles": len(order)}
"""


def write(tmp_path: Path, setup: str | None = SETUP, spec: str = SPEC) -> Path:
    path = tmp_path / "k.cu"
    path.write_text(spec)
    if setup is not None:
        path.with_suffix(".py").write_text(setup)
    return path


def launch_of(m=300, n=260, k=64, **kw):
    return hostsetup.HostLaunch(m, n, k, params={"BM": 128}, workspace_bytes=kw.pop("ws", 4096),
                                **kw)


def test_host_entries_parse_and_pack_from_the_host_values():
    sig = parse_signature(["A", "B", "C", {"host": "tiles", "type": "i64"},
                           {"name": "workspace", "bytes": "64", "fill": "host"}],
                          frozenset({"M", "N", "K"}))
    assert host_keys(sig) == ("tiles", "workspace")
    args = pack(sig, {"A": 1, "B": 2, "C": 3, "host:tiles": 12, "workspace": 0x50})
    assert type(args[3]) is ctypes.c_int64 and args[3].value == 12
    assert "i64 host tiles" in signature_text(sig) and "workspace (host)" in signature_text(sig)
    with pytest.raises(SpecError, match="no value for host entry 'tiles'"):
        pack(sig, {"A": 1, "B": 2, "C": 3, "workspace": 0x50})


@pytest.mark.parametrize("entry, match", [
    ({"host": "tiles", "bytes": "4"}, r"host and type, found also bytes"),
    ({"host": "3x"}, r"identifier other than workspace"),
    ({"host": "tiles", "type": "ptr"}, r"host value type must be one of"),
])
def test_bad_host_entries_are_refused(entry, match):
    with pytest.raises(SpecError, match=match):
        parse_signature(["A", "B", "C", entry], frozenset({"M", "N", "K"}))
    with pytest.raises(SpecError, match="appears twice"):
        parse_signature(["A", "B", "C", {"host": "t"}, {"host": "t"}], frozenset())


def test_a_kernel_without_its_setup_file_is_a_spec_error(tmp_path):
    path = write(tmp_path, setup=None)
    with pytest.raises(SpecError, match=r"k\.py is not beside k\.cu.*def setup\(launch\)"):
        read_spec(path)


def test_setup_returns_the_schedule_and_the_values(tmp_path):
    path = write(tmp_path)
    spec = read_spec(path)
    out = hostsetup.run_setup(path, host_keys(spec.signature), launch_of())
    order = np.frombuffer(out.workspace, np.int32)
    assert sorted(order.tolist()) == list(range(9)) and order[:3].tolist() == [0, 3, 6]
    assert out.values == {"tiles": 9}


@pytest.mark.parametrize("setup, match", [
    ("def setup(launch):\n    return {'workspace': b''}\n",
     r"expects exactly .* \(missing tiles\)"),
    ("def setup(launch):\n    return {'workspace': b'', 'tiles': 1, 'x': 2}\n",
     r"not in the signature: x"),
    ("def setup(launch):\n    return [1]\n", r"must return a dict"),
    ("def setup(launch):\n    return {'workspace': b'', 'tiles': 'many'}\n",
     r"\['tiles'\] must be a number, got str"),
    ("def setup(launch):\n    return {'workspace': bytes(8192), 'tiles': 1}\n",
     r"is 8192 bytes at 300x260x64; the signature declares 4096"),
    ("import numpy\n\n\ndef setup(launch):\n    x = 1\n    return 1 // (x - 1)\n",
     r"k\.py:6: setup\(\) at 300x260x64: ZeroDivisionError"),
    ("def setup(launch:\n", r"k\.py:1: host set-up does not parse"),
    ("raise RuntimeError('no')\n", r"k\.py:1: importing the host set-up: RuntimeError: no"),
    ("def set_up(launch):\n    return {}\n", r"defines no function setup\(launch\)"),
])
def test_setup_errors_name_the_file_and_line(tmp_path, setup, match):
    path = write(tmp_path, setup=SETUP)
    spec = read_spec(path)
    path.with_suffix(".py").write_text(setup)
    with pytest.raises(SpecError, match=match):
        hostsetup.run_setup(path, host_keys(spec.signature), launch_of())


def test_host_values_reach_the_launch_arguments_and_errors_become_launch_errors(tmp_path):
    path = write(tmp_path)
    kernel = Kernel("k", read_spec(path), (("BM", 128),))
    device = type("D", (), {"sm_count": 132, "name": "GPU", "arch": type("A", (), {
        "name": "sm_90"})()})()
    shape = gemm.LaunchShape((132, 1, 1), (128, 1, 1), 0)
    found = gemm.host_values(kernel, device, shape, 300, 260, 64, {"A": 1, "B": 2, "C": 3},
                            workspace_bytes=4 * 3 * 3)
    args = gemm.launch_arguments(kernel, 300, 260, 64, 1.0, 0x10, 0x20, 0.0, 0x30,
                                 workspace=0x40, host=found.values)
    assert [a.value for a in args] == [300, 260, 64, 0x10, 0x20, 0x30, 0x40, 9]
    assert gemm.declared_launch_problems(kernel) == []
    path.with_suffix(".py").write_text("def setup(launch):\n    return {'workspace': b'', "
                                       "'tiles': 2.5}\n")
    with pytest.raises(LaunchError, match=r"'tiles' is 2\.5; the signature declares it i32"):
        gemm.host_values(kernel, device, shape, 300, 260, 64, {}, workspace_bytes=36)


def test_the_setup_file_is_part_of_the_source_hash(tmp_path):
    path = write(tmp_path)
    before = source_sha256(path)
    path.with_suffix(".py").write_text(SETUP + "\n# edited\n")
    assert source_sha256(path) != before


def test_a_report_names_each_declared_signature_and_layouts(tmp_path):
    """The markdown report of a run names a declared kernel's signature and layouts."""
    import dataclasses

    from harness.bench.result import KernelInfo, Result
    from harness.kinds.gemm import report

    info = KernelInfo("abt", "abt.cu", "bf16", layout_b="col", c_type="bf16",
                      signature="ptr A, ptr B, ptr C, i32 M, i32 N, i32 K",
                      layouts="A row, B col, C row")
    plain = dataclasses.replace(info, name="plain", signature="", layouts="A row, B row, C row")
    spread = dataclasses.replace(plain, name="spread",
                                 launch_attributes="cluster 2x1x1 (spec), block order spread")
    lines = report._signature_lines([Result.of(info, 64, 64, 64), Result.of(plain, 64, 64, 64),
                                     Result.of(spread, 64, 64, 64)])
    assert lines == ["- kernels in their own signatures or launch attributes (parameters in "
                     "order; layouts; attributes):",
                     "- abt: `(ptr A, ptr B, ptr C, i32 M, i32 N, i32 K)`; A row, B col, C row",
                     "- spread: `(the common ABI)`; A row, B row, C row; launched with "
                     "cluster 2x1x1 (spec), block order spread"]


def test_setup_runs_in_its_own_process_and_hands_back_data_only(tmp_path):
    """A set-up that reaches into the harness (replacing the comparison, say) changes its own
    process, not the one that checks and times (issue 33 item 7)."""
    import os

    from harness.kinds.gemm import comparison
    path = write(tmp_path, setup=SETUP.replace(
        "    return {", "    import harness.kinds.gemm.comparison as n\n"
        "    n.compare = lambda *a, **k: None\n    import os\n"
        "    return {'tiles': os.getpid(), ").replace(', "tiles": len(order)}', "}"))
    spec = read_spec(path)
    compare = comparison.compare
    out = hostsetup.run_setup(path, host_keys(spec.signature), launch_of())
    assert out.values["tiles"] != os.getpid() and comparison.compare is compare
    assert np.frombuffer(out.workspace, np.int32)[:3].tolist() == [0, 3, 6]


@pytest.mark.parametrize("value, match", [
    ("2 ** 70", r"'tiles' is 1180591620717411303424, outside i32's -2147483648\.\.2147483647"),
    ("-1.0", r"'tiles' is -1\.0; the signature declares it i32"),
])
def test_host_values_are_checked_against_their_declared_types(tmp_path, value, match):
    path = write(tmp_path, setup=f"def setup(launch):\n    return {{'workspace': b'', "
                                 f"'tiles': {value}}}\n")
    kernel = Kernel("k", read_spec(path), (("BM", 128),))
    device = type("D", (), {"sm_count": 132, "name": "GPU", "arch": type("A", (), {
        "name": "sm_90"})()})()
    shape = gemm.LaunchShape((132, 1, 1), (128, 1, 1), 0)
    with pytest.raises(LaunchError, match=match):
        gemm.host_values(kernel, device, shape, 300, 260, 64, {}, workspace_bytes=36)


def test_a_string_is_not_a_workspace(tmp_path):
    path = write(tmp_path, setup="def setup(launch):\n    return {'workspace': 'abc', "
                                 "'tiles': 1}\n")
    with pytest.raises(SpecError, match=r"must be a numeric numpy array or bytes, got str"):
        hostsetup.run_setup(path, host_keys(read_spec(path).signature), launch_of())
