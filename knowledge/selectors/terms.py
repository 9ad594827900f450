"""Which words a tenant's documents never mention: not in any live passage (full text, stemmed),
not in the tenant's vocabulary, and not a misspelling of a vocabulary word."""

from __future__ import annotations

from django.db import connections

from supportbot import replicas
from supportbot.models import Tenant

# A word counts as a vocabulary word misspelt at this pg_trgm similarity ("canda" and "canada"
# 0.44, "windos" and "windows" 0.5; "wsl" and "ssl" 0.14) when about as long: a name made of a
# known word is no misspelling of it ("oh-my-fish" and "fish" 0.45, "homebrew" and "home" 0.4).
MISSPELLING_SIMILARITY = 0.4
MISSPELLING_LENGTH_DIFFERENCE = 2

_UNKNOWN_SQL = """
    SELECT t.w FROM unnest(%s::text[]) WITH ORDINALITY AS u(v, n), lower(u.v) AS t(w)
    WHERE numnode(plainto_tsquery('english', t.w)) > 0
      AND NOT EXISTS (
        SELECT 1 FROM knowledge_chunk c WHERE c.tenant_id = %s::bigint AND c.is_live
        AND c.search_vector @@ plainto_tsquery('english', t.w))
      AND NOT EXISTS (
        SELECT 1 FROM knowledge_term k WHERE k.tenant_id = %s::bigint AND k.word = t.w)
      AND NOT EXISTS (
        SELECT 1 FROM knowledge_term k WHERE k.tenant_id = %s::bigint AND k.word %% t.w
        AND similarity(k.word, t.w) >= %s AND abs(length(k.word) - length(t.w)) <= %s)
    ORDER BY u.n
"""


@replicas.stale_tolerant
def terms_unknown(*, tenant: Tenant, words: list[str]) -> list[str]:
    """The words among `words` that no live document of `tenant` mentions, lower case, in
    order. A stop word or punctuation alone is never unknown (full text has nothing to find)."""
    if not words:
        return []
    alias = replicas.read_alias()
    with connections[alias].cursor() as cursor:
        cursor.execute(
            _UNKNOWN_SQL,
            [
                list(words),
                tenant.pk,
                tenant.pk,
                tenant.pk,
                MISSPELLING_SIMILARITY,
                MISSPELLING_LENGTH_DIFFERENCE,
            ],
        )
        return [row[0] for row in cursor.fetchall()]
