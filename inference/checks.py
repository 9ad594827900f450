"""System checks: a malformed worker configuration stops start-up instead of failing turns."""

from __future__ import annotations

from django.core.checks import Error, register

from inference import discovery, services
from inference.config import get_config


@register()
def check_worker_sources(app_configs=None, **kwargs) -> list[Error]:
    """`INFERENCE_DISCOVERY` and `INFERENCE_WORKERS` parse (`manage.py check`, daphne start)."""
    errors = []
    config = get_config()
    if config.discovery.strip():
        try:
            discovery.parse_spec(config.discovery)
        except ValueError as exc:
            errors.append(Error(str(exc), id="inference.E001"))
    if config.workers.strip():
        try:
            services.parse_external_workers(config.workers, default_model=config.served_model_name)
        except ValueError as exc:
            errors.append(Error(str(exc), id="inference.E002"))
    return errors
