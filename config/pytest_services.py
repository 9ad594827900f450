"""pytest plugin (`-p config.pytest_services` in pyproject's addopts): start the embedded
services and write the development keys before pytest-django imports settings.

Importing settings starts nothing, so a test run starts what settings will name as embedded
(no `DATABASE_URL` / `REDIS_URL`) here, as `make run` does with `manage.py services start`.
"""

import os

import pytest

from config.env import env
from supportbot import devservices


def services_start_for_tests() -> None:
    """Say this is a test run (`SUPPORTBOT_ENV=test`, unless set: child processes inherit it);
    give each xdist worker a Redis database of its own; start the embedded PostgreSQL and
    Valkey unless URLs are set; write dev keys."""
    os.environ.setdefault("SUPPORTBOT_ENV", "test")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw"):
        # `make test-fast` runs on xdist workers: each its own Redis database (its own test
        # PostgreSQL database comes from pytest-django), so no worker flushes another's keys.
        base = int(os.environ.get("SUPPORTBOT_REDIS_DB", "1"))
        os.environ["SUPPORTBOT_REDIS_DB"] = str(base + int(worker[2:]))
    database_url = env.str("DATABASE_URL", default="")
    devservices.services_start(
        postgres=not database_url,
        valkey=not env.str("REDIS_URL", default=""),
        dev_files=os.environ["SUPPORTBOT_ENV"] != "production",
    )


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    services_start_for_tests()
    return (yield)
