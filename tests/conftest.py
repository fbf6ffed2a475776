"""Shared test setup: offline by default, no API keys leaking in from the developer's shell."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SQUAD = SHARED / "eval" / "squad"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-heavy",
        action="store_true",
        help="also run the tests marked heavy (the full fault matrix: make faults)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-heavy"):
        return
    skip = pytest.mark.skip(reason="heavy: runs under `make faults` (pytest --run-heavy)")
    for item in items:
        if "heavy" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see real keys or hub downloads; each test sets the keys it needs."""
    for name in ("OPENAI_API_KEY", "TAVILY_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("LANGSMITH_TRACING", "false")


def squad_path(name: str) -> Path:
    """A file of ../shared/eval/squad, or a skip naming why: a user's clone has no ../shared."""
    path = SQUAD / name
    if not path.exists():
        pytest.skip(f"{path} is absent (evaluation data lives outside the project, in ../shared)")
    return path


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _model_cache() -> str:
    """One ONNX export for the whole test session and its child processes, whatever home each
    test uses: the data directory's, as a user's first `ask` would make it (CI: its temporary
    GROUNDED_AGENT_HOME, so exported once per run)."""
    from grounded_agent.store.settings import default_home

    return str(default_home() / "models")


os.environ.setdefault("GROUNDED_AGENT_MODEL_CACHE", _model_cache())
