"""The notebooks run top to bottom offline, each in a fresh kernel; any cell error fails."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.e2e.conftest import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_notebooks_are_stored_without_outputs() -> None:
    assert NOTEBOOKS
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        dirty = [i for i, c in enumerate(nb.cells)
                 if c.cell_type == "code" and (c.outputs or c.execution_count)]
        assert not dirty, f"{path.name}: clear the outputs of cells {dirty} before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the kernel inherits this environment: offline, no keys, a home of its own
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TAVILY_API_KEY", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GROUNDED_AGENT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GROUNDED_AGENT_SOURCES", "knowledge_base")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=dict(os.environ))
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
