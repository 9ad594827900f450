import json
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

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


def test_concurrent_callers_share_model_calls_and_each_gets_its_own_rows():
    """Eight threads' texts wait while the model is busy, then go through in one call."""
    calls = []
    gate = threading.Event()

    def encode(texts):
        calls.append(list(texts))
        if len(calls) == 1:
            gate.wait(5)  # the first call holds the model while the others queue up
        return [[float(len(t))] for t in texts]

    batcher = embeddings.EncodeBatcher(encode, max_texts=256)
    results = {}

    def ask(i):
        texts = [f"q{i}", "x" * i]
        results[i] = batcher(texts)

    first = threading.Thread(target=ask, args=(0,))
    first.start()
    while not calls:
        time.sleep(0.01)
    others = [threading.Thread(target=ask, args=(i,)) for i in range(1, 8)]
    for t in others:
        t.start()
    time.sleep(0.2)  # all seven queued behind the first call
    gate.set()
    for t in [first, *others]:
        t.join(5)
    assert len(calls) == 2, calls
    assert sorted(len(c) for c in calls) == [2, 14]
    for i in range(8):
        assert results[i] == [[float(len(f"q{i}"))], [float(i)]]


def test_a_failing_model_call_reaches_every_waiting_caller_and_the_batcher_goes_on():
    state = {"fail": True}

    def encode(texts):
        if state["fail"]:
            raise EmbeddingError("model crashed")
        return [[1.0] for _ in texts]

    batcher = embeddings.EncodeBatcher(encode, max_texts=8)
    with pytest.raises(EmbeddingError, match="model crashed"):
        batcher(["a"])
    state["fail"] = False
    assert batcher(["b", "c"]) == [[1.0], [1.0]]


def test_coalesced_local_vectors_match_the_vectors_of_separate_calls(settings):
    texts = [f"how do I return item number {i}" for i in range(12)]
    settings.KNOWLEDGE_EMBEDDINGS_COALESCE_MAX = 0
    alone = [embed_texts([t])[0] for t in texts]
    settings.KNOWLEDGE_EMBEDDINGS_COALESCE_MAX = 256
    with ThreadPoolExecutor(6) as pool:
        together = list(pool.map(lambda t: embed_texts([t])[0], texts))
    for a, b in zip(alone, together, strict=True):
        assert similarity(a, b) > 0.9999
