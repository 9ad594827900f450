"""Where the deployment tests find the repository and the external tools they run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def require_tool(name: str) -> str:
    """The path of `name`; skip without it, except under CI=true where it is a failure
    (.ci/run installs it)."""
    path = shutil.which(name)
    if path:
        return path
    reason = f"{name} is not installed (apt-get install -y docker-compose prometheus)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and a required tool is missing: {reason}")
    pytest.skip(reason)
