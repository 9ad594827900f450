"""`make bench`: run every benchmark module (each writes its report under bench/out/).

The whole-stack ones (chat load, connections) start their own stack on free ports with a
database of their own; chat load adds a local vLLM worker when `.venv-vllm` exists.
"""

from bench import (
    analytics_rollup,
    chat_load,
    churn,
    connections,
    embedding_runtimes,
    embeddings,
    encryption,
    extraction,
    knowledge_search,
    verifier,
)

if __name__ == "__main__":
    knowledge_search.main([])
    analytics_rollup.main([])
    extraction.main([])
    embeddings.main([])
    embedding_runtimes.main([])
    encryption.main([])
    verifier.main([])
    chat_load.main([])
    connections.main([])
    churn.main([])
