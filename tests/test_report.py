import json

import pytest

from harness.report import files as report

PASS = {"kernel": "03_smem_tiled:t32", "m": 4096, "n": 4096, "k": 4096, "precision": "fp32",
        "status": "pass", "message": "ok", "gflops": 12345.6, "cublas_gflops": 50000.0,
        "pct_cublas": 24.69, "pct_peak": 18.4, "sm_clock_mhz": 1980.0, "registers": 38,
        "static_smem_bytes": 8192, "dynamic_smem_bytes": 0, "spill_store_bytes": 0,
        "spill_load_bytes": 0, "blocks_per_sm": 2, "occupancy_pct": 100.0,
        "limiter": "warps", "max_rel_err": 1.2e-7}
FAULT = {"kernel": "a_fault", "m": 256, "n": 256, "k": 256, "precision": "fp32",
         "status": "fault", "message": "kernel faulted: CUDA_ERROR_ILLEGAL_ADDRESS"}


@pytest.mark.parametrize(
    ("name", "slug"),
    [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
     ("NVIDIA A100-SXM4-40GB", "a100"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
     ("Some Card", "some-card")],
)
def test_gpu_slug(name, slug):
    assert report.gpu_slug(name) == slug


def test_table_shows_numbers_and_failures():
    text = report.table([PASS, FAULT])
    assert "12346" in text and "24.7" in text and "8192/0" in text and "1.2e-07" in text
    assert "fault" in text and "4096x4096x4096" in text
    assert "a_fault 256x256x256: fault: kernel faulted" in report.failures([PASS, FAULT])


def test_write_run(tmp_path):
    meta = report.metadata({"name": "NVIDIA H100 80GB HBM3", "sm_count": 132,
                            "l2_bytes": 50 << 20, "compute_capability": [9, 0],
                            "driver": "13.0", "clocks": {"max_sm_clock_mhz": 1980}},
                           ["harness", "run", "--size", "4096"], {"cold_l2": True,
                                                                  "budget_ms": 300}, [(4096,) * 3])
    json_path, md_path = report.write_run(meta, [PASS, FAULT], tmp_path / "h100" / "run-x")
    data = json.loads(json_path.read_text())
    assert data["rows"] == [PASS, FAULT] and data["meta"]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert data["meta"]["command"] == "harness run --size 4096"
    md = md_path.read_text()
    assert "cold (flushed before every repetition)" in md and "| 03_smem_tiled:t32" in md
    assert "## Not passed" in md and "CUDA_ERROR_ILLEGAL_ADDRESS" in md


def test_compare_table_verdicts():
    base = {**PASS, "compared_to": "a", "blocks_per_sm": 2, "occupancy_pct": 50.0,
            "sass": {"FFMA": 33, "LDS.128": 8, "BAR": 2}}
    rows = [{**base, "kernel": "a", "speedup": 1.0, "speedup_p20": 1.0, "speedup_p80": 1.0,
             "within_noise": False},
            {**base, "kernel": "b", "speedup": 1.004, "speedup_p20": 0.998,
             "speedup_p80": 1.009, "within_noise": True},
            {**base, "kernel": "c", "speedup": 0.8, "speedup_p20": 0.79, "speedup_p80": 0.81,
             "within_noise": False},
            FAULT]
    text = report.compare_table(rows)
    lines = {line.split("|")[1].strip(): line for line in text.splitlines()[2:]}
    assert "reference" in lines["a"] and "within noise" in lines["b"]
    assert "slower" in lines["c"] and "0.800 (0.790-0.810)" in lines["c"]
    assert "FFMA:33 LDS.128:8 BAR:2" in lines["a"] and "fault" in lines["a_fault"]


def test_write_tool_json_stamps_and_files_a_tool_result(tmp_path):
    result = {"gpu": "NVIDIA H100 80GB HBM3", "rows": [{"power_w": float("nan")}]}
    stem = report.write_tool_json(result, "tools/kernel_energy.py", ["12e", "--rounds", "2"],
                                  "kernel-energy", tmp_path)
    assert stem.parent == tmp_path / "h100" and stem.name.startswith("kernel-energy-")
    saved = json.loads(stem.with_suffix(".json").read_text())
    assert saved["command"] == "python3 tools/kernel_energy.py 12e --rounds 2"
    assert saved["date"] == result["date"] and saved["rows"] == [{"power_w": None}]
