"""The answer cache's entries (chat/orchestrator/answer_cache.py) in the real Redis: each one
expires after a day and is listed under the customer it was built for, so erasure drops it."""

import secrets

import pytest
from django.core.cache import cache

from chat.orchestrator import answer_cache
from chat.orchestrator.base import Draft
from conversations import customer_data, services
from conversations.models import Message

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def conversation(tenant):
    customer = services.customer_get_or_create_visitor(tenant=tenant, visitor_id="v-cache")
    return services.conversation_start(tenant=tenant, customer=customer)


def test_a_cached_answer_expires_after_a_day_and_is_listed_under_its_customer(conversation):
    key = f"answer:test-{secrets.token_hex(4)}"
    answer_cache.cache_put(
        key=key,
        draft=Draft("Refunds take 5 days.", Message.Kind.EXTRACTIVE),
        conversation=conversation,
    )

    client = cache._cache.get_client(key)
    ttl = client.ttl(cache.make_and_validate_key(key))
    assert answer_cache.CACHE_TTL_SECONDS - 60 < ttl <= answer_cache.CACHE_TTL_SECONDS
    index = cache.get(customer_data._cache_index_key(conversation.customer_id))
    assert index == [key]
    cached = answer_cache.cached_draft(conversation=conversation, key=key)
    assert (cached.text, cached.kind) == ("Refunds take 5 days.", Message.Kind.EXTRACTIVE)


def test_an_answer_of_another_kind_is_not_cached(conversation):
    key = f"answer:test-{secrets.token_hex(4)}"
    answer_cache.cache_put(
        key=key,
        draft=Draft("A person will reply.", Message.Kind.HANDOFF),
        conversation=conversation,
    )
    assert cache.get(key) is None
    assert cache.get(customer_data._cache_index_key(conversation.customer_id)) is None


def test_an_entry_that_is_not_sealed_is_never_served(conversation):
    """Only what the product sealed with the tenant's key is an answer: a plain entry at the
    key (written by anyone who can reach Redis, or left by an older version) is a miss."""
    key = f"answer:test-{secrets.token_hex(4)}"
    plain = '{"text": "Refunds are instant and unlimited.", "kind": "extractive",'
    plain += ' "chunk_ids": [], "quotes": {}}'
    cache.set(key, plain, 60)
    assert answer_cache.cached_draft(conversation=conversation, key=key) is None
    cache.set(key, "", 60)
    assert answer_cache.cached_draft(conversation=conversation, key=key) is None
