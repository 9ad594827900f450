"""Tenant isolation, generated from the URL conf and the WebSocket routes.

Tenant B ("globex") owns one of everything — customer, conversation, messages, a handoff, a
note, a refund proposal, public and agents-only documents, an audit event — each carrying
`MARK`. Tenant A's partner key, A's admin and agent sessions, and A's chat sockets then call
every route and every socket event with B's ids. A leak is any response that contains `MARK`,
a 2xx on a route naming one of B's objects, a 5xx, or any change to B's rows.

Every route of the URL conf and every inbound socket event must have a case here
(`ROUTE_CASES`, `CHAT_EVENT_CASES`, `CONSOLE_EVENT_CASES`): adding one without a case fails
`test_every_route_has_an_isolation_case`.
"""

from __future__ import annotations

import re
import uuid
from types import SimpleNamespace

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from actions.models import ActionRequest
from chat.consumers import ChatConsumer
from chat.tests.helpcenter import index_document
from config.asgi import application
from config.routing import websocket_urlpatterns
from console.consumers import ConsoleConsumer
from conversations import events
from conversations import services as conversation_services
from conversations.models import Conversation, Customer, Feedback, Message
from handoffs import services as handoff_services
from handoffs.models import Handoff, InternalNote
from knowledge.models import Document
from supportbot.models import ApiKey, Tenant
from supportbot.services import Actor, api_key_create, audit_event_record
from supportbot.tests.factories import MembershipFactory, TenantFactory

MARK = f"LEAKMARK{uuid.uuid4().hex[:12]}"
SEARCH_WORDS = "zebra quartz harbor lantern"
ORIGIN = [(b"origin", b"http://127.0.0.1:8000")]

# Route pattern -> who calls it in this suite:
#   partner  — A's partner key (and A's agent session, which must be refused);
#   console  — A's admin and agent sessions (and A's admin naming tenant B);
#   page     — anyone, no login (public pages, the chat page, /kb/);
#   auth     — login and logout pages (no tenant data);
#   staff    — operator pages (staff only) and /metrics (token).
ROUTE_CASES: dict[str, str] = {
    "healthz": "page",
    "readyz": "page",
    "api/schema/": "page",
    "api/docs/": "page",
    "api/v1/tenant": "partner",
    "api/v1/audit-events": "partner",
    "api/v1/audit-events/<int:event_id>": "partner",
    "api/v1/knowledge-documents": "partner",
    "api/v1/knowledge-documents/<int:document_id>": "partner",
    "api/v1/knowledge-documents/<int:document_id>/versions": "partner",
    "api/v1/search": "partner",
    "api/v1/conversations": "partner",
    "api/v1/conversations/<int:conversation_id>/messages": "partner",
    "api/v1/conversations/<int:conversation_id>/handoffs": "partner",
    "api/v1/conversations/<int:conversation_id>/actions/<int:action_id>/confirm": "partner",
    "api/v1/conversations/<int:conversation_id>/actions/<int:action_id>/cancel": "partner",
    "api/v1/customers/<external_id:external_id>": "partner",
    "api/v1/customers/<external_id:external_id>/export": "partner",
    "api/v1/messages/<int:message_id>/feedback": "partner",
    "kb/<slug:tenant_slug>/<int:document_id>/": "page",
    "kb/<slug:tenant_slug>/<int:document_id>/v<int:version>/": "page",
    "chat/<slug:tenant_slug>/": "page",
    "widget.js": "page",
    "console/login/": "auth",
    "console/logout/": "auth",
    "admin/login/": "auth",
    "console/": "console",
    "console/handoffs/<int:handoff_id>/": "console",
    "console/gaps/": "console",
    "console/widget/": "console",
    "console/policies/": "console",
    "console/api-keys/": "console",
    "console/api-keys/new": "console",
    "console/api-keys/<int:key_id>/revoke/": "console",
    "console/api/queue": "console",
    "console/api/handoffs/<int:handoff_id>": "console",
    "console/api/handoffs/<int:handoff_id>/claim": "console",
    "console/api/handoffs/<int:handoff_id>/close": "console",
    "console/api/handoffs/<int:handoff_id>/reply": "console",
    "console/api/conversations/<int:conversation_id>/notes": "console",
    "console/api/conversations/<int:conversation_id>/takeover": "console",
    "console/api/widget-secret": "console",
    "console/api/widget-secret/rotate": "console",
    "console/audit/": "console",
    "console/audit.csv": "console",
    "console/customers/": "console",
    "console/customers/export": "console",
    "console/customers/erase": "console",
    "console/actions/login/": "auth",
    "console/actions/logout/": "auth",
    "console/actions/": "console",
    "console/actions/<int:action_id>/": "console",
    "console/actions/<int:action_id>/decide": "console",
    "console/api/conversations/<int:conversation_id>/actions": "console",
    "console/api/actions/<int:action_id>/decide": "console",
    "console/ops/": "staff",
    "console/ops/data.json": "staff",
    "metrics": "staff",
}
# Console pages that are only a shell (no data; console.js loads it through the console API,
# which refuses B's ids): a 200 is no leak, MARK in them would be.
SHELL_PAGES = {"console/", "console/handoffs/<int:handoff_id>/"}
# Django's admin: staff only; A's (non-staff) admin is sent to the admin login on every page.
ADMIN_PREFIX = "admin/"

