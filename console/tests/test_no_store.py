"""Responses holding a secret or a customer's data tell every cache not to keep them."""

from django.test import Client

from conversations.tests.test_customer_data import fill_customer, marker


def _admin(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_widget_secret_page_and_api_are_no_store(tenant, tenant_admin):
    client = _admin(tenant_admin)
    for response in (
        client.get("/console/widget/"),
        client.get("/console/api/widget-secret"),
        client.post(
            "/console/api/widget-secret/rotate",
            {"overlap_seconds": 0},
            content_type="application/json",
        ),
    ):
        assert response.status_code == 200, response.content
        assert "no-store" in response["Cache-Control"]


def test_customer_exports_and_the_audit_download_are_no_store(tenant, tenant_admin, api_client):
    fill_customer(tenant, "crm-cache", marker())
    client = _admin(tenant_admin)
    for response in (
        client.get("/console/customers/export?external_id=crm-cache"),
        client.get("/console/audit.csv"),
        api_client.get("/api/v1/customers/crm-cache/export"),
    ):
        assert response.status_code == 200, response.content
        assert "no-store" in response["Cache-Control"]
