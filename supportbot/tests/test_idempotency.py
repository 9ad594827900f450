"""`Idempotency-Key` on partner POSTs (Stripe's semantics), and API keys only."""

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.urls import URLPattern, URLResolver
from django.utils import timezone
from rest_framework.test import APIClient

from config import urls
from conversations.models import Conversation
from supportbot import idempotency
from supportbot.models import IdempotencyKey
from supportbot.services import api_key_create
from supportbot.tests.factories import MembershipFactory


def create(client, external_id="cust-1", key="k-1"):
    return client.post(
        "/api/v1/conversations",
        {"customer": {"external_id": external_id}},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def test_same_key_and_body_replays_the_saved_response(api_client, tenant):
    first = create(api_client)
    again = create(api_client)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Conversation.objects.filter(tenant=tenant).count() == 1


def test_same_key_with_another_body_is_a_422(api_client, tenant):
    create(api_client)
    other = create(api_client, external_id="cust-2")
    assert other.status_code == 422, other.content
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert other.json()["error"]["field"] == "Idempotency-Key"
    assert Conversation.objects.filter(tenant=tenant).count() == 1


def test_a_client_error_is_saved_and_replayed_too(api_client):
    bad = api_client.post(
        "/api/v1/conversations", {"customer": {}}, format="json", HTTP_IDEMPOTENCY_KEY="k-bad"
    )
    again = api_client.post(
        "/api/v1/conversations", {"customer": {}}, format="json", HTTP_IDEMPOTENCY_KEY="k-bad"
    )
    assert bad.status_code == again.status_code == 400
    assert again["Idempotent-Replayed"] == "true"


def test_a_running_request_holds_the_key_until_it_is_abandoned(api_client, tenant):
    create(api_client, key="k-busy")
    record = IdempotencyKey.objects.get(key="k-busy")
    record.state = IdempotencyKey.State.IN_PROGRESS  # as if the first request still ran
    record.save()
    busy = create(api_client, key="k-busy")
    assert busy.status_code == 409, busy.content
    assert busy.json()["error"]["code"] == "idempotency_in_progress"
    assert busy["Retry-After"] == "1"
    IdempotencyKey.objects.filter(pk=record.pk).update(
        updated_at=timezone.now() - timedelta(minutes=5)
    )
    taken_over = create(api_client, key="k-busy")
    assert taken_over.status_code == 201
    assert IdempotencyKey.objects.get(key="k-busy").state == "done"


def test_keys_are_per_tenant(api_client, other_tenant):
    create(api_client, key="shared")
    _, raw = api_key_create(tenant=other_tenant, name="other")
    theirs = APIClient()
    theirs.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    r = create(theirs, key="shared")
    assert r.status_code == 201
    assert "Idempotent-Replayed" not in r
    assert Conversation.objects.filter(tenant=other_tenant).count() == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "bad\nkey"])
def test_malformed_keys_are_refused(api_client, key):
    r = create(api_client, key=key)
    assert r.status_code == 400, r.content
    assert r.json()["error"]["field"] == "Idempotency-Key"


def _partner_paths(patterns, prefix="/api/v1/"):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _partner_paths(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            route = str(p.pattern)
            for name in ("conversation_id", "action_id", "message_id", "document_id", "event_id"):
                route = route.replace(f"<int:{name}>", "1")
            yield prefix + route


PARTNER_PATHS = sorted(set(_partner_paths(urls.api_v1)))


def test_every_partner_endpoint_is_listed():
    assert len(PARTNER_PATHS) >= 12
    assert "/api/v1/conversations/1/actions/1/confirm" in PARTNER_PATHS


@pytest.mark.parametrize("path", PARTNER_PATHS)
@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_an_agents_browser_session_is_refused_on_every_partner_endpoint(tenant, path, method):
    agent = MembershipFactory(tenant=tenant, role="admin").user
    client = APIClient(enforce_csrf_checks=False)
    client.force_login(agent)
    r = getattr(client, method)(path, {}, format="json")
    assert r.status_code in (401, 403), (path, method, r.status_code, r.content[:200])
    assert r.json()["error"]["code"] in ("not_authenticated", "permission_denied")


@pytest.fixture
def second_key_client(tenant):
    """Another API key of the same tenant (another integration of the same company)."""
    _, raw = api_key_create(tenant=tenant, name="second integration")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_keys_are_per_api_key_within_a_tenant(api_client, second_key_client, tenant):
    mine = create(api_client, external_id="cust-1", key="shared")
    theirs = create(second_key_client, external_id="cust-2", key="shared")  # not a 422
    assert mine.status_code == theirs.status_code == 201, theirs.content
    assert "Idempotent-Replayed" not in theirs
    # Each key replays its own response, never the other's.
    assert create(api_client, external_id="cust-1", key="shared").json() == mine.json()
    assert create(second_key_client, external_id="cust-2", key="shared").json() == theirs.json()
    assert Conversation.objects.filter(tenant=tenant).count() == 2


def test_the_same_body_under_another_api_key_runs_again_instead_of_replaying(
    api_client, second_key_client, tenant
):
    mine = create(api_client, key="shared")
    theirs = create(second_key_client, key="shared")
    assert theirs.status_code == 201, theirs.content
    assert "Idempotent-Replayed" not in theirs
    assert theirs.json()["id"] != mine.json()["id"]


def test_the_query_string_is_part_of_the_request(api_client, tenant):
    body = {"customer": {"external_id": "cust-q"}}
    url = "/api/v1/conversations?source=crm&campaign=spring"
    first = api_client.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="k-q")
    assert first.status_code == 201, first.content
    reordered = api_client.post(
        "/api/v1/conversations?campaign=spring&source=crm",
        body,
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-q",
    )
    assert reordered["Idempotent-Replayed"] == "true"  # the same query in another order
    other = api_client.post(
        "/api/v1/conversations?source=crm&campaign=autumn",
        body,
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-q",
    )
    assert other.status_code == 422, other.content
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert Conversation.objects.filter(tenant=tenant).count() == 1


