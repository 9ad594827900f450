"""The tenant's shop as the action tests use it: the reference order service (demo/orders)
behind the tenant's provider config, with the default refund policy spelled out."""

from actions import services


def shop_connect(tenant, orders, *, timeout_seconds: float):
    """Point `tenant` at the running order service `orders`: refunds up to 50 run without
    approval, a 30-day window, at most 200 per customer a day; `timeout_seconds` per call."""
    tenant.refund_auto_limit = 50
    tenant.refund_window_days = 30
    tenant.refund_per_customer_daily_limit = 200
    tenant.save()
    services.provider_config_set(
        tenant=tenant, base_url=orders.url, token=orders.token, timeout_seconds=timeout_seconds
    )
    return orders