CHAT_EVENT_CASES = {
    "session.start",
    "message.send",
    "feedback.send",
    "handoff.request",
    "handoff.contact",
    "action.confirm",
    "action.cancel",
    "ping",
}
CONSOLE_EVENT_CASES = {"presence.ping", "view", "unview"}
WEBSOCKET_ROUTE_CASES = {"^ws/chat/$", "^ws/console/$"}

METHODS = ("get", "post", "patch", "delete")
BODY = {
    "text": "hello",
    "client_message_id": "iso-1",
    "version": 1,
    "expected_version": 1,
    "rating": "helpful",
    "detail": "x",
    "approve": True,
    "reason": "x",
    "overlap_seconds": 60,
    "customer": {"external_id": "iso-customer"},
}


def _walk(patterns, prefix=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern)


ALL_ROUTES = sorted(set(_walk(get_resolver().url_patterns)))
ADMIN_ROUTES = [r for r in ALL_ROUTES if r.startswith(ADMIN_PREFIX) and r != "admin/login/"]
CASED_ROUTES = [r for r in ALL_ROUTES if r not in ADMIN_ROUTES]


def test_every_route_has_an_isolation_case():
    missing = sorted(set(CASED_ROUTES) - set(ROUTE_CASES))
    stale = sorted(set(ROUTE_CASES) - set(CASED_ROUTES))
    assert not missing, f"routes without an isolation case: {missing}"
    assert not stale, f"isolation cases of routes that no longer exist: {stale}"
    assert len(ADMIN_ROUTES) > 20


def test_every_socket_route_and_event_has_an_isolation_case():
    assert {str(r.pattern) for r in websocket_urlpatterns} - {"^ws/bench-echo/$"} == (
        WEBSOCKET_ROUTE_CASES
    )
    assert set(ChatConsumer.HANDLERS) == CHAT_EVENT_CASES
    assert set(ConsoleConsumer.EVENTS) == CONSOLE_EVENT_CASES


# --------------------------------------------------------------------------- tenant B's data


@pytest.fixture
def foreign(db, settings):
    """Tenant B with one of everything, each holding MARK; A's key and users."""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    a = TenantFactory(slug="iso-a", name="Iso A")
    b = TenantFactory(slug="iso-b", name=f"Iso B {MARK}")
    b_agent = MembershipFactory(tenant=b, role="admin").user
    customer = Customer.objects.create(
        tenant=b, external_id=f"{MARK}-customer", verified=True, name=f"Name {MARK}"
    )
    conversation = conversation_services.conversation_start(tenant=b, customer=customer)
    asked = Message.objects.create(
        tenant=b,
        conversation=conversation,
        role=Message.Role.CUSTOMER,
        text=f"My address is 1 {MARK} Street",
        client_message_id="b-1",
        state=Message.State.ANSWERED,
    )
    answer = Message.objects.create(
        tenant=b,
        conversation=conversation,
        role=Message.Role.BOT,
        kind=Message.Kind.ANSWER,
        text=f"Answer about {MARK}",
        reply_to=asked,
        state=Message.State.DELIVERED,
    )
    handoff, _ = handoff_services.handoff_request(
        conversation=conversation, reason=Handoff.Reason.CUSTOMER_REQUEST, detail=f"help {MARK}"
    )
    note = InternalNote.objects.create(
        tenant=b, conversation=conversation, author=b_agent, text=f"note {MARK}"
    )
    action = ActionRequest.objects.create(
        tenant=b,
        conversation=conversation,
        customer=customer,
        tool="request_refund",
        arguments={"order_id": f"{MARK}-1", "amount": "10.00"},
        retry_key=uuid.uuid4().hex,
        risk=ActionRequest.Risk.LOW,
        state=ActionRequest.State.AWAITING_CONFIRMATION,
        proposed_by=ActionRequest.Source.MODEL,
    )
    body = f"# {MARK} returns\n\n{SEARCH_WORDS}: Globex {MARK} refunds everything.\n"
    public_doc = index_document(b, f"Public {MARK}", body)
    agents_doc = index_document(b, f"Agents {MARK}", body, audience="agents")
    event = audit_event_record(tenant=b, actor=Actor.system(), action="iso.test", data={"m": MARK})
    key, raw = api_key_create(tenant=a, name="iso-a")
    b_key, _ = api_key_create(tenant=b, name=f"Key {MARK}")
    return SimpleNamespace(
        a=a,
        b=b,
        a_key=raw,
        a_admin=MembershipFactory(tenant=a, role="admin").user,
        a_agent=MembershipFactory(tenant=a, role="agent").user,
        ids={
            "conversation_id": conversation.pk,
            "message_id": answer.pk,
            "handoff_id": handoff.pk,
            "action_id": action.pk,
            "document_id": agents_doc.pk,
            "event_id": event.pk,
            "key_id": b_key.pk,
            "version": 1,
        },
        b_customer_external_id=customer.external_id,
        public_doc=public_doc,
        agents_doc=agents_doc,
        note=note,
    )


