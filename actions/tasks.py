"""django-q2 tasks of the actions app: take ids, call a service, safe to run twice."""

from __future__ import annotations

from actions import services


def action_run_task(action_id: int) -> str:
    """Advance one action (check, execute or resolve by lookup); return its state."""
    action = services.action_run(action_id=action_id)
    if action.is_settled:
        services.notify_customer(action=action)
    return action.state


def actions_sweep_task() -> list[int]:
    """Resolve unknown / stuck actions by looking them up at the provider (every minute)."""
    return services.actions_sweep()
