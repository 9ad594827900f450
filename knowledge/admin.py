"""Admin upload form for knowledge documents; indexing progress refreshes while it runs."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from knowledge import services
from knowledge.models import Chunk, Document, DocumentVersion
from supportbot.errors import ApplicationError
from supportbot.services import Actor


class DocumentForm(forms.ModelForm):
    file = forms.FileField(
        required=False,
        help_text="PDF, HTML, Markdown or plain text. On an existing document a new file "
        "makes a new version (identical bytes change nothing).",
    )

    class Meta:
        model = Document
        fields = ["tenant", "title", "audience", "segments"]

    def clean(self):
        cleaned = super().clean()
        if self.instance.pk is None and not cleaned.get("file"):
            self.add_error("file", "Choose a file to upload.")
        return cleaned


class DocumentVersionInline(admin.TabularInline):
    model = DocumentVersion
    fields = [
        "version",
        "filename",
        "content_type",
        "size",
        "audience",
        "segments",
        "sha256",
        "created_at",
    ]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    form = DocumentForm
    list_display = ["title", "tenant", "audience", "version", "live_version", "status", "progress"]
    list_filter = ["tenant", "status", "audience"]
    search_fields = ["title"]
    readonly_fields = ["version", "live_version", "status", "progress", "error", "updated_at"]
    inlines = [DocumentVersionInline]
    actions = ["reindex_failed"]

    @admin.display(description="progress")
    def progress(self, obj: Document) -> str:
        return format_html(
            '<progress value="{}" max="100"></progress> {} / {} chunks ({}%)',
            obj.progress_percent,
            obj.chunks_done,
            obj.chunks_total,
            obj.progress_percent,
        )

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "tenant"] if obj is not None else fields

    def save_model(self, request, obj, form, change):
        actor = Actor.for_user(request.user)
        upload = form.cleaned_data.get("file")
        try:
            if not change:
                document = services.document_upload(
                    tenant=obj.tenant,
                    file=upload,
                    declared_type=upload.content_type or "",
                    title=obj.title,
                    audience=obj.audience,
                    segments=obj.segments,
                    actor=actor,
                    user=request.user,
                )
                obj.pk = document.pk
                obj._state.adding = False
                return
            services.document_update(
                tenant=obj.tenant,
                document_id=obj.pk,
                title=obj.title,
                audience=obj.audience,
                segments=obj.segments,
                actor=actor,
            )
            if upload:
                _, created = services.document_replace_file(
                    tenant=obj.tenant,
                    document_id=obj.pk,
                    file=upload,
                    declared_type=upload.content_type or "",
                    actor=actor,
                    user=request.user,
                )
                if not created:
                    messages.info(request, "The file is identical to the newest version.")
        except ApplicationError as exc:
            messages.error(request, exc.detail)

    def delete_model(self, request, obj):
        services.document_delete(
            tenant=obj.tenant, document_id=obj.pk, actor=Actor.for_user(request.user)
        )

    def delete_queryset(self, request, queryset):
        for document in queryset:
            self.delete_model(request, document)

    @admin.action(description="Re-index failed documents")
    def reindex_failed(self, request, queryset):
        for document in queryset.filter(status=Document.Status.FAILED):
            services.document_reindex(
                tenant=document.tenant, document_id=document.pk, actor=Actor.for_user(request.user)
            )


@admin.register(Chunk)
class ChunkAdmin(admin.ModelAdmin):
    list_display = ["id", "document", "version", "ordinal", "is_live", "audience"]
    list_filter = ["tenant", "is_live"]
    fields = ["tenant", "document", "version", "ordinal", "heading_path", "text", "is_live"]
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