def test_an_uncaught_exception_releases_the_key_at_once(api_client, tenant, monkeypatch):
    from chat.api import conversations as conversations_api

    start = conversations_api.services.conversation_start

    def broken(**kwargs):
        raise RuntimeError("the database went away mid-request")

    monkeypatch.setattr(conversations_api.services, "conversation_start", broken)
    with pytest.raises(RuntimeError):
        create(api_client, key="k-crash")
    assert not IdempotencyKey.objects.filter(key="k-crash").exists()
    monkeypatch.setattr(conversations_api.services, "conversation_start", start)
    retry = create(api_client, key="k-crash")  # runs again at once: no 409 for two minutes
    assert retry.status_code == 201, retry.content
    assert "Idempotent-Replayed" not in retry


@pytest.mark.django_db(transaction=True)
def test_two_requests_racing_with_one_key_run_once(api_key, tenant, monkeypatch):
    """Both requests start together (a barrier); the one that claims the key is held inside
    the view until the other has its answer: a 409, never a second conversation."""
    from chat.api import conversations as conversations_api

    start = conversations_api.services.conversation_start
    inside, let_go = threading.Event(), threading.Event()

    def held(**kwargs):
        inside.set()
        assert let_go.wait(60)
        return start(**kwargs)

    monkeypatch.setattr(conversations_api.services, "conversation_start", held)
    barrier = threading.Barrier(2)
    answers: list = []

    def partner() -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key.raw}")
        try:
            barrier.wait()
            answers.append(create(client, key="k-race"))
        finally:
            if len(answers) == 1:
                let_go.set()  # the loser answered: let the winner finish
            connections.close_all()

    threads = [threading.Thread(target=partner) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert inside.is_set()
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [201, 409], [r.content for r in answers]
    busy = next(r for r in answers if r.status_code == 409)
    assert busy.json()["error"]["code"] == "idempotency_in_progress"
    assert Conversation.objects.filter(tenant=tenant).count() == 1
    monkeypatch.setattr(conversations_api.services, "conversation_start", start)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key.raw}")
    replay = create(client, key="k-race")
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.json() == next(r for r in answers if r.status_code == 201).json()


def test_forgetting_a_conversation_deletes_only_its_tenants_keys_of_it(tenant, other_tenant):
    """Erasure (`idempotency_forget`): the saved responses of these conversations of this
    tenant go; another conversation's, and another tenant's with the same conversation id,
    stay."""

    def saved(owner, conversation_id, key):
        return IdempotencyKey.objects.create(
            tenant=owner,
            key=key,
            method="POST",
            path="/api/v1/conversations",
            request_hash="h",
            conversation_id=conversation_id,
        )

    gone = [saved(tenant, 7, "a"), saved(tenant, 8, "b")]
    kept = [saved(tenant, 9, "c"), saved(other_tenant, 7, "d"), saved(tenant, None, "e")]

    assert idempotency.idempotency_forget(tenant_id=tenant.pk, conversation_ids=[]) == 0
    assert IdempotencyKey.objects.count() == 5
    assert idempotency.idempotency_forget(tenant_id=tenant.pk, conversation_ids=[7, 8]) == 2
    assert set(IdempotencyKey.objects.values_list("pk", flat=True)) == {k.pk for k in kept}
    assert not IdempotencyKey.objects.filter(pk__in=[k.pk for k in gone]).exists()
