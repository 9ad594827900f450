"""The WHERE clause every search shares (knowledge/selectors/filters.py), run as SQL against
indexed documents: a tenant's live chunks only, and for a customer only the public ones plus
those of the customer's own segments; an agent sees every audience of the tenant."""

import pytest
from django.db import connection

from chat.tests.helpcenter import index_document
from knowledge.models import Chunk
from knowledge.selectors.filters import Audience, filter_sql

pytestmark = [pytest.mark.django_db]


TITLES = (
    "SELECT DISTINCT d.title FROM knowledge_chunk c JOIN knowledge_document d "
    "ON d.id = c.document_id WHERE "
)


def _titles(tenant, audience: Audience) -> set[str]:
    where, params = filter_sql(tenant=tenant, audience=audience)
    query = TITLES + where  # noqa: S608 - the clause under test, with its own parameters
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return {row[0] for row in cursor.fetchall()}


def test_each_audience_sees_the_tenants_live_documents_it_may_read(tenant, other_tenant):
    index_document(tenant, "Public", "# Public\n\nShipping takes three days.\n")
    index_document(tenant, "Vip", "# Vip\n\nVIP members ship overnight.\n", "segments", ["vip"])
    index_document(tenant, "Gold", "# Gold\n\nGold members ship free.\n", "segments", ["gold"])
    index_document(tenant, "Staff", "# Staff\n\nEscalate to tier two.\n", "agents")
    index_document(other_tenant, "Other", "# Other\n\nAnother shop's page.\n")
    retired = index_document(tenant, "Retired", "# Retired\n\nAn old page.\n")
    Chunk.objects.filter(document=retired).update(is_live=False)

    assert _titles(tenant, Audience.customer()) == {"Public"}
    assert _titles(tenant, Audience.customer([" VIP "])) == {"Public", "Vip"}
    assert _titles(tenant, Audience.customer(["vip", "gold"])) == {"Public", "Vip", "Gold"}
    assert _titles(tenant, Audience.agent()) == {"Public", "Vip", "Gold", "Staff"}
    assert _titles(other_tenant, Audience.customer(["vip"])) == {"Other"}


def test_an_unknown_audience_kind_is_refused():
    with pytest.raises(ValueError, match="Unknown audience kind 'admin'"):
        Audience(kind="admin")
