"""The napkin model, the generated ladder report, and the README's results section."""

import shutil

import pytest

from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT, discover, select
from harness.report import ladder, napkin


def spec_of(name):
    (kernel,) = select(discover(), [name])
    return kernel.spec, dict(kernel.params)


def test_tiling_implies_global_bytes():
    spec, params = spec_of("03_smem_tiled:t32")
    est = napkin.model(spec, params, 4096, 4096, 4096)
    # A read once per block column (4096 / 32 = 128 times), B once per block row, C once:
    # (128 + 128) x 64 MiB + 64 MiB
    assert est["global_bytes"] == 257 * 4096 * 4096 * 4
    assert est["intensity_flop_per_byte"] == pytest.approx(2 * 4096**3 / (257 * 4096**2 * 4))
    assert est["smem_loads_per_fma"] == 2
    spec, params = spec_of("08_warptile")
    assert napkin.model(spec, params, 4096, 4096, 4096)["smem_loads_per_fma"] == 4 / 64


def test_bounds():
    # H100: 132 SMs at 1980 MHz; FP32 256 FLOP/clock/SM = 66.9 TFLOP/s
    peak, roof = napkin.bound(1000.0, 0.0, "sm_90", 132, 1980, "h100")
    assert roof == "compute" and peak == pytest.approx(66908.16)
    low, roof = napkin.bound(0.25, 0.0, "sm_90", 132, 1980, "h100")
    assert roof == "DRAM" and low == pytest.approx(0.25 * 3350)
    # two shared loads per FMA: 32 FLOP per clock per SM
    shared, roof = napkin.bound(8.0, 2.0, "sm_90", 132, 1980, "h100")
    assert roof == "shared" and shared == pytest.approx(32 * 132 * 1.98)


def test_report_and_readme_from_a_run(tmp_path):
    run_path = next((p for d in ladder.documents() if (p := ladder.readme_source(d))), None)
    assert run_path is not None and run_path.exists(), "README and docs/ name no run report"
    run = ladder.load(run_path)
    rows = ladder.napkin_rows(run)
    modelled = [r for r in rows if "global_bytes" in r]
    assert modelled and all(r["bound_gflops"] > 0 for r in modelled)
    copy = tmp_path / run_path.name
    shutil.copy(run_path, copy)
    md, ladder_png, roof_png = ladder.write(copy, (4096, 4096, 4096))
    assert "## 4096x4096x4096" in md.read_text()
    assert ladder_png.read_bytes()[:4] == b"\x89PNG" and roof_png.read_bytes()[:4] == b"\x89PNG"
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(HarnessError, match=r"no passing results at 5x5x5; it has (\d+x){2}\d+"):
        ladder.write(copy, (5, 5, 5))
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing left behind


def test_report_of_a_tensor_core_run(tmp_path):
    """Rows of kernels with no [model] keep their measured columns; titles name the run's
    precisions and GPU, never a fixed one."""
    run_path = PROJECT_ROOT / "reports" / "h100" / "run-20261122-184214.json"
    copy = tmp_path / run_path.name
    shutil.copy(run_path, copy)
    md, ladder_png, roof_png = ladder.write(copy, (4096, 4096, 4096))
    text = md.read_text()
    assert "| 12_mma_tma_bf16:m256n128" in text and "BF16 and FP16 peak" in text
    assert "2 bytes for BF16/FP16 inputs" in text and "NVIDIA H100" in text
    assert ladder_png.read_bytes()[:4] == b"\x89PNG" and roof_png is None


def test_readme_results_are_generated_not_typed():
    """Every generated section of the README and docs/*.md is what `harness report --readme`
    writes from the committed run it names, its links relative to its page."""
    found = []
    for doc in ladder.documents():
        text = doc.read_text()
        for run_path, name, every in ladder.readme_sources(doc):
            start, end = ladder.markers(name)
            section = text[text.index(start):text.index(end) + len(end)]
            assert ladder.document_of(name) == doc, name
            assert section == ladder.readme_section(run_path, None if every else (4096,) * 3,
                                                    name, doc), name
            found.append(name)
    assert "results" in found and len(found) >= 2


