from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import Document
from supportbot.models import AuditEvent
from supportbot.tests.factories import UserFactory


def test_admin_upload_form_creates_a_pending_document_through_the_service(client, tenant):
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    r = client.post(
        "/admin/knowledge/document/add/",
        {
            "tenant": tenant.pk,
            "title": "Returns",
            "audience": "public",
            "segments": "",
            "file": SimpleUploadedFile("returns.md", b"# Returns\n\nWithin 30 days.\n"),
            "versions-TOTAL_FORMS": "0",
            "versions-INITIAL_FORMS": "0",
        },
    )
    assert r.status_code == 302, r.context["errors"] if r.context else r.content
    document = Document.objects.get(tenant=tenant)
    assert (document.title, document.status, document.version) == ("Returns", "pending", 1)
    assert document.versions.get().filename == "returns.md"
    assert AuditEvent.objects.filter(action="knowledge.document.uploaded").exists()
    page = client.get(f"/admin/knowledge/document/{document.pk}/change/")
    assert page.status_code == 200
    assert 'http-equiv="refresh"' in page.content.decode()  # refreshes while indexing
