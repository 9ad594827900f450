"""Exactly once and within limits, over real HTTP: two daphne processes, the partner API, the
reference order service, parallel clients."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import httpx
import pytest

from actions.models import ActionRequest
from actions.tests.shop import shop_connect
from conversations.models import Conversation, Message
from supportbot.models import AuditEvent
from supportbot.services import api_key_create
from supportbot.tests.factories import MembershipFactory
from supportbot.tests.webprocs import start_web

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def web(django_db_setup, django_db_blocker, tmp_path_factory):
    with django_db_blocker.unblock():
        procs = start_web(tmp_path_factory.mktemp("web"), count=2)
    yield procs
    for proc in procs:
        proc.stop()


@pytest.fixture
def shop(tenant, orders):
    return shop_connect(tenant, orders, timeout_seconds=3.0)


@pytest.fixture
def partner(tenant):
    _, raw = api_key_create(tenant=tenant, name="crm")
    return {"Authorization": f"Bearer {raw}"}


def post(base, path, headers, body, key=None):
    extra = {"Idempotency-Key": key} if key else {}
    return httpx.post(f"{base}/api/v1{path}", json=body, headers={**headers, **extra}, timeout=30)


def new_conversation(base, headers, external_id="cust-1001", key=None):
    r = post(base, "/conversations", headers, {"customer": {"external_id": external_id}}, key)
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def card_for(base, headers, conversation_id, text, client_id="m1"):
    r = post(
        base,
        f"/conversations/{conversation_id}/messages",
        headers,
        {"client_message_id": client_id, "text": text},
    )
    assert r.status_code in (200, 201), r.text
    card = r.json()["action"]
    assert card is not None, r.json()
    assert card["needs_confirmation"], card
    return card


def test_parallel_confirmations_over_the_daily_limit_execute_only_what_fits(web, shop, partner):
    a, b = web[0].url, web[1].url
    conversation = new_conversation(a, partner)
    amounts = [f"25.0{i}" for i in range(1, 9)]  # 8 refunds: any 7 fit in $200, all 8 do not
    cards = [
        card_for(a, partner, conversation, f"please refund ${amount} for A-1043", f"m{n}")
        for n, amount in enumerate(amounts)
    ]
    assert shop.refund_posts() == 0

    def confirm(n_card):
        n, card = n_card
        base = a if n % 2 else b  # spread over both processes
        return post(
            base,
            f"/conversations/{conversation}/actions/{card['id']}/confirm",
            partner,
            {"version": card["version"]},
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(confirm, enumerate(cards)))

    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    states = sorted(r.json()["state"] for r in responses)
    assert states == ["awaiting_approval"] + ["succeeded"] * 7
    assert shop.refund_posts() == 7
    done = ActionRequest.objects.filter(state="succeeded")
    assert sum(Decimal(x.arguments["amount"]) for x in done) <= Decimal("200")
    parked = ActionRequest.objects.get(state="awaiting_approval")
    assert parked.approval_reason == "daily_limit"


def test_the_same_refund_confirmed_from_two_conversations_is_one_provider_refund(
    web, shop, partner
):
    first = new_conversation(web[0].url, partner)
    second = new_conversation(web[1].url, partner)
    card_1 = card_for(web[0].url, partner, first, "refund $30 for A-1042 please")
    card_2 = card_for(web[1].url, partner, second, "refund $30 for A-1042 please")
    assert card_1["id"] == card_2["id"]

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(
            pool.map(
                lambda args: post(
                    args[0],
                    f"/conversations/{args[1]}/actions/{card_1['id']}/confirm",
                    partner,
                    {"version": card_1["version"]},
                ),
                [(web[0].url, first), (web[1].url, second)],
            )
        )
    assert [r.status_code for r in results] == [200, 200], [r.text for r in results]
    assert shop.refund_posts() == 1
    assert len(shop.refunds()) == 1
    assert ActionRequest.objects.get(pk=card_1["id"]).state == "succeeded"


def test_yes_typed_at_once_in_two_conversations_showing_one_card_refunds_once(
    web, shop, partner, tenant
):
    """The full refund asked in two conversations shows one card in both; a "yes" typed in
    each at the same moment, on two web processes, makes one provider refund."""
    tenant.refund_auto_limit = 100  # $89.99 runs without a person's approval
    tenant.save()
    first = new_conversation(web[0].url, partner)
    second = new_conversation(web[1].url, partner)
    card = card_for(web[0].url, partner, first, "please refund my order A-1042 in full")
    again = card_for(web[1].url, partner, second, "I want my money back for A-1042")
    assert (again["id"], again["amount"]) == (card["id"], "89.99")
    barrier = threading.Barrier(2)

    def yes(target):
        base, conversation = target
        barrier.wait()
        return post(
            base,
            f"/conversations/{conversation}/messages",
            partner,
            {"client_message_id": "m2", "text": "yes"},
        )

    with ThreadPoolExecutor(max_workers=2) as pool:
        replies = list(pool.map(yes, [(web[0].url, first), (web[1].url, second)]))

    assert [r.status_code for r in replies] == [201, 201], [r.text for r in replies]
    assert shop.refund_posts() == 1
    assert [r["amount"] for r in shop.refunds()] == ["89.99"]
    assert ActionRequest.objects.get(pk=card["id"]).state == "succeeded"
    assert any("submitted and confirmed" in r.json()["reply"]["text"] for r in replies)


def test_partner_retrying_create_message_and_confirm_with_one_key_refunds_once(web, shop, partner):
    base = web[0].url
    created = [
        post(
            web[n % 2].url,
            "/conversations",
            partner,
            {"customer": {"external_id": "cust-1001"}},
            key="create-1",
        )
        for n in range(3)
    ]
    assert [r.status_code for r in created] == [201, 201, 201]
    assert [r.headers.get("Idempotent-Replayed") for r in created] == [None, "true", "true"]
    conversation_ids = {r.json()["id"] for r in created}
    assert len(conversation_ids) == 1
    conversation = conversation_ids.pop()
    body = {"client_message_id": "crm-77", "text": "Please refund $10 for A-1042"}
    sent = [
        post(web[n % 2].url, f"/conversations/{conversation}/messages", partner, body, "msg-1")
        for n in range(3)
    ]
    assert {r.json()["action"]["id"] for r in sent} == {sent[0].json()["action"]["id"]}
    card = sent[0].json()["action"]
    confirms = [
        post(
            web[n % 2].url,
            f"/conversations/{conversation}/actions/{card['id']}/confirm",
            partner,
            {"version": card["version"]},
            "confirm-1",
        )
        for n in range(3)
    ]
    assert {r.json()["state"] for r in confirms} == {"succeeded"}
    assert Conversation.objects.count() == 1
    assert Message.objects.filter(role="customer").count() == 1
    assert shop.refund_posts() == 1

    reused = post(base, "/conversations", partner, {"customer": {"external_id": "x"}}, "create-1")
    assert reused.status_code == 422, reused.text
    assert reused.json()["error"]["code"] == "idempotency_key_reused"


def test_parallel_creates_with_one_key_make_one_conversation(web, shop, partner):
    def create(n):
        return post(
            web[n % 2].url,
            "/conversations",
            partner,
            {"customer": {"external_id": "cust-1002"}},
            key="burst-1",
        )

    with ThreadPoolExecutor(max_workers=6) as pool:
        responses = list(pool.map(create, range(6)))
    codes = {r.status_code for r in responses}
    assert codes <= {201, 409}, [r.text for r in responses]
    ids = {r.json()["id"] for r in responses if r.status_code == 201}
    assert len(ids) == 1
    assert Conversation.objects.count() == 1
    for r in responses:
        if r.status_code == 409:
            assert r.json()["error"]["code"] == "idempotency_in_progress"
            assert r.headers["Retry-After"]


def test_an_agent_cannot_approve_their_own_proposal(web, shop, partner, tenant):
    proposer = MembershipFactory(tenant=tenant, role="agent").user
    colleague = MembershipFactory(tenant=tenant, role="agent").user
    conversation_id = new_conversation(web[0].url, partner)
    conversation = Conversation.objects.get(pk=conversation_id)

    agent_client = _session(web[1].url, proposer)
    proposed = agent_client.post(
        f"/console/api/conversations/{conversation.pk}/actions",
        json={"tool": "request_refund", "order_id": "A-1043", "amount": "120.00"},
    )
    assert proposed.status_code == 201, proposed.text
    card = proposed.json()
    assert card["state"] == "awaiting_confirmation"
    assert Message.objects.filter(conversation=conversation, meta__action_id=card["id"]).exists()

    confirmed = post(
        web[0].url,
        f"/conversations/{conversation.pk}/actions/{card['id']}/confirm",
        partner,
        {"version": card["version"]},
    )
    assert confirmed.json()["state"] == "awaiting_approval"
    version = ActionRequest.objects.get(pk=card["id"]).version

    refused = agent_client.post(
        f"/console/api/actions/{card['id']}/decide",
        json={"decision": "approve", "expected_version": version},
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "own_proposal"
    assert AuditEvent.objects.filter(
        action="action.decision_refused", data__code="own_proposal"
    ).exists()
    assert shop.refund_posts() == 0

    approved = _session(web[0].url, colleague).post(
        f"/console/api/actions/{card['id']}/decide",
        json={"decision": "approve", "expected_version": version, "reason": "ok"},
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["state"] == "succeeded"
    assert shop.refund_posts() == 1


def _session(base: str, user) -> httpx.Client:
    """An HTTP client logged in as `user` (a real session cookie, CSRF token included)."""
    user.set_password("pw-for-test-only")
    user.save()
    client = httpx.Client(base_url=base, timeout=30, follow_redirects=False)
    page = client.get("/console/login/")
    token = client.cookies.get("csrftoken") or _csrf_from(page.text)
    r = client.post(
        "/console/login/",
        data={
            "username": user.get_username(),
            "password": "pw-for-test-only",
            "csrfmiddlewaretoken": token,
        },
        headers={"Referer": f"{base}/console/login/"},
    )
    assert r.status_code in (302, 303), r.text[:500]
    client.headers["X-CSRFToken"] = client.cookies.get("csrftoken", token)
    client.headers["Referer"] = f"{base}/console/"
    return client


def _csrf_from(html: str) -> str:
    marker = 'name="csrfmiddlewaretoken" value="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]
