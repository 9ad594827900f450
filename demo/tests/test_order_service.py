"""The reference order service over real HTTP (a subprocess on a loopback port)."""

import httpx
import pytest
from cryptography.fernet import Fernet

from actions import crypto
from demo.orders import config as order_service_config
from demo.seed import seed_all
from supportbot.models import Tenant


@pytest.fixture
def http(orders):
    with httpx.Client(
        base_url=orders.url, headers={"Authorization": f"Bearer {orders.token}"}, timeout=5
    ) as client:
        yield client


def test_openapi_document_is_served_without_a_token(orders):
    doc = httpx.get(f"{orders.url}/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    assert {"/orders/{order_id}", "/refunds"} <= set(doc["paths"])
    assert doc["paths"]["/refunds"]["post"]["parameters"][0]["name"] == "Idempotency-Key"


def test_every_business_route_needs_the_bearer_token(orders):
    assert httpx.get(f"{orders.url}/orders/A-1042").status_code == 401
    r = httpx.get(f"{orders.url}/orders/A-1042", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401


def test_order_lookup_returns_owner_items_status_amount_and_dates(http):
    order = http.get("/orders/A-1042").json()
    assert order["owner"] == "cust-1001"
    assert order["status"] == "delivered"
    assert order["amount"] == "89.99"
    assert order["items"][0]["name"]
    assert order["delivered_at"]
    assert http.get("/orders/A-9999").status_code == 404


def test_refund_needs_an_idempotency_key(http):
    r = http.post("/refunds", json={"order_id": "A-1042", "amount": "10.00", "reason": "x"})
    assert r.status_code == 400


def test_repeated_refund_returns_the_first_result_and_a_changed_body_is_422(http, orders):
    body = {"order_id": "A-1042", "amount": "10.00", "reason": "x"}
    first = http.post("/refunds", json=body, headers={"Idempotency-Key": "k-1"})
    again = http.post("/refunds", json=body, headers={"Idempotency-Key": "k-1"})
    changed = http.post(
        "/refunds", json={**body, "amount": "11.00"}, headers={"Idempotency-Key": "k-1"}
    )

    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["replayed"] is True
    assert changed.status_code == 422
    assert len(orders.refunds()) == 1
    found = http.get("/refunds", params={"idempotency_key": "k-1"}).json()["results"]
    assert [r["id"] for r in found] == [first.json()["id"]]
    assert http.get("/refunds", params={"idempotency_key": "nope"}).json()["results"] == []


def test_refunds_cannot_exceed_the_order_amount(http):
    over = {"order_id": "A-2001", "amount": "45.01", "reason": "x"}
    assert http.post("/refunds", json=over, headers={"Idempotency-Key": "k-2"}).status_code == 422


def test_injected_5xx_does_nothing(http, orders):
    orders.set_faults(fail_count=1, fail_status=503)
    body = {"order_id": "A-1042", "amount": "10.00", "reason": "x"}
    assert http.post("/refunds", json=body, headers={"Idempotency-Key": "k-3"}).status_code == 503
    assert orders.refunds() == []


def test_commit_then_timeout_commits_but_the_client_times_out(http, orders):
    orders.set_faults(commit_then_timeout_count=1, timeout_sleep_s=1.5)
    body = {"order_id": "A-1042", "amount": "10.00", "reason": "x"}
    with pytest.raises(httpx.ReadTimeout):
        http.post("/refunds", json=body, headers={"Idempotency-Key": "k-4"}, timeout=0.5)
    assert len(orders.refunds()) == 1


def test_seed_points_the_demo_tenant_at_the_order_service(db, settings):
    settings.ORDER_SERVICE_URL = ""
    seed_all()
    seed_all()
    acme = Tenant.objects.get(slug="acme")
    assert acme.order_provider.base_url == order_service_config.load().base_url
    assert acme.order_provider.credentials_encrypted
    assert order_service_config.load().token not in acme.order_provider.credentials_encrypted
    assert set(acme.customers.values_list("external_id", flat=True)) >= {"cust-1001", "cust-1002"}


def test_seed_stores_the_token_again_when_it_was_encrypted_under_another_key(db, settings):
    """A regenerated var/secret-key (or the old derivation) leaves unreadable credentials."""
    settings.ORDER_SERVICE_URL = ""
    seed_all()
    acme = Tenant.objects.get(slug="acme")
    stale = Fernet(Fernet.generate_key()).encrypt(b"old-token").decode()
    type(acme.order_provider).objects.filter(pk=acme.order_provider.pk).update(
        credentials_encrypted=stale
    )
    seed_all()
    acme.order_provider.refresh_from_db()
    assert crypto.decrypt(acme.order_provider.credentials_encrypted) == (
        order_service_config.load().token
    )
