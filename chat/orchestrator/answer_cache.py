"""The answer cache: tenant + knowledge version + audience + normalized question.

Only answers that used no tool and hold no personal data are cached; the cache is a
rebuildable copy (PostgreSQL is the truth) and a hit is re-checked against live chunks. The
key is a keyed hash (HMAC under a per-tenant key), the entry is sealed with the tenant's data
key, and each entry is listed under the customer whose turn produced it so erasing the
customer drops it (conversations/customer_data.py).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.conf import settings
from django.core.cache import cache

from chat import intents
from chat.orchestrator.base import Draft
from chat.orchestrator.extractive import EXTRACTIVE_PROMPT_VERSION
from chat.orchestrator.prompt import PROMPT_VERSION
from conversations import customer_data
from conversations.models import Message
from knowledge import selectors as knowledge
from supportbot import encryption

logger = logging.getLogger(__name__)

CACHE_TTL_SECONDS = 24 * 3600
CACHEABLE_KINDS = (Message.Kind.ANSWER, Message.Kind.EXTRACTIVE)
CACHE_CONTEXT = "answer-cache"


def cache_key(*, conversation, text: str, audience: knowledge.Audience) -> str | None:
    if not settings.ANSWER_CACHE_ENABLED or intents.has_personal_data(text):
        return None
    version = knowledge.knowledge_version(tenant=conversation.tenant)
    raw = "|".join(
        [
            str(conversation.tenant_id),
            version,
            audience.kind,
            ",".join(audience.segments),
            intents.normalize_question(text),
            PROMPT_VERSION,
            EXTRACTIVE_PROMPT_VERSION,
        ]
    )
    return "answer:" + encryption.blind_index(
        tenant_id=conversation.tenant_id, purpose="answer-cache", value=raw
    )


def cached_draft(*, conversation, key: str) -> Draft | None:
    """The cached answer with its passages re-read (None when missing or a chunk is gone)."""
    try:
        sealed: str | None = cache.get(key)
    except Exception:  # Redis unreachable: a miss; the answer comes from PostgreSQL
        logger.warning("answer cache unreachable; answering without it", exc_info=True)
        return None
    if not sealed or not encryption.is_sealed(sealed):
        return None
    try:
        cached: dict[str, Any] = json.loads(encryption.unseal(sealed, context=CACHE_CONTEXT))
    except (encryption.DecryptionError, ValueError):
        return None
    draft = Draft(cached["text"], cached["kind"], stats={"meta": {"cached": True}})
    draft.passages = knowledge.chunk_get_many(
        tenant=conversation.tenant, chunk_ids=cached["chunk_ids"]
    )
    draft.quotes = {int(k): v for k, v in cached["quotes"].items()}
    if len(draft.passages) != len(cached["chunk_ids"]):
        return None
    return draft


def cache_put(*, key: str, draft: Draft, conversation) -> None:
    """Cache `draft` sealed with the tenant's key and listed under the conversation's customer."""
    if draft.kind not in CACHEABLE_KINDS:
        return
    entry = {
        "text": draft.text,
        "kind": draft.kind,
        "chunk_ids": [p.chunk_id for p in draft.passages],
        "quotes": {str(k): v for k, v in draft.quotes.items()},
    }
    sealed = encryption.seal(
        tenant_id=conversation.tenant_id, plaintext=json.dumps(entry), context=CACHE_CONTEXT
    )
    try:
        cache.set(key, str(sealed), CACHE_TTL_SECONDS)
        customer_data.answer_cache_remember(customer_id=conversation.customer_id, key=key)
    except Exception:  # Redis unreachable: the answer is saved, only not cached
        logger.warning("answer cache unreachable; not cached", exc_info=True)
