"""Errors raised outside DRF's handler still answer API paths in the JSON error shape."""

from unittest import mock

from rest_framework.test import APIClient


def test_unexpected_error_on_an_api_path_is_a_json_500_without_details(api_key):
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key.raw}")
    with mock.patch("supportbot.api.request_tenant", side_effect=RuntimeError("secret detail")):
        r = client.get("/api/v1/tenant")
    assert r.status_code == 500
    assert r.json() == {
        "error": {"code": "server_error", "detail": "Something went wrong on our side."}
    }


def test_unexpected_error_on_a_page_keeps_the_html_500(client, db):
    client.raise_request_exception = False
    with mock.patch("knowledge.views.selectors.document_page_get", side_effect=RuntimeError):
        r = client.get("/kb/acme/1/")
    assert r.status_code == 500
    assert r["Content-Type"].startswith("text/html")
