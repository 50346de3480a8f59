"""The notebooks run top to bottom on the demo corpus and are stored without outputs."""

import os
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def run_notebook(path: Path, env: dict[str, str] | None = None) -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})  # the kernel inherits this process's environment
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


def _text(nb) -> str:
    return "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                     for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebooks_are_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, path.name


def test_rat_notebook_runs():
    nb = run_notebook(REPO / "notebooks" / "01_rat.ipynb")
    text = _text(nb)
    assert "predicted:" in text and "✗" in text and "Project" in text
    html = [o for c in nb.cells for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    assert html and "<svg" in html[0]["data"]["text/html"]


@pytest.mark.slow
def test_results_notebook_runs_on_a_demo_run(tmp_path):
    from test_evaluate import write_demo_run

    write_demo_run(tmp_path)
    nb = run_notebook(REPO / "notebooks" / "02_results.ipynb", {"RAT_RUN_DIR": str(tmp_path)})
    text = _text(nb)
    assert "RAT node model" in text and "AUC=" in text
    assert (tmp_path / "eval" / "metrics.json").exists()
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 5
