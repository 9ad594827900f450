import pytest
from django.test import Client
from django.utils import timezone

from conversations import services as conversation_services
from conversations.models import Conversation, Message
from handoffs import services, tasks
from handoffs.models import Handoff, InternalNote
from knowledge.models import Document
from supportbot.tests.factories import MembershipFactory, UserFactory


@pytest.fixture(autouse=True)
def _local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


@pytest.fixture
def conversation(tenant):
    customer = conversation_services.customer_get_or_create_visitor(tenant=tenant, visitor_id="v")
    conversation = conversation_services.conversation_start(tenant=tenant, customer=customer)
    conversation_services.message_receive(
        conversation=conversation, client_message_id="c1", text="My tent pole snapped, help"
    )
    return conversation


@pytest.fixture
def handoff(conversation):
    return services.handoff_request(conversation=conversation, reason="customer_request")[0]


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_queue_lists_open_handoffs_for_the_agents_tenant_only(agent, handoff, other_tenant):
    foreign_user = MembershipFactory(tenant=other_tenant).user
    r = login(agent).get("/console/api/queue")
    assert r.status_code == 200, r.content
    rows = r.json()["handoffs"]
    assert [h["id"] for h in rows] == [handoff.pk]
    assert rows[0]["last_message"] == "My tent pole snapped, help"
    assert rows[0]["reason"] == "customer_request"
    assert login(foreign_user).get("/console/api/queue").json()["handoffs"] == []
    assert login(foreign_user).get(f"/console/api/handoffs/{handoff.pk}").status_code == 404


def test_queue_rebuilds_from_postgres_for_a_new_session(agent, handoff):
    """State lives in PostgreSQL: a fresh login (as after a web restart) sees the same queue."""
    first = login(agent).get("/console/api/queue").json()["handoffs"]
    again = login(agent).get("/console/api/queue").json()["handoffs"]
    assert [h["id"] for h in first] == [h["id"] for h in again] == [handoff.pk]


def test_claim_over_http_and_the_loser_is_told_who_holds_it(agent, handoff, tenant):
    other = MembershipFactory(tenant=tenant).user
    r = login(agent).post(
        f"/console/api/handoffs/{handoff.pk}/claim",
        {"expected_version": 1},
        content_type="application/json",
    )
    assert r.status_code == 200, r.content
    lost = login(other).post(
        f"/console/api/handoffs/{handoff.pk}/claim",
        {"expected_version": 1},
        content_type="application/json",
    )
    assert lost.status_code == 409
    assert lost.json()["error"]["detail"] == f"Already claimed by {agent.username}."


def test_reply_reaches_the_customer_history_and_notes_stay_internal(agent, handoff, tenant):
    client = login(agent)
    client.post(
        f"/console/api/handoffs/{handoff.pk}/claim",
        {"expected_version": 1},
        content_type="application/json",
    )
    r = client.post(
        f"/console/api/handoffs/{handoff.pk}/reply",
        {"text": "Sorry about that! Sending a new pole."},
        content_type="application/json",
    )
    assert r.status_code == 201, r.content
    note = client.post(
        f"/console/api/conversations/{handoff.conversation_id}/notes",
        {"text": "Customer is a Summit Club member"},
        content_type="application/json",
    )
    assert note.status_code == 201, note.content
    texts = list(
        Message.objects.filter(conversation_id=handoff.conversation_id).values_list(
            "text", flat=True
        )
    )
    assert "Sorry about that! Sending a new pole." in texts
    assert all("Summit Club" not in t for t in texts)
    assert InternalNote.objects.get().text == "Customer is a Summit Club member"
    detail = client.get(f"/console/api/handoffs/{handoff.pk}").json()
    assert [n["text"] for n in detail["notes"]] == ["Customer is a Summit Club member"]
    assert detail["messages"][-1]["author"]


def test_bad_console_input_is_a_json_error(agent, handoff):
    r = login(agent).post(
        f"/console/api/handoffs/{handoff.pk}/claim", {}, content_type="application/json"
    )
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "expected_version"


def test_console_requires_login(client, handoff):
    assert client.get("/console/api/queue").status_code in (401, 403)
    r = client.get("/console/")
    assert r.status_code == 302
    assert "/console/login/" in r["Location"]


def test_summary_job_writes_an_extractive_summary_without_a_model(handoff):
    assert tasks.handoff_summarize_task(handoff.pk) == "extractive"
    handoff.refresh_from_db()
    assert "Customer asked for a person" in handoff.summary
    assert "My tent pole snapped" in handoff.summary
    assert handoff.summary_source == "extractive"


