"""Every notebook under notebooks/ is committed with its outputs and runs headless, start to
end, at smoke size.

Each notebook is executed by nbclient in a fresh python3 kernel of this interpreter, in
notebooks/ (as a user would open it), with JAXVACO_NOTEBOOK_SIZE=smoke (a few iterations
of tiny networks), MPLBACKEND=Agg and XLA's fast-compile mode (compilation dominates at
this size). The notebooks run concurrently, one per CPU core: each is one kernel process
that mostly compiles on one thread. A cell that raises fails its notebook's test with the
cell's source and traceback.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 300
SMOKE_ENV = {
    "JAXVACO_NOTEBOOK_SIZE": "smoke",
    "MPLBACKEND": "Agg",
    "JAX_DISABLE_MOST_OPTIMIZATIONS": "1",
    "JAX_PLATFORMS": "cpu",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}


def execute(path: Path) -> None:
    """Run every cell of the notebook at `path` in a fresh kernel; raise on the first error."""
    notebook = nbformat.read(path, as_version=4)
    env = {**os.environ, **SMOKE_ENV}
    # The kernel must import the jaxvaco of this interpreter: put its directory first.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    client = nbclient.NotebookClient(
        notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=env)


@pytest.fixture(scope="module")
def executions(request) -> dict[str, Future]:
    """Start the notebooks this session selected, in parallel; their futures by name."""
    selected = {item.callspec.params["name"] for item in request.session.items
                if item.originalname == "test_notebook_runs" and hasattr(item, "callspec")}
    paths = [p for p in NOTEBOOKS if p.stem in selected]
    workers = max(1, min(len(paths), os.cpu_count() or 1))
    pool = ThreadPoolExecutor(max_workers=workers)
    futures = {p.stem: pool.submit(execute, p) for p in paths}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


MAX_NOTEBOOK_BYTES = 1_500_000
"""Committed notebooks carry their outputs (figures as PNG) so that a reader on a code host
sees them; this keeps the files small enough to review and clone."""


def test_notebooks_exist_and_hold_their_executed_outputs():
    assert {p.stem for p in NOTEBOOKS} >= {"quickstart", "lag_sweep", "brax", "anatomy", "llm_lag"}
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert notebook.cells[0].cell_type == "markdown", f"{path.name}: starts with markdown"
        assert "pip" in code[0].source and "google.colab" in code[0].source, (
            f"{path.name}: the first code cell installs the package")
        assert "parameters" in code[1].metadata.get("tags", []), (
            f"{path.name}: the second code cell is the papermill parameters cell")
        assert "JAXVACO_NOTEBOOK_SIZE" in code[1].source
        counts = [c.execution_count for c in code]
        assert None not in counts and counts == sorted(counts), (
            f"{path.name}: commit it executed top to bottom (docs/how-to/notebooks.md)")
        errors = [o for c in code for o in c.outputs if o.output_type == "error"]
        assert not errors, f"{path.name}: a stored output is an error"
        assert any(o.get("data", {}).get("image/png") for c in code for o in c.outputs), (
            f"{path.name}: no stored figure")
        assert path.stat().st_size <= MAX_NOTEBOOK_BYTES, f"{path.name}: outputs too large"


@pytest.mark.parametrize("name", [p.stem for p in NOTEBOOKS])
def test_notebook_runs(name: str, executions: dict[str, Future]):
    try:
        executions[name].result()
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{name}.ipynb failed:\n{error}", pytrace=False)
