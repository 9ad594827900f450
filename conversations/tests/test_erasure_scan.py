"""The marker scan after erasure (issue 34): a verified customer puts unique markers through
the real paths — partner API, WebSocket chat, handoffs, a refund and its approval, feedback,
a contact email, an agent's reply and note — then `DELETE /api/v1/customers/{id}` erases
them, and no marker is left in any table (sealed values opened), the audit API and CSV,
Redis, or the logs. `marker_scan.py` does the looking."""

from __future__ import annotations

import json
import logging
import pickle
import secrets
import string
import threading
from dataclasses import dataclass, fields

import msgpack
import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import Client
from django_q.signing import SignedPackage
from rest_framework.test import APIClient

from actions.models import ActionRequest
from actions.tests.shop import shop_connect
from chat.api import messages as messages_api
from chat.identity import identity_token_make
from chat.orchestrator.answer_cache import CACHE_CONTEXT
from chat.tests.helpcenter import RETURNS_MD, SHIPPING_MD, index_document
from config.asgi import application
from conversations import customer_data, services
from conversations.models import Customer, Message
from conversations.tests import marker_scan
from handoffs.models import Handoff
from inference import gateway
from supportbot import encryption
from supportbot.errors import NotFound
from supportbot.models import IdempotencyKey
from supportbot.services import Actor
from supportbot.tests.factories import MembershipFactory

pytestmark = [pytest.mark.django_db(transaction=True)]

CUSTOMER = "cust-1001"  # the demo order system's customer who owns order A-1042
ORIGIN = [(b"origin", b"http://127.0.0.1:8000")]


@dataclass(frozen=True)
class Markers:
    """Unique per run: a card number, an SSN, an email, a name and a bare token."""

    card: str
    ssn: str
    email: str
    name: str
    token: str

    @classmethod
    def make(cls) -> Markers:
        token = "".join(secrets.choice(string.ascii_lowercase) for _ in range(12))  # no digits
        digits = "".join(secrets.choice("0123456789") for _ in range(12))
        return cls(
            card=f"4111 1111 {digits[:4]} {digits[4:8]}",
            ssn=f"078-05-{digits[8:]}",
            email=f"erin.{token}@example.org",
            name=f"Erin Quill{token}",
            token=token,
        )

    @property
    def needles(self) -> list[str]:
        """Each marker as typed and as digits only (a reformatted copy is a trace too)."""
        bare = [self.card.replace(" ", ""), self.ssn.replace("-", "")]
        return [self.card, self.ssn, self.email, self.name, self.token, *bare]


@pytest.fixture
def markers() -> Markers:
    return Markers.make()


@pytest.fixture
def help_center(tenant):
    index_document(tenant, "Returns and refunds", RETURNS_MD)
    index_document(tenant, "Shipping", SHIPPING_MD)


@pytest.fixture
def shop(tenant, orders):
    return shop_connect(tenant, orders, timeout_seconds=5.0)


@pytest.fixture
def agent_client(agent) -> Client:
    client = Client()
    client.force_login(agent)
    return client


@pytest.fixture
def admin_client(tenant) -> Client:
    client = Client()
    client.force_login(MembershipFactory(tenant=tenant, role="admin").user)
    return client