def _snapshot(f) -> tuple:
    """Everything of B that an attack could change."""
    b = f.b
    return (
        Tenant.objects.filter(pk=b.pk)
        .values_list(
            "widget_secret", "name", "refund_auto_limit", "handoff_capacity", "retention_days"
        )
        .get(),
        sorted(Message.objects.filter(tenant=b).values_list("id", "text", "state")),
        sorted(Conversation.objects.filter(tenant=b).values_list("id", "owner", "state")),
        sorted(Handoff.objects.filter(tenant=b).values_list("id", "state", "version")),
        sorted(InternalNote.objects.filter(tenant=b).values_list("id", "text")),
        sorted(ActionRequest.objects.filter(tenant=b).values_list("id", "state", "version")),
        sorted(Document.objects.filter(tenant=b).values_list("id", "audience", "version")),
        Feedback.objects.filter(message__tenant=b).count(),
        Customer.objects.filter(tenant=b).count(),
        sorted(ApiKey.objects.filter(tenant=b).values_list("id", "name", "revoked_at")),
    )


def _fill(route: str, f, slug: str) -> str:
    path = route.replace("<slug:tenant_slug>", slug)
    path = re.sub(r"<int:(\w+)>", lambda m: str(f.ids[m.group(1)]), path)
    path = path.replace("<external_id:external_id>", f.b_customer_external_id)
    return "/" + path


def _call(client, method: str, path: str, *, tenant: str | None = None, **extra):
    query = {"tenant": tenant} if tenant else {}
    if method == "get":
        return client.get(path, {"q": SEARCH_WORDS, "audience": "agent", **query}, **extra)
    if tenant:
        path = f"{path}?tenant={tenant}"
    return getattr(client, method)(path, BODY, content_type="application/json", **extra)


def _body(response) -> str:
    raw = b"".join(response.streaming_content) if response.streaming else response.content
    return raw.decode("utf-8", "replace")


def _assert_no_leak(route: str, method: str, response, *, names_foreign_object: bool):
    content = _body(response)
    where = (route, method, response.status_code, content[:300])
    assert response.status_code < 500, where
    assert MARK not in content, where
    if names_foreign_object:
        assert response.status_code in (302, 400, 401, 403, 404, 405, 415), where


def _routes(kind: str) -> list[str]:
    return [r for r, k in ROUTE_CASES.items() if k == kind]


# --------------------------------------------------------------------------- REST and pages


# One test per kind walks all its routes (B's data is built once per test, not per route) and
# reports every leak at once.


def _leaks(route: str, method: str, response, *, names_foreign_object: bool) -> list:
    try:
        _assert_no_leak(route, method, response, names_foreign_object=names_foreign_object)
    except AssertionError as exc:
        return [str(exc)]
    return []


