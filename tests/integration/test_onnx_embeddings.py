"""The ONNX Runtime backend of the bundled all-MiniLM-L6-v2 (issue 12, item 6).

Real parts: the export from the shipped weights (numpy and onnx, once per test session, into the shared
model cache the root conftest sets), onnxruntime, the torch backend for comparison, and for the
last test an embedded PostgreSQL and a `grounded-agent ask` in a child process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from grounded_agent.sample import SAMPLE_KB
from grounded_agent.store import StoreSettings, aingest_paths, onnx_export, open_store
from grounded_agent.store import onnx_embeddings as oe
from grounded_agent.store.embeddings import (
    LOCAL_INT8_MODEL_ID,
    LOCAL_MODEL_ID,
    make_embeddings,
    torch_embeddings,
)
from grounded_agent.store.onnx_embeddings import (
    EXPORT_DIR,
    FILES,
    MANIFEST,
    OnnxEmbeddings,
    data_file,
)
from grounded_agent.store.settings import LocalBackend

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

SENTENCES = [
    "How much does the Pro plan cost per user per month?",
    "hi",
    "The Pro plan costs 29 euros per user per month on monthly billing.\n\nPrices exclude VAT.",
    "Backups are kept for thirty days, then deleted for good. " * 12,  # past 256 tokens
    "Öffnungszeiten: Montag bis Freitag, 8–18 Uhr; samedi fermé.",
]

HEAVY = ("torch", "transformers", "sklearn", "sentence_transformers", "langchain_huggingface")


@pytest.fixture(scope="module")
def cache() -> Path:
    """The session's model cache (the root conftest points GROUNDED_AGENT_MODEL_CACHE at it)."""
    return StoreSettings.from_env().models_dir


@pytest.fixture(scope="module")
def onnx_model(cache: Path) -> OnnxEmbeddings:
    return OnnxEmbeddings(cache, threads=2)


def _cosines(a: list[list[float]], b: list[list[float]]) -> np.ndarray:
    x, y = np.asarray(a), np.asarray(b)
    return np.asarray(
        (x * y).sum(1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1)), dtype=float
    )


def test_onnx_vectors_match_the_torch_backend(onnx_model: OnnxEmbeddings) -> None:
    torch_model = torch_embeddings()
    new = onnx_model.embed_documents(SENTENCES)
    old = torch_model.embed_documents(SENTENCES)
    cos = _cosines(new, old)
    assert cos.min() > 0.99999, cos
    # the shipped weights are float16: a component moves by up to ~2e-4 (1.7e-4 measured), the
    # direction not (cosine above)
    assert np.abs(np.asarray(new) - np.asarray(old)).max() < 5e-4
    # one at a time (no padding) gives the same vectors as in a padded batch (the first
    # sentence shares one with the third and fifth; the fourth, past 256 tokens, goes alone)
    assert _cosines([onnx_model.embed_query(SENTENCES[0])], [new[0]])[0] > 0.99999
    assert _cosines([onnx_model.embed_query(SENTENCES[3])], [new[3]])[0] > 0.99999
    assert np.allclose(np.linalg.norm(np.asarray(new), axis=1), 1.0, atol=1e-5)
    assert onnx_model.embed_documents([]) == []


def test_fp32_onnx_and_torch_share_a_table_int8_has_its_own() -> None:
    base = StoreSettings(
        home=Path("/nonexistent"), database_url=None, embeddings="local", table_name=None
    )
    backends: list[LocalBackend] = ["onnx", "torch", "onnx-int8"]
    ids = {b: make_embeddings(replace(base, local_backend=b))[1] for b in backends}
    assert ids == {"onnx": LOCAL_MODEL_ID, "torch": LOCAL_MODEL_ID, "onnx-int8": LOCAL_INT8_MODEL_ID}
    names = {b: open_store(replace(base, local_backend=b)).table_name for b in backends}
    assert names["onnx"] == names["torch"] != names["onnx-int8"]


def test_export_is_cached_and_reused(cache: Path) -> None:
    path, _ = oe.ensure_export(cache, "fp32", threads=1, build=onnx_export.build)
    stamp = path.stat().st_mtime_ns

    def no_rebuild(*_: object, **__: object) -> None:
        raise AssertionError("a valid export was rebuilt")

    again, session = oe.ensure_export(cache, "fp32", threads=1, build=no_rebuild)
    assert again == path and path.stat().st_mtime_ns == stamp
    assert session.get_outputs()[0].name == "sentence_embedding"


