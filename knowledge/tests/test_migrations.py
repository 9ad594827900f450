"""Data migrations of the knowledge app."""

import importlib

from django.apps import apps

from knowledge.models import DocumentVersion
from knowledge.tests.factories import DocumentFactory

version_audience = importlib.import_module("knowledge.migrations.0003_version_audience")


def test_existing_versions_take_their_documents_current_audience(tenant):
    public = DocumentFactory(tenant=tenant, audience="public")
    segment = DocumentFactory(tenant=tenant, audience="segments", segments=["vip"])
    DocumentVersion.objects.update(audience="agents", segments=[])  # as the column default

    version_audience.versions_take_document_audience(apps, None)

    rows = {v.document_id: (v.audience, v.segments) for v in DocumentVersion.objects.all()}
    assert rows == {public.pk: ("public", []), segment.pk: ("segments", ["vip"])}
