"""The /kb/ pages: a version is served only to readers its own audience allows."""

import pytest
from django.core.files.base import ContentFile

from knowledge import services
from knowledge.models import Chunk, Document, DocumentVersion
from knowledge.selectors import Audience, search_passages
from supportbot.services import Actor
from supportbot.tests.factories import MembershipFactory

from .conftest import upload_and_index

V1 = b"# Returns\n\n## Staff notes\n\nInternal: waive the restocking fee for VIPs.\n"
V2 = b"# Returns\n\n## Window\n\nReturn items within 30 days of delivery.\n"


def _replace(tenant, document, data: bytes) -> Document:
    services.document_replace_file(
        tenant=tenant,
        document_id=document.pk,
        file=ContentFile(data, name="returns.md"),
        actor=Actor.system(),
    )
    return services.document_index(document_id=document.pk, version=document.version + 1)


def _publish(tenant, document, audience="public", segments=()) -> Document:
    return services.document_update(
        tenant=tenant,
        document_id=document.pk,
        audience=audience,
        segments=list(segments),
        actor=Actor.system(),
    )


@pytest.fixture
def published_over_restricted(tenant):
    """v1 agents-only, v2 uploaded while agents-only, then the document made public."""
    document = upload_and_index(tenant, "returns.md", V1, audience="agents")
    document = _replace(tenant, document, V2)
    assert (document.status, document.live_version) == ("ready", 2)
    return _publish(tenant, document)


def test_publishing_never_exposes_an_older_restricted_version(
    tenant, client, published_over_restricted
):
    document = published_over_restricted
    base = f"/kb/{tenant.slug}/{document.pk}"
    current = client.get(f"{base}/")
    assert current.status_code == 200
    assert b"within 30 days" in current.content
    assert client.get(f"{base}/v2/").status_code == 200
    old = client.get(f"{base}/v1/")
    assert old.status_code == 404
    assert b"restocking" not in old.content
    assert client.get(f"{base}/v3/").content == old.content  # nothing tells them apart


def test_older_restricted_version_keeps_its_audience_on_its_rows(published_over_restricted):
    document = published_over_restricted
    versions = dict(
        DocumentVersion.objects.filter(document=document).values_list("version", "audience")
    )
    assert versions == {1: "agents", 2: "public"}
    chunks = set(Chunk.objects.filter(document=document).values_list("version", "audience"))
    assert chunks == {(1, "agents"), (2, "public")}


def test_published_document_search_finds_only_the_live_public_version(
    tenant, published_over_restricted
):
    found = search_passages(
        tenant=tenant, query="restocking fee returns window", audience=Audience.customer()
    )
    assert {(p.document_version, "restocking" in p.text) for p in found.passages} == {(2, False)}


def test_agents_of_the_tenant_see_older_restricted_versions(
    tenant, client, agent, published_over_restricted
):
    client.force_login(agent)
    page = client.get(f"/kb/{tenant.slug}/{published_over_restricted.pk}/v1/")
    assert page.status_code == 200
    assert b"restocking" in page.content


def test_agents_of_another_tenant_do_not_see_restricted_versions(
    tenant, other_tenant, client, published_over_restricted
):
    outsider = MembershipFactory(tenant=other_tenant, role="agent").user
    client.force_login(outsider)
    assert client.get(f"/kb/{tenant.slug}/{published_over_restricted.pk}/v1/").status_code == 404


def test_restricting_a_document_hides_every_version(tenant, client):
    document = upload_and_index(tenant, "returns.md", V2)
    document = _replace(tenant, document, V2 + b"\nNew paragraph.\n")
    _publish(tenant, document, audience="agents")
    for path in ("", "v1/", "v2/"):
        assert client.get(f"/kb/{tenant.slug}/{document.pk}/{path}").status_code == 404, path
    assert set(Chunk.objects.filter(document=document).values_list("audience", flat=True)) == {
        "agents"
    }


def test_segment_change_narrows_older_versions_to_common_segments(tenant):
    document = upload_and_index(tenant, "a.md", V1, audience="segments", segments=["gold", "vip"])
    document = _replace(tenant, document, V2)
    _publish(tenant, document, audience="segments", segments=["vip", "staff"])
    rows = DocumentVersion.objects.filter(document=document)
    versions = {v.version: (v.audience, v.segments) for v in rows}
    assert versions == {1: ("segments", ["vip"]), 2: ("segments", ["staff", "vip"])}


def test_new_version_takes_the_documents_current_audience(tenant):
    document = upload_and_index(tenant, "returns.md", V2, audience="agents")
    _publish(tenant, document)
    document = _replace(tenant, document, V1)
    assert DocumentVersion.objects.get(document=document, version=2).audience == "public"
    assert set(
        Chunk.objects.filter(document=document, version=2).values_list("audience", flat=True)
    ) == {"public"}


@pytest.mark.parametrize(
    ("first", "second", "narrowest"),
    [
        (("public", []), ("agents", []), ("agents", [])),
        (("public", []), ("segments", ["vip"]), ("segments", ["vip"])),
        (("segments", ["vip"]), ("public", []), ("segments", ["vip"])),
        (("segments", ["gold"]), ("segments", ["vip"]), ("agents", [])),
        (("agents", []), ("public", []), ("agents", [])),
        (("public", []), ("public", []), ("public", [])),
    ],
)
def test_audience_narrowest_never_widens(first, second, narrowest):
    assert services.audience_narrowest(first, second) == narrowest
