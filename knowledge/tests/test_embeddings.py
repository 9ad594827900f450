import json
import math

import httpx
import pytest

from knowledge import embeddings
from knowledge.embeddings import EmbeddingError, embed_query, embed_texts, similarity


def test_local_backend_returns_normalized_384_dimension_vectors():
    vectors = embed_texts(["return my tent", "refund to my card", "reset password"])
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-4 for v in vectors)
    query = embed_query("how do I send back a tent")
    assert similarity(query, vectors[0]) > similarity(query, vectors[2])


@pytest.fixture
def openai_backend(settings, monkeypatch):
    """Point the openai backend at an in-process transport that records requests."""
    settings.KNOWLEDGE_EMBEDDINGS_BACKEND = "openai"
    settings.KNOWLEDGE_EMBEDDINGS_URL = "http://embedder.test"
    settings.KNOWLEDGE_EMBEDDINGS_MODEL = "minilm"
    settings.KNOWLEDGE_EMBEDDINGS_API_KEY = "k"
    requests = []

    def handler(request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        requests.append((request, payload))
        dims = 384 if payload["model"] == "minilm" else 768
        data = [
            {"index": i, "embedding": [float(len(text))] + [1.0] * (dims - 1)}
            for i, text in enumerate(payload["input"])
        ]
        return httpx.Response(200, json={"data": list(reversed(data))})

    monkeypatch.setattr(embeddings, "_client", httpx.Client(transport=httpx.MockTransport(handler)))
    return requests


def test_openai_backend_posts_batches_and_keeps_input_order(openai_backend):
    texts = [f"text {'x' * i}" for i in range(40)]
    vectors = embed_texts(texts)
    assert len(openai_backend) == 2  # batches of 32
    request, payload = openai_backend[0]
    assert request.url == "http://embedder.test/v1/embeddings"
    assert request.headers["Authorization"] == "Bearer k"
    assert payload["model"] == "minilm"
    first_components = [v[0] for v in vectors]
    assert first_components == sorted(first_components)  # order restored by "index"
    assert all(abs(sum(x * x for x in v) - 1) < 1e-9 for v in vectors)


def test_openai_backend_rejects_vectors_of_the_wrong_size(openai_backend, settings):
    settings.KNOWLEDGE_EMBEDDINGS_MODEL = "bigger-model"
    with pytest.raises(EmbeddingError, match="768 dimensions"):
        embed_texts(["hello"])