def test_a_section_lives_in_one_page(tmp_path, monkeypatch):
    """`harness report --readme --section NAME` writes into the one page that holds NAME's
    markers; none or two is an error that says where it looked, and links from docs/ go up."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("<!-- a:start -->\n<!-- a:end -->\n")
    (tmp_path / "docs" / "x.md").write_text("<!-- b:start -->\n<!-- b:end -->\n"
                                            "<!-- a:start -->\n<!-- a:end -->\n")
    monkeypatch.setattr(ladder, "PROJECT_ROOT", tmp_path)
    assert ladder.document_of("b") == tmp_path / "docs" / "x.md"
    with pytest.raises(HarnessError, match=r"--section a: .* exactly one .* found in README.md, "
                                           r"docs/x.md"):
        ladder.document_of("a")
    with pytest.raises(HarnessError, match=r"--section c: .* found in none of them"):
        ladder.document_of("c")
    monkeypatch.undo()
    run_path = PROJECT_ROOT / "reports" / "h100" / "run-20261122-184214.json"
    in_docs = ladder.readme_section(run_path, (4096,) * 3, "x", PROJECT_ROOT / "docs" / "x.md")
    in_readme = ladder.readme_section(run_path, (4096,) * 3, "x")
    assert "[ladder](../reports/h100/run-20261122-184214-ladder.png)" in in_docs
    assert "[ladder](reports/h100/run-20261122-184214-ladder.png)" in in_readme


def test_readme_command_rewrites_the_page_that_holds_the_section(tmp_path, monkeypatch, capsys):
    """`harness report RUN --readme --section x` rewrites docs/x.md's section, its links up
    one folder, and leaves the README alone."""
    from harness import cli
    from harness.cli import reports as reports_cli

    run_path = tmp_path / "reports" / "h100" / "run-20261122-184214.json"
    run_path.parent.mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "reports" / "h100" / run_path.name, run_path)
    (tmp_path / "docs").mkdir()
    readme = tmp_path / "README.md"
    readme.write_text("# r\n\n<!-- results:start -->\n<!-- results:end -->\n")
    page = tmp_path / "docs" / "x.md"
    page.write_text("# x\n\n<!-- x:start -->\nold\n<!-- x:end -->\nafter\n")
    monkeypatch.setattr(ladder, "PROJECT_ROOT", tmp_path)
    monkeypatch.setattr(reports_cli, "PROJECT_ROOT", tmp_path)
    assert cli.main(["report", str(run_path), "--readme", "--section", "x", "--size",
                     "4096"]) == 0
    assert "docs/x.md x section regenerated" in capsys.readouterr().out
    text = page.read_text()
    assert "\nold\n" not in text and text.endswith("<!-- x:end -->\nafter\n")
    assert "[ladder](../reports/h100/run-20261122-184214-ladder.png)" in text
    assert "| 11_mma_sync" in text
    assert readme.read_text() == "# r\n\n<!-- results:start -->\n<!-- results:end -->\n"


def test_a_working_set_in_l2_reads_dram_once():
    """Issue 56: at 512 02_coalesced's implied bytes (each A tile read once per block column)
    put its DRAM roof at 837 GFLOP/s, and it ran 7x above it from L2. Where A, B and C fit in
    half of L2, DRAM moves the compulsory bytes alone; past that the implied bytes stand."""
    spec, params = spec_of("02_coalesced")
    small = napkin.model(spec, params, 512, 512, 512)
    intensity, source = napkin.dram_intensity(small, 50 << 20)
    assert source == "fits L2"
    assert intensity == pytest.approx(2 * 512**3 / small["compulsory_bytes"])
    assert intensity > 20 * small["intensity_flop_per_byte"]
    large = napkin.model(spec, params, 4096, 4096, 4096)
    assert napkin.dram_intensity(large, 50 << 20) == (large["intensity_flop_per_byte"], "")
    assert napkin.dram_intensity(small, None) == (small["intensity_flop_per_byte"], "")
    waves = large["global_bytes"] / 8
    assert napkin.dram_intensity(large, 50 << 20, waves) == (
        pytest.approx(8 * large["intensity_flop_per_byte"]), "by waves")


def test_the_ladder_names_a_roof_read_from_l2(tmp_path):
    run_path = PROJECT_ROOT / "reports" / "h100" / "run-default-cold-01e44f2.json.gz"
    rows = {r["m"]: r for r in ladder.napkin_rows(ladder.load(run_path))
            if r["kernel"] == "02_coalesced"}
    assert rows[512]["bound"] != "DRAM" and rows[512]["pct_of_bound"] < 100, rows[512]
    # a tile of one element: no waves of tiles; the bound it beats says why
    assert rows[4096]["bound"] == "DRAM as tiled: caches beat it", rows[4096]
