"""pytest plugin (`-p config.pytest_services` in pyproject's addopts): start the embedded
services and write the development keys before pytest-django imports settings.

Importing settings starts nothing, so a test run starts what settings will name as embedded
(no `DATABASE_URL` / `REDIS_URL`) here, as `make run` does with `manage.py services start`.
"""

import pytest

from config.env import env
from supportbot import devservices


def services_start_for_tests() -> None:
    """Start the embedded PostgreSQL and Valkey unless URLs are set; write dev keys."""
    database_url = env.str("DATABASE_URL", default="")
    devservices.services_start(
        postgres=not database_url,
        valkey=not env.str("REDIS_URL", default=""),
        dev_files=not database_url or devservices.is_embedded_postgres_url(database_url),
    )


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    services_start_for_tests()
    return (yield)
