"""Who may read what: the audience of a search and the WHERE clause every candidate list
shares (tenant, live, audience), applied inside SQL, never afterwards."""

from __future__ import annotations

from dataclasses import dataclass

from supportbot.models import Tenant


@dataclass(frozen=True)
class Audience:
    """Who is asking: a customer (with optional segments) or an agent (sees every document)."""

    kind: str = "customer"  # "customer" | "agent"
    segments: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("customer", "agent"):
            raise ValueError(f"Unknown audience kind {self.kind!r}.")

    @classmethod
    def customer(cls, segments=()) -> Audience:
        return cls(kind="customer", segments=tuple(s.strip().lower() for s in segments if s))

    @classmethod
    def agent(cls) -> Audience:
        return cls(kind="agent")


# --------------------------------------------------------------------------- filters


def filter_sql(*, tenant: Tenant, audience: Audience) -> tuple[str, list]:
    """The WHERE clause every candidate query shares: tenant, searchable, audience.

    The tenant id is compared as bigint so that it can be part of an index condition of the
    per-tenant full-text index (btree_gin) and match a tenant's partial HNSW index.
    """
    sql = "c.tenant_id = %s::bigint AND c.is_live"
    params: list = [tenant.pk]
    if audience.kind == "customer":
        if audience.segments:
            sql += (
                " AND (c.audience = 'public'"
                " OR (c.audience = 'segments' AND c.segments && %s::varchar[]))"
            )
            params.append(list(audience.segments))
        else:
            sql += " AND c.audience = 'public'"
    return sql, params
