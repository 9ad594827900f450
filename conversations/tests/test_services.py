import pytest

from conversations import services
from conversations.models import Message
from supportbot.errors import ApplicationError


def _exchange(conversation, i):
    message, _ = services.message_receive(
        conversation=conversation, client_message_id=f"c{i}", text=f"Question number {i}?"
    )
    reply = services.reply_reserve(customer_message=message)
    services.reply_finalize(
        reply=reply,
        text=f"Answer {i}.",
        kind="extractive",
        citations=[{"title": "Shipping"}],
        customer_state="answered",
    )


def test_a_summary_is_due_at_exactly_twelve_messages_past_the_last_one_and_no_sooner(tenant):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from conversations.services.conversations import SUMMARY_EVERY, SUMMARY_KEEP_RECENT

    customer = services.customer_get_or_create_visitor(tenant=tenant, visitor_id="d")
    conversation = services.conversation_start(tenant=tenant, customer=customer)
    busy = services.conversation_start(tenant=tenant, customer=customer)
    for i in range(10):
        _exchange(busy, i)  # another conversation's messages never count
    wanted = SUMMARY_KEEP_RECENT + SUMMARY_EVERY
    for i in range(wanted // 2 - 1):
        _exchange(conversation, i)
    services.message_receive(conversation=conversation, client_message_id="odd", text="One?")
    with CaptureQueriesContext(connection) as ctx:
        assert not services.conversation_summary_due(conversation_id=conversation.pk)
    assert len(ctx.captured_queries) == 1
    reply = services.reply_reserve(customer_message=Message.objects.get(client_message_id="odd"))
    services.reply_finalize(
        reply=reply, text="Yes.", kind="extractive", citations=[], customer_state="answered"
    )
    assert services.conversation_summary_due(conversation_id=conversation.pk)
    services.conversation_summary_rebuild(conversation_id=conversation.pk)
    assert not services.conversation_summary_due(conversation_id=conversation.pk)


def test_summary_covers_older_messages_and_keeps_recent_ones_out(tenant):
    customer = services.customer_get_or_create_visitor(tenant=tenant, visitor_id="s")
    conversation = services.conversation_start(tenant=tenant, customer=customer)
    for i in range(8):
        _exchange(conversation, i)
    assert services.conversation_summary_due(conversation_id=conversation.pk)
    summary = services.conversation_summary_rebuild(conversation_id=conversation.pk)
    conversation.refresh_from_db()
    assert "Customer asked: Question number 0?" in summary
    assert "Bot (extractive) from Shipping: Answer 0." in summary
    assert "Question number 7?" not in summary  # recent: verbatim in prompts instead
    last_summarized = Message.objects.get(pk=conversation.summary_through_message_id)
    assert last_summarized.text == "Answer 4."
    assert not services.conversation_summary_due(conversation_id=conversation.pk)
    # Rebuildable: the same input gives the same summary; originals are untouched.
    assert services.conversation_summary_rebuild(conversation_id=conversation.pk) == summary
    assert Message.objects.filter(conversation=conversation).count() == 16


@pytest.mark.parametrize(
    ("client_message_id", "text", "field"),
    [("m1", "hi \ud800", "text"), ("m\udfff", "hi", "client_message_id"), ("m1", "\x00", "text")],
)
def test_text_no_database_can_store_is_refused_with_the_field_named(
    tenant, client_message_id, text, field
):
    customer = services.customer_get_or_create_visitor(tenant=tenant, visitor_id="s")
    conversation = services.conversation_start(tenant=tenant, customer=customer)
    with pytest.raises(ApplicationError) as refused:
        services.message_receive(
            conversation=conversation, client_message_id=client_message_id, text=text
        )
    assert (refused.value.code, refused.value.field) == ("invalid", field)
    assert not Message.objects.filter(conversation=conversation).exists()


def test_a_retried_message_returns_the_saved_one_even_once_its_conversation_closed(tenant):
    from conversations.models import Conversation
    from supportbot.errors import Conflict

    customer = services.customer_get_or_create_visitor(tenant=tenant, visitor_id="r")
    conversation = services.conversation_start(tenant=tenant, customer=customer)
    saved, created = services.message_receive(
        conversation=conversation, client_message_id="m1", text="Where is my parcel?"
    )
    assert created
    again, created = services.message_receive(
        conversation=conversation, client_message_id="m1", text="Where is my parcel?"
    )
    assert (again.pk, created) == (saved.pk, False)
    Conversation.objects.filter(pk=conversation.pk).update(state=Conversation.State.CLOSED)
    conversation.refresh_from_db()
    retried, created = services.message_receive(
        conversation=conversation, client_message_id="m1", text="Where is my parcel?"
    )
    assert (retried.pk, created) == (saved.pk, False)
    with pytest.raises(Conflict):
        services.message_receive(conversation=conversation, client_message_id="m2", text="Hi?")
    assert Message.objects.filter(conversation=conversation).count() == 1


def test_a_retry_whose_text_would_be_refused_still_gets_the_saved_message(tenant):
    customer = services.customer_get_or_create_visitor(tenant=tenant, visitor_id="t")
    conversation = services.conversation_start(tenant=tenant, customer=customer)
    saved, _ = services.message_receive(
        conversation=conversation, client_message_id="m1", text="Can I return boots?"
    )
    retried, created = services.message_receive(
        conversation=conversation, client_message_id="m1", text=""
    )
    assert (retried.pk, created) == (saved.pk, False)
    with pytest.raises(ApplicationError):
        services.message_receive(conversation=conversation, client_message_id="m2", text="")
