"""Importing settings is pure: it starts no process and writes no file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Runs in a fresh interpreter: an audit hook records every process start and every file opened
# for writing (or directory made) while `config.settings` is imported and Django set up.
PROBE = r"""
import json, os, sys

events = []
removed = set()
WRITE_MODES = set("wax+")

def hook(event, args):
    if event in ("subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec",
                 "os.spawn", "os.system", "os.startfile"):
        events.append([event, repr(args)[:200]])
    elif event == "open" and len(args) > 1 and isinstance(args[1], str):
        if WRITE_MODES & set(args[1]):
            events.append([event, repr(args[0])])
    elif event == "open" and len(args) > 2 and isinstance(args[2], int):
        if args[2] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            events.append([event, repr(args[0])])
    elif event in ("os.mkdir", "os.rename", "os.chmod", "shutil.copyfile"):
        events.append([event, repr(args)[:200]])
    elif event == "os.remove":
        removed.add(repr(args[0]))

sys.addaudithook(hook)
import django
django.setup()
from django.conf import settings
settings.DATABASES, settings.CACHES, settings.CHANNEL_LAYERS, settings.STATIC_ROOT
# A probe the standard library makes and removes at once (tempfile's writable-directory check,
# multiprocessing's semaphore check) leaves nothing behind and does not count.
print(json.dumps([e for e in events if not (e[0] == "open" and e[1] in removed)]))
"""


def _import_settings(tmp_path: Path, **extra: str) -> list:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DJANGO_SECRET_KEY")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        SUPPORTBOT_VAR_DIR=str(tmp_path / "var"),
        PYTHONDONTWRITEBYTECODE="1",
        **extra,
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.process
def test_importing_settings_on_a_fresh_machine_starts_nothing_and_writes_nothing(tmp_path):
    events = _import_settings(tmp_path, DJANGO_DEBUG="1")

    assert events == []
    assert not (tmp_path / "var").exists()


@pytest.mark.process
def test_importing_settings_with_an_app_database_role_starts_nothing(tmp_path):
    events = _import_settings(tmp_path, DJANGO_DEBUG="1", SUPPORTBOT_DB_ROLE="app")

    assert events == []
    assert not (tmp_path / "var").exists()
