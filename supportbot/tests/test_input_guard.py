"""Bad input on API paths gets a 4xx in the one JSON error shape, never a 500 or HTML."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile


def assert_json_error(response, status: int, code: str | None = None, field: str | None = None):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    error = response.json()["error"]
    assert set(error) <= {"code", "detail", "field", "fields"}
    assert error["detail"]
    if code is not None:
        assert error["code"] == code
    if field is not None:
        assert error["field"] == field
    return error


def test_oversize_json_body_is_413_json(api_client, settings):
    body = json.dumps({"customer": {"external_id": "x" * 3_000_000}})
    assert len(body) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    r = api_client.post("/api/v1/conversations", data=body, content_type="application/json")
    assert_json_error(r, 413, "request_too_large")


def test_oversize_multipart_upload_is_413_json_before_it_is_read(api_client, settings):
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 1024
    upload = SimpleUploadedFile("big.txt", b"Refunds take five days.\n" * 20_000)
    r = api_client.post("/api/v1/knowledge-documents", data={"file": upload}, format="multipart")
    assert_json_error(r, 413, "request_too_large", field="file")


def test_multipart_upload_under_the_limit_passes_the_middleware(api_client, settings):
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 2 * 1024 * 1024
    upload = SimpleUploadedFile("big.txt", b"Refunds take five days.\n\n" * 60_000)
    r = api_client.post("/api/v1/knowledge-documents", data={"file": upload}, format="multipart")
    assert r.status_code == 202, r.content


@pytest.mark.parametrize(
    "body",
    [
        b'{"customer": {"external_id": "\xff\xfe"}}',  # invalid UTF-8
        b'{"customer": ',  # truncated
        b"[" * 100_000 + b"]" * 100_000,  # nesting beyond Python's parser
        b"\xef\xbb\xbf\x00\x00",
        b"1e999999",
    ],
    ids=["invalid-utf8", "truncated", "deep-nesting", "nul-bytes", "huge-number"],
)
def test_unparseable_json_body_is_400_json(api_client, body):
    r = api_client.post("/api/v1/conversations", data=body, content_type="application/json")
    assert_json_error(r, 400)


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/api/v1/conversations", {"customer": {"external_id": "a\u0000b"}}),
        ("/api/v1/conversations", {"customer": {"external_id": "c1", "name": "\u0000"}}),
        ("/api/v1/conversations/1/messages", {"client_message_id": "m\u0000", "text": "hi"}),
        ("/api/v1/conversations/1/messages", {"client_message_id": "m1", "text": "\u0000"}),
    ],
)
def test_nul_characters_in_json_text_fields_are_400_json(api_client, path, payload):
    r = api_client.post(path, data=json.dumps(payload), content_type="application/json")
    assert_json_error(r, 400, "invalid")


def test_escaped_backslash_before_u0000_is_text_not_a_nul(api_client):
    body = json.dumps({"customer": {"external_id": "C:\\u0000-tools"}})
    assert "\\\\u0000" in body
    r = api_client.post("/api/v1/conversations", data=body, content_type="application/json")
    assert r.status_code == 201, r.content


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/audit-events?action=%00",
        "/api/v1/audit-events?cursor=%00",
        "/api/v1/audit-events?%00=1",
        "/api/v1/search?q=refund%00",
    ],
)
def test_nul_characters_in_query_parameters_are_400_json(api_client, path):
    assert_json_error(api_client.get(path), 400, "invalid")


def test_nul_characters_in_other_headers_are_400_json(api_client):
    r = api_client.get("/api/v1/tenant", HTTP_X_SUPPORTBOT_TENANT="acme\x00")
    assert_json_error(r, 400, "invalid", field="X-Supportbot-Tenant")


def test_huge_query_string_is_414_json(api_client):
    assert_json_error(api_client.get("/api/v1/search?q=" + "x" * 20_000), 414, "uri_too_long")


def test_too_many_query_parameters_are_400_json(api_client):
    query = "&".join(f"p{i}=1" for i in range(2_000))
    assert_json_error(api_client.get(f"/api/v1/audit-events?{query}"), 400, "invalid")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/audit-events/abc",
        "/api/v1/audit-events/-1",
        "/api/v1/audit-events/1.5",
        "/api/v1/knowledge-documents/%F0%9F%92%A9",
        "/api/v1/no-such-endpoint",
    ],
)
def test_unknown_api_paths_and_non_integer_ids_are_404_json(api_client, path):
    assert_json_error(api_client.get(path), 404, "not_found")


@pytest.mark.parametrize(
    "path", ["/api/v1/audit-events/99999999999999999999999", "/api/v1/knowledge-documents/0"]
)
def test_out_of_range_ids_are_404_json(api_client, path):
    assert_json_error(api_client.get(path), 404, "not_found")


@pytest.mark.parametrize("length", ["abc", "-5"], ids=["not-a-number", "negative"])
def test_malformed_content_length_is_400_json(api_client, length):
    r = api_client.post(
        "/api/v1/conversations", data=b"{}", content_type="application/json", CONTENT_LENGTH=length
    )
    assert_json_error(r, 400, "invalid", field="body")


def test_pages_outside_the_api_keep_html_errors(client, db):
    r = client.get("/no-such-page/")
    assert r.status_code == 404
    assert r["Content-Type"].startswith("text/html")


@pytest.fixture
def conversation_id(api_client):
    created = api_client.post(
        "/api/v1/conversations", {"customer": {"external_id": "c-surrogate"}}, format="json"
    )
    assert created.status_code == 201, created.content
    return created.json()["id"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"client_message_id": "m1", "text": "\ud800"}, "text"),
        ({"client_message_id": "m1", "text": "refund me \udfff please"}, "text"),
        ({"client_message_id": "m1", "text": "\ude00\ud83d"}, "text"),  # a pair the wrong way
        ({"client_message_id": "m\udc00", "text": "hi"}, "client_message_id"),
    ],
    ids=["lone-high", "lone-low-inside", "reversed-pair", "in-client-message-id"],
)
def test_a_lone_surrogate_in_a_message_is_a_400_naming_the_field(
    api_client, conversation_id, payload, field
):
    body = json.dumps(payload)  # ensure_ascii: the surrogate travels as a \\udXXX escape
    assert "\\ud" in body
    r = api_client.post(
        f"/api/v1/conversations/{conversation_id}/messages",
        data=body,
        content_type="application/json",
    )
    error = assert_json_error(r, 400, "invalid", field=field)
    assert "surrogate" in error["detail"]
    assert (
        api_client.get(f"/api/v1/conversations/{conversation_id}/messages").json()["results"] == []
    )


def test_a_surrogate_pair_and_an_escaped_backslash_before_ud800_are_text(
    api_client, conversation_id
):
    body = json.dumps({"client_message_id": "m1", "text": "thanks \U0001f600 C:\\ud800"})
    assert "\\ud83d\\ude00" in body
    assert "\\\\ud800" in body
    r = api_client.post(
        f"/api/v1/conversations/{conversation_id}/messages",
        data=body,
        content_type="application/json",
    )
    assert r.status_code == 201, r.content
    assert r.json()["message"]["text"] == "thanks \U0001f600 C:\\ud800"


def test_a_lone_surrogate_in_a_nested_field_is_a_400(api_client):
    body = json.dumps({"customer": {"external_id": "c1", "name": "Ann \ud800"}})
    r = api_client.post("/api/v1/conversations", data=body, content_type="application/json")
    assert_json_error(r, 400, "invalid", field="customer.name")
