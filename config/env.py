"""The one place the process environment is read for settings (django-environ).

`env` reads `.env` at the repository root when present. Nothing here starts a process or
writes a file: embedded services are started by `manage.py services start` (run by `make
run`, `.ci/run` and the test conftest), and development key files are written by the same
command, never by importing settings.
"""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
_env_file = BASE_DIR / ".env"
if _env_file.exists():
    environ.Env.read_env(str(_env_file))
