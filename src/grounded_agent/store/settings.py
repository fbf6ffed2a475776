"""Where the knowledge store lives and which embeddings it uses, read from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

EmbeddingsKind = Literal["local", "openai"]
LocalBackend = Literal["onnx", "onnx-int8", "torch"]
LOCAL_BACKENDS: tuple[LocalBackend, ...] = ("onnx", "onnx-int8", "torch")

DEFAULT_OPENAI_EMBEDDING_MODEL = "text-embedding-3-small"


def default_home() -> Path:
    """$GROUNDED_AGENT_HOME, else the per-user data directory (~/.local/share/grounded-agent)."""
    raw = os.environ.get("GROUNDED_AGENT_HOME", "").strip()
    if raw:
        return Path(raw).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("grounded-agent", appauthor=False))


def _embeddings_kind() -> EmbeddingsKind:
    raw = os.environ.get("GROUNDED_AGENT_EMBEDDINGS", "local").strip().lower() or "local"
    if raw not in ("local", "openai"):
        raise ValueError(f"GROUNDED_AGENT_EMBEDDINGS must be 'local' or 'openai', not {raw!r}")
    return raw  # type: ignore[return-value]


def _local_backend() -> LocalBackend:
    raw = os.environ.get("GROUNDED_AGENT_EMBEDDING_BACKEND", "").strip().lower() or "onnx"
    if raw not in LOCAL_BACKENDS:
        raise ValueError(
            f"GROUNDED_AGENT_EMBEDDING_BACKEND must be one of {', '.join(LOCAL_BACKENDS)}, "
            f"not {raw!r}"
        )
    return next(b for b in LOCAL_BACKENDS if b == raw)


def _path_env(name: str) -> Path | None:
    raw = os.environ.get(name, "").strip()
    return Path(raw).expanduser() if raw else None


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def _float_env(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else default


@dataclass(frozen=True, kw_only=True)
class StoreSettings:
    """Store configuration. `from_env()` reads it; tests build it directly."""

    home: Path = field(default_factory=default_home)
    database_url: str | None = field(
        default_factory=lambda: os.environ.get("DATABASE_URL", "").strip() or None
    )
    """External PostgreSQL with pgvector; None means the embedded server under `home`."""
    embeddings: EmbeddingsKind = field(default_factory=_embeddings_kind)
    openai_model: str = field(
        default_factory=lambda: os.environ.get(
            "GROUNDED_AGENT_OPENAI_EMBEDDING_MODEL", DEFAULT_OPENAI_EMBEDDING_MODEL
        )
    )
    table_name: str | None = field(
        default_factory=lambda: os.environ.get("GROUNDED_AGENT_KB_TABLE", "").strip() or None
    )
    """Override of the per-model table name (tests give each test its own table)."""
    query_timeout_s: float = field(
        default_factory=lambda: _float_env("GROUNDED_AGENT_DB_TIMEOUT_S", 10.0)
    )
    connect_timeout_s: float = 5.0
    embed_batch_size: int = 64
    """Chunks per embedding call while ingesting (the progress bar moves by this much)."""
    local_backend: LocalBackend = field(default_factory=_local_backend)
    """How the bundled all-MiniLM-L6-v2 runs: "onnx" (default: ONNX Runtime on a model exported
    once from the bundled weights, same vectors as "torch"), "onnx-int8" (the export quantised to
    int8: other vectors, so its own table) or "torch" (sentence-transformers, the old backend)."""
    model_cache: Path | None = field(
        default_factory=lambda: _path_env("GROUNDED_AGENT_MODEL_CACHE")
    )
    """Where the ONNX export is kept; None means `home/models`."""
    embed_threads: int = field(
        default_factory=lambda: _int_env(
            "GROUNDED_AGENT_EMBED_THREADS", max(1, min(4, os.cpu_count() or 1))
        )
    )
    """Threads that embed batches side by side, one ONNX Runtime thread each (default: the
    cores, at most 4)."""

    @classmethod
    def from_env(cls, **overrides: Any) -> StoreSettings:
        return replace(cls(), **overrides) if overrides else cls()

    @property
    def embedded(self) -> bool:
        return self.database_url is None

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"

    @property
    def models_dir(self) -> Path:
        """The ONNX export's cache: $GROUNDED_AGENT_MODEL_CACHE, else `home/models`."""
        return self.model_cache if self.model_cache is not None else self.home / "models"


def sqlalchemy_url(url: str) -> str:
    """postgresql:// (or postgres://, +psycopg2) -> postgresql+psycopg:// for async SQLAlchemy."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError("a database URL looks like postgresql://user:password@host:5432/dbname")
    base = scheme.split("+", 1)[0].lower()
    if base not in ("postgresql", "postgres"):
        raise ValueError(f"unsupported database URL scheme {scheme!r}: PostgreSQL is required")
    return f"postgresql+psycopg://{rest}"


def libpq_url(url: str) -> str:
    """The plain postgresql:// form psycopg and langgraph-checkpoint-postgres accept."""
    _scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError("a database URL looks like postgresql://user:password@host:5432/dbname")
    return f"postgresql://{rest}"


def redact_url(url: str) -> str:
    """A URL fit for logs: the password replaced by ***."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, at, host = rest.rpartition("@")
    user, colon, password = creds.partition(":")
    return f"{scheme}://{user}{':***' if colon and password else colon}{at}{host}"