def test_knowledge_gaps_list_and_draft_an_article(tenant, tenant_admin, conversation):
    trigger = Message.objects.get(conversation=conversation, role="customer")
    services.handoff_request(
        conversation=conversation, reason="weak_evidence", trigger_message=trigger
    )
    client = login(tenant_admin)
    page = client.get("/console/gaps/")
    assert page.status_code == 200
    assert "My tent pole snapped" in page.content.decode()
    r = client.post(
        "/console/gaps/",
        {"title": "Replacing tent poles", "body": "We send replacement poles free within 2 years."},
    )
    assert r.status_code == 302
    document = Document.objects.get(tenant=tenant, title="Replacing tent poles")
    assert document.status in ("pending", "extracting", "embedding", "ready")


def test_agents_cannot_see_knowledge_gaps(agent):
    assert login(agent).get("/console/gaps/").status_code == 403


def test_console_page_renders_for_an_agent(agent, handoff):
    r = login(agent).get(f"/console/handoffs/{handoff.pk}/")
    assert r.status_code == 200
    assert b'id="queue"' in r.content
    assert Handoff.objects.count() == 1


def test_agent_takes_over_a_bot_conversation_from_the_console(agent, tenant, conversation):
    Conversation.objects.filter(pk=conversation.pk).update(last_message_at=timezone.now())
    client = login(agent)
    active = client.get("/console/api/queue").json()["active"]
    assert [c["conversation_id"] for c in active] == [conversation.pk]
    r = client.post(
        f"/console/api/conversations/{conversation.pk}/takeover",
        {},
        content_type="application/json",
    )
    assert r.status_code == 200, r.content
    handoff = Handoff.objects.get(conversation=conversation)
    assert (handoff.reason, handoff.state, handoff.assigned_to) == (
        "agent_takeover",
        "assigned",
        agent,
    )
    conversation.refresh_from_db()
    assert conversation.owner == "human"
    assert client.get("/console/api/queue").json()["active"] == []


@pytest.fixture
def staff_operator(db):
    return UserFactory(username="operator", is_staff=True)


def test_staff_without_membership_may_view_the_console_but_not_claim(
    staff_operator, handoff, tenant
):
    client = login(staff_operator)
    q = f"?tenant={tenant.slug}"
    assert client.get(f"/console/api/queue{q}").status_code == 200
    assert client.get(f"/console/api/handoffs/{handoff.pk}{q}").status_code == 200
    page = client.get(f"/console/{q}")
    assert page.status_code == 200
    assert b"Read-only" in page.content
    r = client.post(
        f"/console/api/handoffs/{handoff.pk}/claim{q}",
        {"expected_version": 1},
        content_type="application/json",
    )
    assert r.status_code == 403, r.content
    error = r.json()["error"]
    assert error["code"] == "permission_denied"
    assert "read-only" in error["detail"]
    handoff.refresh_from_db()
    assert handoff.assigned_to_id is None
    assert handoff.version == 1


def test_staff_without_membership_can_neither_reply_nor_note_nor_take_over(
    staff_operator, handoff, tenant, conversation
):
    client = login(staff_operator)
    q = f"?tenant={tenant.slug}"
    for path, body in [
        (f"/console/api/handoffs/{handoff.pk}/reply", {"text": "hello"}),
        (
            f"/console/api/handoffs/{handoff.pk}/close",
            {"expected_version": 1, "outcome": "resolved"},
        ),
        (f"/console/api/conversations/{conversation.pk}/notes", {"text": "note"}),
        (f"/console/api/conversations/{conversation.pk}/takeover", {}),
    ]:
        r = client.post(path + q, body, content_type="application/json")
        assert r.status_code == 403, (path, r.content)
    assert not InternalNote.objects.exists()
    assert not Message.objects.filter(role="agent").exists()


def test_staff_with_a_membership_may_claim(staff_operator, handoff, tenant):
    MembershipFactory(tenant=tenant, user=staff_operator)
    r = login(staff_operator).post(
        f"/console/api/handoffs/{handoff.pk}/claim?tenant={tenant.slug}",
        {"expected_version": 1},
        content_type="application/json",
    )
    assert r.status_code == 200, r.content


def test_queue_json_keeps_the_shape_the_console_page_reads(agent, handoff):
    body = login(agent).get("/console/api/queue").json()
    assert set(body) == {"handoffs", "agents_online", "active"}
    (row,) = body["handoffs"]
    assert list(row) == [
        "id",
        "version",
        "state",
        "reason",
        "reason_label",
        "reason_detail",
        "priority",
        "conversation_id",
        "customer",
        "verified",
        "customer_email",
        "last_message",
        "created_at",
        "waiting_seconds",
        "assigned_to",
        "assigned_to_id",
        "routed_to",
        "routed_to_id",
        "escalated",
        "viewers",
        "has_summary",
    ]
    assert row["created_at"] == handoff.created_at.isoformat()
    assert row["customer"] == f"Visitor {handoff.conversation.customer_id}"
    assert (row["assigned_to"], row["viewers"], row["verified"]) == (None, [], False)
