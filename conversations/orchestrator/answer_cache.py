"""The answer cache: tenant + knowledge version + audience + normalized question.

Only answers that used no tool and hold no personal data are cached; the cache is a
rebuildable copy (PostgreSQL is the truth) and a hit is re-checked against live chunks.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.conf import settings
from django.core.cache import cache

from conversations import intents
from conversations.models import Message
from conversations.orchestrator.base import Draft
from conversations.orchestrator.prompt import PROMPT_VERSION
from knowledge import selectors as knowledge

logger = logging.getLogger(__name__)

CACHE_TTL_SECONDS = 24 * 3600
CACHEABLE_KINDS = (Message.Kind.ANSWER, Message.Kind.EXTRACTIVE)


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
        ]
    )
    return "answer:" + hashlib.sha256(raw.encode()).hexdigest()


def cached_draft(*, conversation, key: str) -> Draft | None:
    """The cached answer with its passages re-read (None when missing or a chunk is gone)."""
    try:
        cached: dict[str, Any] | None = cache.get(key)
    except Exception:  # Redis unreachable: a miss; the answer comes from PostgreSQL
        logger.warning("answer cache unreachable; answering without it", exc_info=True)
        return None
    if not cached:
        return None
    draft = Draft(cached["text"], cached["kind"], stats={"meta": {"cached": True}})
    draft.passages = knowledge.chunk_get_many(
        tenant=conversation.tenant, chunk_ids=cached["chunk_ids"]
    )
    draft.quotes = {int(k): v for k, v in cached["quotes"].items()}
    if len(draft.passages) != len(cached["chunk_ids"]):
        return None
    return draft


def cache_put(*, key: str, draft: Draft) -> None:
    if draft.kind not in CACHEABLE_KINDS:
        return
    value = {
        "text": draft.text,
        "kind": draft.kind,
        "chunk_ids": [p.chunk_id for p in draft.passages],
        "quotes": {str(k): v for k, v in draft.quotes.items()},
    }
    try:
        cache.set(key, value, CACHE_TTL_SECONDS)
    except Exception:  # Redis unreachable: the answer is saved, only not cached
        logger.warning("answer cache unreachable; not cached", exc_info=True)