@pytest.fixture
def all_logs(caplog):
    """Every record at DEBUG, the loggers that settings quiet included."""
    caplog.set_level(logging.DEBUG)
    for name in ("django.db.backends", "httpx", "django.request", "daphne"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def post(client, path: str, body: dict, *, key: str | None = None, expect: int = 201) -> dict:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    r = client.post(path, body, format="json", **headers)
    assert r.status_code == expect, r.content
    return r.json()


def console_post(client: Client, path: str, body: dict, *, expect: int = 200) -> dict:
    r = client.post(path, body, content_type="application/json")
    assert r.status_code == expect, r.content
    return r.json()


def test_the_scan_finds_a_marker_in_every_form_the_product_stores(tenant, markers, caplog):
    """The scan is not blind: plaintext and sealed columns, pickled cache values, msgpack
    channel-layer messages, django-q2 packages and log records are all read."""
    m = markers
    services.customer_get_or_create_verified(tenant=tenant, external_id="scan", name=m.name)
    tenant.name = f"Tenant {m.email}"
    tenant.save(update_fields=["name"])
    client = marker_scan.redis_client()
    sealed = encryption.seal(tenant_id=tenant.pk, plaintext=m.ssn, context=CACHE_CONTEXT)
    forms = {
        f"scan:{m.token}:sealed": str(sealed).encode(),
        f"scan:{m.token}:pickle": pickle.dumps({"card": m.card}),
        f"scan:{m.token}:msgpack": msgpack.packb({"text": m.card.replace(" ", "")}),
        f"scan:{m.token}:q2": SignedPackage.dumps({"kwargs": {"n": m.ssn}}).encode(),
    }
    try:
        for key, value in forms.items():
            client.set(key, value)
        logging.getLogger("supportbot.test").info("said %s", m.name)
        scan = marker_scan.Scan(needles=m.needles)
        marker_scan.scan_database(scan)
        marker_scan.scan_redis(scan, client)
        marker_scan.scan_log_records(scan, caplog.records)
    finally:
        client.delete(*forms)
    found = {(where.split(" ")[0], needle) for where, needle in scan.findings}
    assert ("public.conversations_customer.name", m.name) in found  # opened
    assert ("public.supportbot_tenant.name", m.email) in found
    hits = {where for where, _ in scan.findings}
    for key in forms:  # found in what the value decodes to, not only in its raw bytes
        view = "(decrypted)" if key.endswith("sealed") else "(decoded)"
        assert any(key in where and where.endswith(view) for where in hits), (key, hits)
    assert any(where.startswith("log supportbot.test") for where in hits)


# ----------------------------------------------------------------------------- the paths


def partner_conversation(api_client, m: Markers, agent_client) -> int:
    """Messages, feedback, an explicit handoff with typed text, an agent's reply and note."""
    conv = post(
        api_client,
        "/api/v1/conversations",
        {"customer": {"external_id": CUSTOMER, "name": m.name, "email": m.email}},
        key=f"conv-{secrets.token_hex(4)}",
    )
    messages = f"/api/v1/conversations/{conv['id']}/messages"
    post(
        api_client,
        messages,
        {
            "client_message_id": "p1",
            "text": f"Hi, I am {m.name}. My card {m.card} and SSN {m.ssn}; write to {m.email}",
        },
        key=f"msg-{secrets.token_hex(4)}",
    )
    answered = post(
        api_client, messages, {"client_message_id": "p2", "text": "How long do refunds take?"}
    )
    post(
        api_client,
        f"/api/v1/messages/{answered['reply']['id']}/feedback",
        {"rating": "not_helpful", "comment": f"{m.name} here: card {m.card} was never refunded"},
        expect=200,
    )
    handoff = post(
        api_client,
        f"/api/v1/conversations/{conv['id']}/handoffs",
        {"detail": f"Call {m.name} about card {m.card}, SSN {m.ssn}"},
        key=f"handoff-{secrets.token_hex(4)}",
    )
    assert handoff["reason"] == "partner_request"
    base = f"/console/api/handoffs/{handoff['id']}"
    console_post(agent_client, f"{base}/claim", {"expected_version": 1})
    console_post(
        agent_client,
        f"{base}/reply",
        {"text": f"Hi {m.name}, card {m.card} is blocked"},
        expect=201,
    )
    console_post(
        agent_client,
        f"/console/api/conversations/{conv['id']}/notes",
        {"text": f"{m.name} read out SSN {m.ssn}; contact {m.email}"},
        expect=201,
    )
    return conv["id"]


def refund_conversation(api_client, m: Markers, agent_client) -> list[int]:
    """A refund with a reason, confirmed and executed; a larger one denied with a reason."""
    conv = post(api_client, "/api/v1/conversations", {"customer": {"external_id": CUSTOMER}})
    messages = f"/api/v1/conversations/{conv['id']}/messages"
    actions = f"/api/v1/conversations/{conv['id']}/actions"
    small = post(
        api_client,
        messages,
        {
            "client_message_id": "r1",
            "text": f"Please refund $12 for order A-1042, the zipper broke {m.token}",
        },
    )["action"]
    assert small["needs_confirmation"], small
    done = post(
        api_client, f"{actions}/{small['id']}/confirm", {"version": small["version"]}, expect=200
    )
    assert done["state"] == "succeeded", done
    large = post(
        api_client,
        messages,
        {
            "client_message_id": "r2",
            "text": f"I need another refund of $60 for A-1042 please, {m.name} card {m.card}",
        },
    )["action"]
    waiting = post(
        api_client, f"{actions}/{large['id']}/confirm", {"version": large["version"]}, expect=200
    )
    assert waiting["state"] == "awaiting_approval", waiting
    console_post(
        agent_client,
        f"/console/api/actions/{large['id']}/decide",
        {
            "decision": "deny",
            "reason": f"{m.name} already got {m.card} refunded",
            "expected_version": waiting["version"],
        },
    )
    return [small["id"], large["id"]]


async def websocket_conversation(tenant, m: Markers) -> int:
    """Two questions the help center cannot answer (a weak-evidence handoff), then a contact
    email left on that handoff — all over the chat socket and its Redis channel layer."""
    token = identity_token_make(tenant=tenant, external_id=CUSTOMER)
    comm = WebsocketCommunicator(application, "/ws/chat/", headers=ORIGIN)
    assert (await comm.connect())[0]
    await comm.send_json_to(
        {"type": "session.start", "tenant": tenant.slug, "identity_token": token}
    )
    ready = await receive_until(comm, "session.ready")
    questions = [
        f"What is the capital of Mongolia? {m.name} wants to know",
        f"Who won the football world cup in 1998? Ask {m.email}",
    ]
    completed = []
    for n, text in enumerate(questions):
        await comm.send_json_to(
            {"type": "message.send", "client_message_id": f"w{n}", "text": text}
        )
        completed.append(await receive_until(comm, "answer.completed"))
    assert completed[-1]["kind"] == "handoff", completed
    await comm.send_json_to({"type": "handoff.contact", "email": m.email})
    saved = await receive_until(comm, "handoff.contact_saved")
    assert saved["email"] == m.email
    await comm.disconnect()
    return ready["conversation_id"]


async def receive_until(comm, event_type: str) -> dict:
    while True:
        event = await comm.receive_json_from(timeout=60)
        assert event["type"] != "error", event
        if event["type"] == event_type:
            return event


# ----------------------------------------------------------------------------- the scan


def scan_everything(m: Markers, *, admin_client, api_client, caplog, offsets) -> marker_scan.Scan:
    scan = marker_scan.Scan(needles=m.needles)
    marker_scan.scan_database(scan)
    assert marker_scan.model_tables() <= scan.tables  # every model's table was looked at
    scan.look("audit API", _audit_api_pages(api_client))
    csv = admin_client.get("/console/audit.csv")
    assert csv.status_code == 200
    scan.look("audit CSV", b"".join(csv.streaming_content).decode())
    page = admin_client.get("/console/audit/")
    assert page.status_code == 200
    scan.look("audit page", page.content.decode())
    marker_scan.scan_redis(scan, marker_scan.redis_client())
    marker_scan.scan_log_records(scan, caplog.records)
    marker_scan.scan_log_files(scan, offsets)
    return scan


def _audit_api_pages(api_client) -> str:
    pages, url = [], "/api/v1/audit-events"
    while url:
        r = api_client.get(url)
        assert r.status_code == 200, r.content
        pages.append(r.content.decode())
        url = r.json()["next"]
    return "\n".join(pages)


def test_after_erasure_no_marker_is_left_in_tables_audit_redis_or_logs(
    tenant, api_client, agent_client, admin_client, help_center, shop, markers, all_logs
):
    m = markers
    offsets = marker_scan.log_offsets()
    socket_id = async_to_sync(websocket_conversation)(tenant, m)  # the customer's first
    partner_id = partner_conversation(api_client, m, agent_client)
    action_ids = refund_conversation(api_client, m, agent_client)

    weak = Handoff.objects.get(conversation_id=socket_id)
    assert (weak.reason, weak.customer_email) == ("weak_evidence", m.email)
    assert m.email in weak.reason_detail or m.name in weak.reason_detail  # the question
    assert shop.refund_posts() == 1

    # The scan sees what is there: before the erasure every marker is found, sealed.
    before = scan_everything(
        m, admin_client=admin_client, api_client=api_client, caplog=all_logs, offsets=offsets
    )
    opened = {needle for where, needle in before.findings if where.endswith("(decrypted)")}
    assert {m.card, m.ssn, m.email, m.name} <= opened
    assert before.opened > 0
    assert before.unopened == []

    r = api_client.delete(f"/api/v1/customers/{CUSTOMER}")
    assert r.status_code == 200, r.content
    erased = r.json()["erased"]
    assert (erased["conversations"], erased["handoffs"], erased["actions"]) == (3, 3, 2)
    assert not Customer.objects.filter(external_id=CUSTOMER).exists()
    assert not Message.objects.filter(conversation_id__in=[partner_id, socket_id]).exists()
    assert not ActionRequest.objects.filter(pk__in=action_ids).exists()

    after = scan_everything(
        m, admin_client=admin_client, api_client=api_client, caplog=all_logs, offsets=offsets
    )
    assert after.findings == []
    assert after.unopened == []


def test_a_model_proposal_that_quotes_the_customer_leaves_no_trace_after_erasure(
    tenant, api_client, shop, markers, monkeypatch, all_logs
):
    """The model copies the customer's words into its refund `reason` with an amount they
    never wrote: the proposal is ignored, and neither the log line saying so nor anything
    else keeps those words once the customer is erased."""
    m = markers

    async def model_copies_the_customer(**kwargs):
        said = kwargs["messages"][-1]["content"]
        return gateway.ChatResult(
            text=json.dumps(
                {"tool": "request_refund", "order_id": "A-1042", "amount": 1042, "reason": said}
            ),
            **dict.fromkeys(f.name for f in fields(gateway.ChatResult) if f.name != "text"),
        )

    monkeypatch.setattr(gateway, "gateway_available", lambda: True)
    monkeypatch.setattr(gateway, "complete", model_copies_the_customer)
    conv = post(api_client, "/api/v1/conversations", {"customer": {"external_id": CUSTOMER}})
    sent = post(
        api_client,
        f"/api/v1/conversations/{conv['id']}/messages",
        {"client_message_id": "x1", "text": f"refund A-1042 please, this is {m.name}"},
    )
    assert "tell me the amount" in sent["reply"]["text"]  # the model's proposal was ignored
    assert not ActionRequest.objects.filter(tool="request_refund").exists()
    assert any("not grounded" in r.getMessage() for r in all_logs.records)
    assert api_client.delete(f"/api/v1/customers/{CUSTOMER}").status_code == 200

    scan = marker_scan.Scan(needles=m.needles)
    marker_scan.scan_database(scan)
    assert marker_scan.scan_log_records(scan, all_logs.records) > 0
    assert scan.findings == []


# ----------------------------------------------------------------------------- the race


@pytest.mark.parametrize("seam", ["before_save", "before_reply"])
def test_a_message_post_in_flight_when_the_erasure_commits_saves_nothing(
    tenant, api_client, help_center, markers, monkeypatch, seam
):
    """The POST has found the conversation (and, with `before_reply`, saved the message and
    started answering) when the erasure commits; it then leaves no row and no marker."""
    m = markers
    conv = post(
        api_client,
        "/api/v1/conversations",
        {"customer": {"external_id": "crm-race", "name": m.name}},
    )
    in_flight, erased = threading.Event(), threading.Event()

    def hold(real):
        def held(*args, **kwargs):
            in_flight.set()
            assert erased.wait(60), "the erasure never committed"
            return real(*args, **kwargs)

        return held

    if seam == "before_save":
        monkeypatch.setattr(
            messages_api.limits, "message_enforce", hold(messages_api.limits.message_enforce)
        )
    else:
        monkeypatch.setattr(
            services, "conversation_while_bot_owns", hold(services.conversation_while_bot_owns)
        )

    result: dict = {}

    def send() -> None:
        client = APIClient(raise_request_exception=False)  # a 500 is an answer to assert on
        client.credentials(HTTP_AUTHORIZATION=api_client._credentials["HTTP_AUTHORIZATION"])
        try:
            result["response"] = client.post(
                f"/api/v1/conversations/{conv['id']}/messages",
                {"client_message_id": "late", "text": f"card {m.card}, SSN {m.ssn}"},
                format="json",
                HTTP_IDEMPOTENCY_KEY=f"late-{secrets.token_hex(4)}",
            )
        finally:
            connections.close_all()

    sender = threading.Thread(target=send)
    sender.start()
    assert in_flight.wait(60), "the POST never got under way"
    r = api_client.delete("/api/v1/customers/crm-race")
    erased.set()
    sender.join(60)
    assert not sender.is_alive()
    assert r.status_code == 200, r.content

    assert result["response"].status_code == 404, result["response"].content
    assert not Message.objects.filter(conversation_id=conv["id"]).exists()
    assert not IdempotencyKey.objects.filter(tenant=tenant).exists()
    scan = marker_scan.Scan(needles=m.needles)
    marker_scan.scan_database(scan)
    marker_scan.scan_redis(scan, marker_scan.redis_client())
    assert scan.findings == []


def test_a_reply_finalized_after_its_customers_erasure_is_not_saved_again(tenant, markers):
    """`reply_finalize` is handed the reply row read before the erasure: it must not insert
    it again (a plain save() falls back to INSERT when its UPDATE matches nothing)."""
    customer = services.customer_get_or_create_verified(tenant=tenant, external_id="crm-late")
    conversation = services.conversation_start(tenant=tenant, customer=customer)
    message, _ = services.message_receive(
        conversation=conversation, client_message_id="q1", text=f"my SSN is {markers.ssn}"
    )
    reply = services.reply_reserve(customer_message=message)
    customer_data.customer_erase(tenant=tenant, external_id="crm-late", actor=Actor.system("t"))

    with pytest.raises(NotFound):
        services.reply_finalize(
            reply=reply,
            text=f"Noted, {markers.name}.",
            kind=Message.Kind.ANSWER,
            citations=[],
            customer_state=Message.State.ANSWERED,
        )
    assert not Message.objects.filter(pk__in=[message.pk, reply.pk]).exists()
