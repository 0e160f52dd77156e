"""examples/seeds_story.ipynb: a valid v4 notebook whose code uses only ``harness``'s public
names, executed end to end on the CPU (its GPU cells print one line each and do not fail).

The GPU is hidden from the notebook's kernel (``CUDA_VISIBLE_DEVICES=""``), so this test takes
the same path with or without one and stays well under a minute; the GPU cells themselves are
run where the notebook is executed on the H100 (docs/python.md).
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

import pytest

import harness

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "seeds_story.ipynb"
NO_GPU_LINE = "No GPU here (harness.NoGpu)"


def _notebook():
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (python3 -m "
                                   "pip install nbclient nbformat ipykernel)")
    return nbformat, nbformat.read(NOTEBOOK, as_version=4)


def _code_cells(nb) -> list[tuple[int, str]]:
    return [(i, cell.source) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]


def private_uses(source: str) -> list[str]:
    """What ``source`` (one code cell) uses of harness beyond its public names
    (``harness.__all__``): imports of its modules (``harness.bench``, ``from harness.run
    import ...``) and attributes of the module that are not public."""
    public = set(harness.__all__)
    tree = ast.parse("\n".join(line for line in source.splitlines()
                               if not line.lstrip().startswith(("%", "!"))))
    aliases = {"harness"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "harness":
                    aliases.add(alias.asname or "harness")
                elif alias.name.startswith("harness."):
                    found.append(f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("harness."):
                found.append(f"from {node.module} import ...")
            elif node.module == "harness":
                found += [f"from harness import {a.name}" for a in node.names
                          if a.name not in public]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and node.attr not in public):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_private_uses_finds_what_is_not_public():
    source = ("import harness\nimport harness.bench\nfrom harness.run import runner\n"
              "from harness import kernel, api\nharness.kernel('x')\nharness.report\n")
    assert private_uses(source) == ["import harness.bench", "from harness.run import ...",
                                    "from harness import api", "harness.report"]


def test_notebook_is_valid_v4_on_the_public_api():
    nbformat, nb = _notebook()
    nbformat.validate(nb)
    assert nb.nbformat == 4
    cells = _code_cells(nb)
    assert 8 <= len(nb.cells) <= 24, f"{len(nb.cells)} cells: keep the notebook short"
    assert any("import harness" in source for _, source in cells)
    for index, source in cells:
        assert private_uses(source) == [], f"cell {index} uses harness's internals"


def test_notebook_executes_on_the_cpu(tmp_path, monkeypatch):
    _, nb = _notebook()
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (python3 -m "
                                   "pip install nbclient nbformat ipykernel)")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (python3 -m pip "
                        "install nbclient nbformat ipykernel)")
    # the notebook's "python3" kernel is this interpreter, whatever kernelspecs are installed
    spec = tmp_path / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the CPU path, with or without a GPU
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()

    texts = []
    for index, source in _code_cells(nb):
        cell = nb.cells[index]
        assert not [o for o in cell.outputs if o.output_type == "error"], source
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream"
                       and o.get("name") == "stdout")
        text += "".join(str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
        texts.append((source, text))
        if ".build(" in source:  # every rung and the source-string kernel compiled for sm_90
            assert "sm_90" in text and "Not passed" not in text, text
    gpu = [(source, text) for source, text in texts if NO_GPU_LINE in text]
    assert len(gpu) == 3, [text for _, text in texts]  # compare, napkin, plot
    for _, text in gpu:
        assert text.strip().count("\n") == 0, f"more than one line without a GPU: {text!r}"
    assert any("harness.compare(" in source for source, _ in gpu)
    assert any("03_smem_tiled:t32:" in text and " checks at " in text  # its battery's plan
               for _, text in texts)
