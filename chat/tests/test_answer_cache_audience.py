"""The answer cache never crosses audiences: an answer built from a segment's documents is
never served from the cache to a customer outside that segment, nor a public visitor's answer
hiding the segment's own to a member."""

import pytest
from asgiref.sync import async_to_sync

from chat import orchestrator
from chat.tests.helpcenter import index_document
from conversations import services
from conversations.models import Customer

VIP_TEXT = """# VIP shipping

## Delivery for VIP members
VIP members get overnight delivery on every order with courier code NIGHTHAWK-77.
"""

PUBLIC_TEXT = """# Shipping

## Delivery for members
Members get standard delivery on their orders, which takes 3-5 business days.
"""

QUESTION = "What delivery do VIP members get on their orders?"


@pytest.fixture(autouse=True)
def _shared_cache(settings):
    # One cache shared by every conversation of the test (as Redis is for every process).
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.ANSWER_CACHE_ENABLED = True


@pytest.fixture
def documents(tenant):
    vip = index_document(tenant, "VIP shipping", VIP_TEXT, audience="segments", segments=["vip"])
    public = index_document(tenant, "Shipping", PUBLIC_TEXT)
    return vip, public


def _ask(tenant, customer, client_id):
    conversation = services.conversation_start(tenant=tenant, customer=customer)
    return async_to_sync(orchestrator.handle_customer_message)(
        conversation=conversation, client_message_id=client_id, text=QUESTION
    ).reply


def _customer(tenant, external_id, segments, verified=True):
    return Customer.objects.create(
        tenant=tenant, external_id=external_id, verified=verified, segments=segments
    )


def test_a_segment_answer_is_not_served_from_the_cache_to_others(tenant, documents):
    vip_doc, _public_doc = documents
    member = _customer(tenant, "vip-1", ["vip"])
    first = _ask(tenant, member, "m1")
    assert "NIGHTHAWK-77" in first.text
    assert vip_doc.pk in {c["document_id"] for c in first.citations}
    again = _ask(tenant, _customer(tenant, "vip-2", ["vip"]), "m2")
    assert again.meta.get("cached") is True  # the cache works within the segment

    for who, customer in (
        ("verified, other segment", _customer(tenant, "gold-1", ["gold"])),
        ("verified, no segment", _customer(tenant, "plain-1", [])),
        ("visitor claiming the segment", _customer(tenant, "anon-1", ["vip"], verified=False)),
    ):
        reply = _ask(tenant, customer, f"o-{customer.external_id}")
        assert "NIGHTHAWK" not in reply.text, who
        assert vip_doc.pk not in {c["document_id"] for c in reply.citations}, who


def test_a_public_answer_cached_first_does_not_hide_the_segments_own_answer(tenant, documents):
    vip_doc, _public_doc = documents
    visitor = services.customer_get_or_create_visitor(tenant=tenant, visitor_id="v-cache")
    public = _ask(tenant, visitor, "p1")
    assert "NIGHTHAWK" not in public.text
    member = _ask(tenant, _customer(tenant, "vip-3", ["vip"]), "m3")
    assert member.meta.get("cached") is not True
    assert vip_doc.pk in {c["document_id"] for c in member.citations}
