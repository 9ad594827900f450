import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from django.conf import settings

from knowledge import embeddings, minilm, minilm_export
from knowledge.tests import minilm_reference
from supportbot import cpu_threads
from supportbot.tests.stack import ROOT


@pytest.fixture(scope="module")
def reference():
    data = np.load(minilm_reference.FIXTURE)
    assert list(data["texts"]) == minilm_reference.texts(), "fixture is stale: regenerate it"
    return data


@pytest.fixture(scope="module")
def encoder():
    return minilm.OnnxEncoder(settings.KNOWLEDGE_EMBEDDINGS_ONNX_DIR, threads=2, spin=False)


def test_onnx_sentence_vectors_match_the_torch_reference(encoder, reference):
    """Demo passages (one truncated at 256 word pieces) and dev-set questions: same vectors,
    component by component (a CLS pooling or a missing normalization would not pass)."""
    ours = encoder.sentence_vectors(list(reference["texts"]))
    theirs = reference["vectors"].astype(np.float32)
    cosines = (ours * theirs).sum(axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosines.min() >= 0.999, list(zip(cosines.round(5), reference["texts"], strict=True))
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert np.abs(ours - theirs).max() < 5e-3


def test_onnx_word_piece_vectors_match_the_torch_reference_with_the_same_spans(encoder, reference):
    texts = list(reference["texts"][: minilm_reference.TOKEN_TEXTS])
    ours = encoder.token_vectors(texts)
    at = 0
    for (spans, rows), count in zip(ours, reference["token_counts"], strict=True):
        assert spans == [tuple(s) for s in reference["token_spans"][at : at + count].tolist()]
        theirs = reference["token_rows"][at : at + count].astype(np.float32)
        cosines = (rows * theirs).sum(axis=1) / (
            np.linalg.norm(rows, axis=1) * np.linalg.norm(theirs, axis=1)
        )
        assert cosines.min() >= 0.999
        np.testing.assert_allclose(rows, theirs, atol=0.02)
        at += count


def test_a_text_embeds_the_same_alone_and_in_a_padded_batch(encoder):
    texts = ["refund", "Can I return a tent with a broken zipper after 40 days?", "ok " * 400]
    together = encoder.sentence_vectors(texts)
    for text, row in zip(texts, together, strict=True):
        np.testing.assert_allclose(encoder.sentence_vectors([text])[0], row, atol=1e-5)


def test_a_missing_export_names_the_setup_command(tmp_path):
    with pytest.raises(minilm.ModelNotExported, match="make setup"):
        minilm.OnnxEncoder(tmp_path / "nothing-here", threads=1, spin=False)


def test_a_web_process_without_the_export_reports_the_setup_command_in_readyz(
    settings,  # noqa: F811 - pytest-django's fixture
    tmp_path,
    monkeypatch,
):
    from knowledge import warmup

    settings.KNOWLEDGE_EMBEDDINGS_ONNX_DIR = tmp_path / "not-exported"
    monkeypatch.setattr(embeddings, "_model", None)
    monkeypatch.setattr(warmup, "_state", warmup.WARMING)
    warmup._run()
    assert warmup.readiness().startswith("failed: ModelNotExported: No ONNX embedding model")
    assert "make setup" in warmup.readiness()


def test_an_export_of_another_package_version_is_refused(tmp_path, encoder):
    stale = tmp_path / "minilm-onnx"
    shutil.copytree(settings.KNOWLEDGE_EMBEDDINGS_ONNX_DIR, stale)
    manifest = json.loads((stale / minilm.MANIFEST).read_text())
    (stale / minilm.MANIFEST).write_text(json.dumps({**manifest, "package_version": "0.0.1"}))
    with pytest.raises(minilm.ModelNotExported, match=r"0\.0\.1.*make setup"):
        minilm.manifest_check(stale)


def test_the_export_in_var_is_up_to_date_with_the_installed_package(encoder):
    source = minilm.package_dir()
    assert minilm_export.up_to_date(
        settings.KNOWLEDGE_EMBEDDINGS_ONNX_DIR, minilm_export.wanted_manifest(source)
    )


def test_the_sentence_pipeline_is_read_from_the_package():
    assert minilm_export.sentence_config(minilm.package_dir()) == {
        "pooling": "mean",
        "normalize": True,
        "max_seq_length": 256,
        "dimensions": 384,
    }


def test_an_unknown_runtime_is_an_error(settings):  # noqa: F811 - pytest-django's fixture
    settings.KNOWLEDGE_EMBEDDINGS_RUNTIME = "tensorflow"
    with pytest.raises(embeddings.EmbeddingError, match="EMBEDDINGS_RUNTIME"):
        embeddings.local_model()


def test_cores_follow_the_cgroup_quota(tmp_path, monkeypatch):
    cpu_max = tmp_path / "cpu.max"
    monkeypatch.setattr(cpu_threads, "CGROUP_CPU_MAX", cpu_max)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    cpu_max.write_text("150000 100000\n")
    assert cpu_threads.cores_available() == 2
    cpu_max.write_text("max 100000\n")
    assert cpu_threads.cores_available() == 64
    cpu_max.unlink()
    assert cpu_threads.cores_available() == 64


def test_spinning_only_when_the_operator_asks(monkeypatch):
    monkeypatch.delenv(cpu_threads.VARIABLE, raising=False)
    assert not cpu_threads.spinning_wanted()
    monkeypatch.setenv(cpu_threads.VARIABLE, "active")
    assert cpu_threads.spinning_wanted()


@pytest.mark.process
def test_web_and_worker_processes_embed_without_torch_and_forked_workers_load_their_own():
    """The embedding path as a process uses it (warm-up, sentence and word-piece vectors, a
    fork as django-q2 makes one) never imports torch or sentence-transformers."""
    code = """
import os, sys, django
django.setup()
from knowledge import embeddings, warmup
warmup._run()
assert warmup.state() == "ok", warmup.state()
parent = embeddings.local_model()
before = embeddings.embed_texts(["where is my order"])[0]
pid = os.fork()
if pid == 0:
    after = embeddings.embed_texts(["where is my order"])[0]
    ok = embeddings.local_model() is not parent and embeddings.similarity(after, before) > 0.9999
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
print("heavy:", heavy)
"""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.pop("EMBEDDINGS_RUNTIME", None)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "heavy: []"


@pytest.mark.process
def test_an_up_to_date_export_returns_without_loading_torch():
    code = (
        "import sys; from knowledge import minilm_export;"
        f"minilm_export.main([{str(settings.KNOWLEDGE_EMBEDDINGS_ONNX_DIR)!r}]);"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "is up to date" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "False"
