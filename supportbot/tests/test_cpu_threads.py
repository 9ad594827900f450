import os
import subprocess
import sys

import pytest

from supportbot import cpu_threads
from supportbot.tests.stack import ROOT


@pytest.fixture
def clean_policy(monkeypatch):
    monkeypatch.delenv(cpu_threads.VARIABLE, raising=False)
    monkeypatch.setattr(cpu_threads, "_set_here", False)


def test_passive_wait_is_the_default_and_children_do_not_inherit_it(clean_policy):
    cpu_threads.prefer_passive_wait()
    assert os.environ[cpu_threads.VARIABLE] == "PASSIVE"
    child = cpu_threads.child_environment(dict(os.environ))
    assert cpu_threads.VARIABLE not in child
    os.environ.pop(cpu_threads.VARIABLE)


def test_an_operators_policy_is_kept_for_us_and_our_children(clean_policy, monkeypatch):
    monkeypatch.setenv(cpu_threads.VARIABLE, "ACTIVE")
    cpu_threads.prefer_passive_wait()
    assert os.environ[cpu_threads.VARIABLE] == "ACTIVE"
    assert cpu_threads.child_environment(dict(os.environ))[cpu_threads.VARIABLE] == "ACTIVE"


@pytest.mark.process
def test_the_policy_is_set_before_torch_loads_with_the_model():
    """OpenMP reads the policy once, when torch loads: loading the model on the torch runtime
    must set it first."""
    env = {k: v for k, v in os.environ.items() if k != cpu_threads.VARIABLE}
    env["EMBEDDINGS_RUNTIME"] = "torch"
    code = (
        "import django, os, sys; django.setup();"
        "assert 'torch' not in sys.modules, 'torch loaded at startup';"
        "from knowledge import embeddings; embeddings.local_model();"
        "assert 'torch' in sys.modules; print(os.environ['OMP_WAIT_POLICY'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "PASSIVE"