def test_partner_key_of_another_tenant_reaches_nothing_of_b(foreign):
    before = _snapshot(foreign)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {foreign.a_key}")
    leaks = []
    for route in _routes("partner"):
        for method in METHODS:
            response = _call(client, method, _fill(route, foreign, foreign.a.slug))
            names_b = "<int:" in route or "<str:external_id>" in route
            leaks += _leaks(route, method, response, names_foreign_object=names_b)
    assert not leaks, "\n".join(str(leak)[:400] for leak in leaks)
    assert _snapshot(foreign) == before


@pytest.mark.parametrize("who", ["a_admin", "a_agent"])
def test_console_customer_data_of_another_tenant_cannot_be_exported_or_erased(foreign, who):
    before = _snapshot(foreign)
    client = Client()
    client.force_login(getattr(foreign, who))
    external_id = foreign.b_customer_external_id
    exported = client.get("/console/customers/export", {"external_id": external_id})
    erased = client.post(
        "/console/customers/erase", {"external_id": external_id, "confirm": external_id}
    )
    for response in (exported, erased):
        assert response.status_code in (302, 403, 404), response.status_code
        assert MARK not in _body(response)
    assert _snapshot(foreign) == before


def test_agent_sessions_are_refused_on_every_partner_endpoint(foreign):
    client = APIClient()
    client.force_login(foreign.a_admin)
    leaks = []
    for route in _routes("partner"):
        for method in METHODS:
            response = _call(client, method, _fill(route, foreign, foreign.a.slug))
            leaks += _leaks(route, method, response, names_foreign_object=True)
            if response.status_code not in (401, 403, 405):
                leaks.append((route, method, response.status_code))
    assert not leaks, "\n".join(str(leak)[:400] for leak in leaks)


@pytest.mark.parametrize("who", ["a_admin", "a_agent"])
def test_console_users_of_another_tenant_reach_nothing_of_b(foreign, who):
    before = _snapshot(foreign)
    client = Client()
    client.force_login(getattr(foreign, who))
    leaks = []
    for route in _routes("console"):
        for method in METHODS:
            path = _fill(route, foreign, foreign.a.slug)
            response = _call(client, method, path)
            names_b = "<int:" in route and route not in SHELL_PAGES
            leaks += _leaks(route, method, response, names_foreign_object=names_b)
            # Naming tenant B outright is refused too.
            named = _call(
                client, method, path, tenant=foreign.b.slug, HTTP_X_SUPPORTBOT_TENANT=foreign.b.slug
            )
            leaks += _leaks(route, method, named, names_foreign_object=route not in SHELL_PAGES)
    assert not leaks, "\n".join(str(leak)[:400] for leak in leaks)
    assert _snapshot(foreign) == before


def test_public_auth_and_staff_routes_show_nothing_of_b_to_a_or_to_anyone(foreign):
    before = _snapshot(foreign)
    admin = Client()
    admin.force_login(foreign.a_admin)
    leaks = []
    for route in _routes("page") + _routes("auth") + _routes("staff"):
        for client in (Client(), admin):
            for method in ("get", "post"):
                response = _call(client, method, _fill(route, foreign, foreign.a.slug))
                leaks += _leaks(route, method, response, names_foreign_object="<int:" in route)
    assert not leaks, "\n".join(str(leak)[:400] for leak in leaks)
    assert _snapshot(foreign) == before


def test_b_agents_only_document_is_not_served_on_bs_own_public_pages(foreign):
    for path in (
        f"/kb/{foreign.b.slug}/{foreign.agents_doc.pk}/",
        f"/kb/{foreign.b.slug}/{foreign.agents_doc.pk}/v1/",
    ):
        response = Client().get(path)
        assert response.status_code == 404, path
        assert MARK not in response.content.decode()


def test_django_admin_is_closed_to_tenant_admins(foreign):
    client = Client()
    client.force_login(foreign.a_admin)  # a tenant admin is not staff
    leaks = []
    for route in ADMIN_ROUTES:
        path = re.sub(r"<[^>]+>", "1", "/" + route).replace("^", "").replace("$", "")
        path = re.sub(r"\(\?P<\w+>[^)]*\)", "1", path)
        response = client.get(path)
        body = response.content.decode("utf-8", "replace")
        if response.status_code not in (302, 404) or MARK in body:
            leaks.append((route, response.status_code))
    assert not leaks, "\n".join(str(leak)[:400] for leak in leaks)


# --------------------------------------------------------------------------- sockets


async def _chat(tenant_slug: str, **start):
    comm = WebsocketCommunicator(application, "/ws/chat/", headers=ORIGIN)
    assert (await comm.connect())[0]
    await comm.send_json_to({"type": "session.start", "tenant": tenant_slug, **start})
    ready = await comm.receive_json_from(timeout=20)
    return comm, ready


