import json

import pytest
from asgiref.sync import async_to_sync
from rest_framework.test import APIClient

from conversations.models import Conversation, Message
from handoffs.models import Handoff
from supportbot.services import api_key_create


@pytest.fixture(autouse=True)
def _local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


@pytest.fixture
def conv(api_client):
    r = api_client.post(
        "/api/v1/conversations",
        {"customer": {"external_id": "crm-77", "name": "Dana", "email": "dana@example.com"}},
        format="json",
    )
    assert r.status_code == 201, r.content
    return r.json()


@pytest.fixture
def other_client(other_tenant):
    _, raw = api_key_create(tenant=other_tenant, name="other")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def post_message(client, conv_id, client_id, text, **extra):
    return client.post(
        f"/api/v1/conversations/{conv_id}/messages",
        {"client_message_id": client_id, "text": text},
        format="json",
        **extra,
    )


def test_create_conversation_for_a_partner_customer(conv):
    assert conv["customer"] == {"external_id": "crm-77", "name": "Dana", "verified": True}
    assert conv["owner"] == "bot"
    assert conv["channel"] == "api"


def test_create_conversation_names_the_bad_field(api_client):
    r = api_client.post("/api/v1/conversations", {"customer": {"name": "x"}}, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["field"] == "customer.external_id"


def test_post_message_returns_the_saved_message_and_a_cited_reply(api_client, conv, help_center):
    r = post_message(api_client, conv["id"], "m1", "How long do refunds take?")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["message"]["role"] == "customer"
    assert body["message"]["client_message_id"] == "m1"
    reply = body["reply"]
    assert reply["state"] == "delivered"
    assert reply["kind"] in ("answer", "extractive")
    assert "5-10 business days" in reply["text"]
    citation = reply["citations"][0]
    assert citation["document_id"] == help_center["returns"].pk
    assert citation["title"] == "Returns and refunds"
    assert citation["heading"] == "Refund timing"
    # The card shows the passage around the quote, or nothing when the quote is all of it.
    assert citation["quote"] == "" or "5-10 business days" in citation["quote"]


def test_repeated_post_returns_the_same_reply_with_200(api_client, conv, help_center):
    first = post_message(api_client, conv["id"], "dup", "How long do refunds take?").json()
    for _ in range(2):
        r = post_message(api_client, conv["id"], "dup", "How long do refunds take?")
        assert r.status_code == 200, r.content
        assert r.json()["reply"]["id"] == first["reply"]["id"]
        assert r.json()["duplicate"] is True
    assert Message.objects.filter(conversation_id=conv["id"], role="bot").count() == 1


def test_handoff_reply_says_so_and_carries_no_citations(api_client, conv, help_center):
    r = post_message(api_client, conv["id"], "h1", "please let me talk to a human")
    reply = r.json()["reply"]
    assert reply["kind"] == "handoff"
    assert reply["citations"] == []
    assert r.json()["message"]["state"] == "handed_off"


def test_message_list_pages_with_a_cursor(api_client, conv, help_center):
    for i in range(3):
        post_message(api_client, conv["id"], f"p{i}", f"How long does shipping take? ({i})")
    seen, url = [], f"/api/v1/conversations/{conv['id']}/messages?limit=4"
    while url:
        r = api_client.get(url)
        assert r.status_code == 200, r.content
        seen += [(m["role"], m["id"]) for m in r.json()["results"]]
        url = r.json()["next"]
    assert [role for role, _ in seen] == ["customer", "bot"] * 3
    ids = [i for _, i in seen]
    assert ids == sorted(ids)


def test_other_tenant_gets_404_and_learns_nothing(other_client, conv, api_client, help_center):
    post_message(api_client, conv["id"], "m1", "How long do refunds take?")
    conv_id = conv["id"]
    bot_id = Message.objects.get(conversation_id=conv_id, role="bot").pk
    responses = [
        other_client.get(f"/api/v1/conversations/{conv_id}/messages"),
        post_message(other_client, conv_id, "x", "hi"),
        other_client.post(f"/api/v1/conversations/{conv_id}/handoffs", {}, format="json"),
        other_client.post(
            f"/api/v1/messages/{bot_id}/feedback", {"rating": "helpful"}, format="json"
        ),
    ]
    for r in responses:
        assert r.status_code == 404, r.content
        assert "refund" not in r.content.decode().lower()
    assert Message.objects.filter(conversation_id=conv_id).count() == 2
    assert not Handoff.objects.filter(conversation_id=conv_id).exists()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"text": "hi"}, "client_message_id"),
        ({"client_message_id": "a"}, "text"),
        ({"client_message_id": "a", "text": ""}, "text"),
        ({"client_message_id": "a", "text": "x" * 4001}, "text"),
        ({"client_message_id": "a" * 101, "text": "hi"}, "client_message_id"),
    ],
)
def test_malformed_message_is_400_naming_the_field(api_client, conv, payload, field):
    r = api_client.post(f"/api/v1/conversations/{conv['id']}/messages", payload, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["field"] == field
    assert not Message.objects.filter(conversation_id=conv["id"]).exists()


def test_handoff_endpoint_is_idempotent(api_client, conv):
    url = f"/api/v1/conversations/{conv['id']}/handoffs"
    first = api_client.post(url, {"detail": "VIP"}, format="json")
    second = api_client.post(url, {}, format="json")
    assert first.status_code == 201, first.content
    assert second.status_code == 200, second.content
    assert first.json()["id"] == second.json()["id"]
    assert first.json()["state"] == "queued"
    assert Handoff.objects.filter(conversation_id=conv["id"]).count() == 1


def test_feedback_is_recorded_and_can_be_changed(api_client, conv, help_center):
    reply_id = post_message(api_client, conv["id"], "m1", "How long do refunds take?").json()[
        "reply"
    ]["id"]
    url = f"/api/v1/messages/{reply_id}/feedback"
    assert api_client.post(url, {"rating": "helpful"}, format="json").status_code == 200
    r = api_client.post(url, {"rating": "not_helpful", "comment": "too vague"}, format="json")
    assert r.status_code == 200, r.content
    message = Message.objects.get(pk=reply_id)
    assert (message.feedback.rating, message.feedback.comment) == ("not_helpful", "too vague")
    bad = api_client.post(url, {"rating": "meh"}, format="json")
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "rating"


def test_feedback_on_a_customer_message_is_rejected(api_client, conv, help_center):
    body = post_message(api_client, conv["id"], "m1", "How long do refunds take?").json()
    r = api_client.post(
        f"/api/v1/messages/{body['message']['id']}/feedback", {"rating": "helpful"}, format="json"
    )
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "message_id"


async def _collect(response) -> bytes:
    return b"".join([chunk async for chunk in response.streaming_content])


def test_sse_streams_the_websocket_events(api_client, conv, help_center):
    r = post_message(
        api_client, conv["id"], "s1", "How long do refunds take?", HTTP_ACCEPT="text/event-stream"
    )
    assert r.status_code == 200
    assert r["Content-Type"] == "text/event-stream"
    raw = async_to_sync(_collect)(r).decode()
    events = [json.loads(block.split("data: ", 1)[1]) for block in raw.strip().split("\n\n")]
    types = [e["type"] for e in events]
    assert types[0] == "message.accepted"
    assert types[-1] == "answer.completed"
    assert "answer.delta" in types
    assert events[-1]["citations"]


def test_closed_conversation_rejects_new_messages(api_client, conv):
    Conversation.objects.filter(pk=conv["id"]).update(state="closed")
    r = post_message(api_client, conv["id"], "m1", "hello")
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "conflict"
