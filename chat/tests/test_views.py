"""The chat page: what its greeting promises is what the tenant offers."""

from actions import services as action_services


def _greeting(client, tenant) -> str:
    response = client.get(f"/chat/{tenant.slug}/")
    assert response.status_code == 200
    html = response.content.decode()
    start = html.index('class="msg system greeting">')
    return html[start : html.index("</p>", start)]


def test_a_tenant_without_an_order_system_is_not_offered_order_help(client, tenant):
    greeting = _greeting(client, tenant)
    assert "orders" not in greeting
    assert "refunds" not in greeting
    assert "Acme Test assistant" in greeting
    assert 'placeholder="Ask a question…"' in client.get(f"/chat/{tenant.slug}/").content.decode()


def test_a_tenant_with_an_order_system_offers_order_help(client, tenant):
    action_services.provider_config_set(
        tenant=tenant, base_url="http://127.0.0.1:9/", token="t0ken-for-tests"
    )
    assert "your orders, returns and refunds" in _greeting(client, tenant)


def test_the_greeting_is_one_line_because_the_log_keeps_white_space(client, tenant):
    assert "\n" not in _greeting(client, tenant)


def test_another_tenants_order_system_does_not_reach_this_tenants_greeting(
    client, tenant, other_tenant
):
    action_services.provider_config_set(
        tenant=other_tenant, base_url="http://127.0.0.1:9/", token="t0ken-for-tests"
    )
    assert "your orders, returns and refunds" in _greeting(client, other_tenant)
    assert "orders" not in _greeting(client, tenant)


def test_a_disabled_order_system_is_not_offered(client, tenant):
    config = action_services.provider_config_set(
        tenant=tenant, base_url="http://127.0.0.1:9/", token="t0ken-for-tests"
    )
    config.enabled = False
    config.save(update_fields=["enabled"])
    assert "orders" not in _greeting(client, tenant)