async def _next(comm, *, skip=("message.created",), timeout=20):
    while True:
        event = await comm.receive_json_from(timeout=timeout)
        if event["type"] not in skip:
            return event


@pytest.mark.django_db(transaction=True)
async def test_chat_socket_events_with_bs_ids_reach_nothing_of_b(foreign):
    before = await database_sync_to_async(_snapshot)(foreign)
    ids = foreign.ids
    seen: list[dict] = []

    # session.start naming B's conversation from A's chat: a conversation of A's own.
    comm, ready = await _chat(foreign.a.slug, conversation_id=ids["conversation_id"])
    seen.append(ready)
    assert ready["type"] == "session.ready"
    assert ready["conversation_id"] != ids["conversation_id"]

    probes = {
        "feedback.send": {"message_id": ids["message_id"], "rating": "not_helpful"},
        "action.confirm": {"action_id": ids["action_id"], "version": 1},
        "action.cancel": {"action_id": ids["action_id"], "version": 1},
    }
    for kind, fields in probes.items():
        await comm.send_json_to({"type": kind, **fields})
        reply = await _next(comm)
        seen.append(reply)
        assert (reply["type"], reply["code"]) == ("error", "not_found"), (kind, reply)

    await comm.send_json_to({"type": "handoff.request", "detail": "x"})
    seen.append(await _next(comm))
    await comm.send_json_to({"type": "handoff.contact", "email": "iso@example.com"})
    seen.append(await _next(comm))
    await comm.send_json_to({"type": "ping"})
    seen.append(await _next(comm, skip=("message.created", "handoff.started")))
    # A question whose words only B's documents hold: answered from A's knowledge only.
    await comm.send_json_to(
        {"type": "message.send", "client_message_id": "iso-q", "text": SEARCH_WORDS}
    )
    while True:
        event = await _next(comm, skip=())
        seen.append(event)
        if event["type"] in ("answer.completed", "error"):
            break
    await comm.disconnect()

    # A's visitor token does not open a chat of B.
    comm, refused = await _chat(foreign.b.slug, visitor_token=ready["visitor_token"])
    seen.append(refused)
    assert refused["code"] == "invalid_identity"
    await comm.disconnect()

    assert MARK not in repr(seen)
    assert await database_sync_to_async(_snapshot)(foreign) == before


_OWN_PRESENCE = {"type": "queue.changed", "event": "presence", "handoff_id": None}


@pytest.mark.django_db(transaction=True)
async def test_console_socket_of_a_cannot_view_bs_handoff(foreign):
    client = Client()
    await database_sync_to_async(client.force_login)(foreign.a_admin)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    comm = WebsocketCommunicator(
        application,
        f"/ws/console/?tenant={foreign.a.slug}",
        headers=[*ORIGIN, (b"cookie", cookie)],
    )
    assert (await comm.connect())[0]
    seen = []
    await comm.send_json_to({"type": "view", "handoff_id": foreign.ids["handoff_id"]})
    while True:
        event = await comm.receive_json_from(timeout=20)
        seen.append(event)
        if event["type"] == "error":
            break
    assert event["code"] == "not_found"
    await comm.send_json_to({"type": "unview"})
    await comm.send_json_to({"type": "presence.ping"})
    while (event := await comm.receive_json_from(timeout=20))["type"] != "pong":
        seen.append(event)
    # B's conversation speaks; A's console must not hear it. What A may still hear is its own
    # queue: the presence its connect announced comes through the channel layer, and on a
    # loaded machine after the pong (CI saw it arrive during the wait).
    await events.publish(
        foreign.ids["conversation_id"],
        {"type": "conversation.owner", "owner": f"human {MARK}"},
    )
    heard = []
    while not await comm.receive_nothing(timeout=1.5):
        heard.append(await comm.receive_json_from())
    assert [e for e in heard if e != _OWN_PRESENCE] == []
    assert MARK not in repr(seen)
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_console_socket_naming_tenant_b_is_closed(foreign):
    client = Client()
    await database_sync_to_async(client.force_login)(foreign.a_admin)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    comm = WebsocketCommunicator(
        application,
        f"/ws/console/?tenant={foreign.b.slug}",
        headers=[*ORIGIN, (b"cookie", cookie)],
    )
    connected, code = await comm.connect()
    assert (connected, code) == (False, 4403)