@pytest.fixture
def copied_cache(cache: Path, tmp_path: Path) -> Path:
    """A private copy of a good export, to break."""
    oe.ensure_export(cache, "fp32", threads=1, build=onnx_export.build)
    target = tmp_path / "models"
    shutil.copytree(cache / EXPORT_DIR, target / EXPORT_DIR, ignore=shutil.ignore_patterns(".*"))
    (target / EXPORT_DIR / FILES["int8"]).unlink(missing_ok=True)
    (target / EXPORT_DIR / data_file("int8")).unlink(missing_ok=True)
    return target


def _break(directory: Path, how: str) -> None:
    model, manifest = directory / FILES["fp32"], directory / MANIFEST
    if how == "missing file":
        model.unlink()
    elif how == "truncated weights":
        weights = directory / data_file("fp32")
        with weights.open("r+b") as fh:
            fh.truncate(weights.stat().st_size // 2)
    elif how == "missing weights":
        (directory / data_file("fp32")).unlink()
    elif how == "garbage of the same size":
        size = model.stat().st_size
        model.write_bytes(b"\x00" * size)
    elif how == "no manifest":
        manifest.unlink()
    elif how == "other weights":
        data = json.loads(manifest.read_text())
        data["source"]["weights_size"] += 1
        manifest.write_text(json.dumps(data))
    elif how == "changed weights, same size":
        data = json.loads(manifest.read_text())
        data["files"]["fp32"]["probe"] = [-x for x in data["files"]["fp32"]["probe"]]
        manifest.write_text(json.dumps(data))


EXPECTED_REASON = {
    "missing file": "model.onnx is missing",
    "truncated weights": "model.onnx.data has the wrong size",
    "missing weights": "model.onnx.data is missing",
    "garbage of the same size": "onnxruntime cannot load model.onnx",
    "no manifest": "exporting all-MiniLM-L6-v2 to ONNX",
    "other weights": "other weights",
    "changed weights, same size": "embeds a probe differently",
}


@pytest.mark.parametrize("how", list(EXPECTED_REASON))
def test_broken_export_is_rebuilt_with_a_log_line(
    copied_cache: Path,
    cache: Path,
    how: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every way an export can be wrong is noticed, said in the log, and rebuilt. The rebuild
    itself is the real one in test_rebuild_for_real; here it restores the good copy."""
    directory = copied_cache / EXPORT_DIR
    _break(directory, how)
    calls: list[Path] = []

    def restore(target: Path, variant: str) -> None:
        calls.append(target)
        for name in (FILES["fp32"], data_file("fp32"), MANIFEST):
            shutil.copy2(cache / EXPORT_DIR / name, target / name)

    with caplog.at_level(logging.WARNING, logger="grounded_agent.store.onnx_embeddings"):
        path, _ = oe.ensure_export(copied_cache, "fp32", threads=1, build=restore)
    assert calls == [directory]
    line = " ".join(r.getMessage() for r in caplog.records)
    assert EXPECTED_REASON[how] in line, line
    assert ("exporting" if how == "no manifest" else "rebuilding") in line
    assert path == directory / FILES["fp32"]


def test_without_a_builder_a_broken_export_is_an_error_naming_the_command(
    copied_cache: Path,
) -> None:
    """The runtime never imports the exporter (torch): whoever may rebuild passes it in."""
    _break(copied_cache / EXPORT_DIR, "garbage of the same size")
    with pytest.raises(oe.ExportError, match=re.escape("python -m grounded_agent.store.onnx_export")):
        oe.ensure_export(copied_cache, "fp32", threads=1)


@pytest.mark.slow
def test_rebuild_for_real(copied_cache: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A corrupt export is exported again from the shipped weights and gives torch's vectors."""
    directory = copied_cache / EXPORT_DIR
    _break(directory, "garbage of the same size")
    with caplog.at_level(logging.WARNING):
        model = OnnxEmbeddings(copied_cache, threads=2, build=onnx_export.build)
    assert any("rebuilding" in r.getMessage() for r in caplog.records)
    manifest = json.loads((directory / MANIFEST).read_text())
    assert manifest["files"]["fp32"]["worst_cosine_to_torch"] > 0.99999
    cos = _cosines(model.embed_documents(SENTENCES), torch_embeddings().embed_documents(SENTENCES))
    assert cos.min() > 0.99999
    assert not list(directory.glob(".export-*"))  # no temporary files left behind


@pytest.mark.slow
def test_int8_variant_is_close_but_its_own_model(copied_cache: Path) -> None:
    int8 = OnnxEmbeddings(copied_cache, variant="int8", threads=2, model_id=LOCAL_INT8_MODEL_ID,
                          build=onnx_export.build)
    fp32 = OnnxEmbeddings(copied_cache, threads=2)
    cos = _cosines(int8.embed_documents(SENTENCES), fp32.embed_documents(SENTENCES))
    assert cos.min() > 0.95 and cos.max() < 0.99999  # close, not the same vectors
    manifest = json.loads((copied_cache / EXPORT_DIR / MANIFEST).read_text())
    assert set(manifest["files"]) == {"fp32", "int8"}
    assert (copied_cache / EXPORT_DIR / data_file("int8")).stat().st_size < (
        copied_cache / EXPORT_DIR / data_file("fp32")
    ).stat().st_size


async def test_offline_ask_imports_neither_torch_nor_transformers_nor_sklearn(
    pg_home: Path, cache: Path
) -> None:
    """A real `grounded-agent ask` in a fresh process, against the embedded database with the
    sample knowledge base: it answers from the knowledge base, and the query path loaded none of
    the heavy machine-learning packages (nor onnx, which only the export needs)."""
    table = f"t_onnx_{uuid.uuid4().hex[:10]}"
    settings = StoreSettings(home=pg_home, database_url=None, embeddings="local", table_name=table)
    store = open_store(settings)
    try:
        report = await aingest_paths([SAMPLE_KB], store)
        assert report.documents >= 6 and not report.errors
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TAVILY_API_KEY", "DATABASE_URL")
        }
        env.update(
            GROUNDED_AGENT_HOME=str(pg_home),
            GROUNDED_AGENT_KB_TABLE=table,
            GROUNDED_AGENT_MODEL_CACHE=str(cache),
            GROUNDED_AGENT_EMBEDDING_BACKEND="onnx",
            HF_HUB_OFFLINE="1",
        )
        code = (
            "import json, sys\n"
            "from grounded_agent.cli import main\n"
            "rc = main(['ask', 'How much does the Pro plan cost per user per month?',"
            " '--sources', 'knowledge_base', '--json'])\n"
            "sys.stdout.flush()\n"
            "print('MODULES ' + json.dumps(sorted(m.split('.')[0] for m in sys.modules)),"
            " file=sys.stderr)\n"
            "sys.exit(rc)\n"
        )
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        result = json.loads(done.stdout)
        assert result["status"] == "answered"
        assert result["citations"][0]["source_id"] == "lumenary-pricing"
        line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
        modules = set(json.loads(line.removeprefix("MODULES ")))
        assert "onnxruntime" in modules  # the negative control: the check sees what was loaded
        assert not modules & {*HEAVY, "onnx"}, modules & {*HEAVY, "onnx"}
    finally:
        await store.adrop()
        await store.aclose()


def test_shipped_reference_vectors_are_the_torch_models() -> None:
    """onnx_reference.json, which every export is checked against, holds what the torch model
    gives today for the check sentences (so a graph written without torch is held to torch)."""
    ref = onnx_export.reference_vectors()
    live = onnx_export._torch_vectors(
        onnx_export._torch_module(onnx_export.torch_source_dir()), onnx_export.CHECK_TEXTS
    )
    assert ref.shape == (len(onnx_export.CHECK_TEXTS), 384)
    assert _cosines(ref.tolist(), live.tolist()).min() > 0.999999


@pytest.mark.slow
def test_export_needs_no_torch_and_gives_the_torch_models_vectors(tmp_path: Path) -> None:
    """In a child process where torch, transformers and sentence-transformers cannot be imported,
    the export is made from the shipped weights (numpy and onnx) and the embeddings it gives match
    the torch backend's in this process."""
    script = f"""
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {HEAVY!r}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
from pathlib import Path
from grounded_agent.store import onnx_export
from grounded_agent.store.onnx_embeddings import OnnxEmbeddings
model = OnnxEmbeddings(Path(sys.argv[1]), threads=1, build=onnx_export.build)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})
print(json.dumps({{"vectors": model.embed_documents({SENTENCES!r}), "heavy": heavy}}))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["heavy"] == []
    manifest = json.loads((tmp_path / EXPORT_DIR / MANIFEST).read_text())
    assert manifest["files"]["fp32"]["worst_cosine_to_torch"] > 0.99999
    cos = _cosines(out["vectors"], torch_embeddings().embed_documents(SENTENCES))
    assert cos.min() > 0.99999
