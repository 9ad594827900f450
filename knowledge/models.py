"""Knowledge: documents (with file versions), their searchable chunks, a per-tenant revision."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from pgvector.django import HnswIndex, VectorField

from supportbot.models import Tenant

EMBEDDING_DIMENSIONS = 384
FTS_CONFIG = "english"


def document_upload_to(instance: DocumentVersion, filename: str) -> str:
    """Store files per tenant and document; the version keeps old files citable."""
    return f"knowledge/{instance.tenant_id}/{instance.document_id}/v{instance.version}/{filename}"


class Document(models.Model):
    """A tenant's knowledge document. `version` is the newest upload; `live_version` is searched.

    While a new version is indexing, the previous ready version stays searchable; chunks of
    superseded versions are kept (not searched) so earlier answers can still cite them.
    """

    class Audience(models.TextChoices):
        PUBLIC = "public", "Public (every customer)"
        SEGMENTS = "segments", "Customers in the listed segments (and agents)"
        AGENTS = "agents", "Agents only"

    class Status(models.TextChoices):
        PENDING = "pending"
        EXTRACTING = "extracting"
        EMBEDDING = "embedding"
        READY = "ready"
        FAILED = "failed"

    FINAL_STATUSES = (Status.READY, Status.FAILED)

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="documents")
    title = models.CharField(max_length=300)
    audience = models.CharField(max_length=10, choices=Audience.choices, default=Audience.PUBLIC)
    segments = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    version = models.PositiveIntegerField(default=1)
    live_version = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    chunks_done = models.PositiveIntegerField(default=0)
    chunks_total = models.PositiveIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=0)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title", "id"]
        indexes = [
            models.Index(fields=["tenant", "title"], name="knowledge_doc_tenant_title"),
            models.Index(fields=["status", "updated_at"], name="knowledge_doc_status_time"),
        ]

    def __str__(self) -> str:
        return f"{self.title} (v{self.version}, {self.status})"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL_STATUSES

    @property
    def progress_percent(self) -> int:
        if self.status == self.Status.READY:
            return 100
        if not self.chunks_total:
            return 0
        return int(100 * self.chunks_done / self.chunks_total)


class DocumentVersion(models.Model):
    """One uploaded file of a document, with the text extracted from it (spans point into it).

    Each version keeps its own audience (copied to its chunks): widening the document's
    audience changes its current versions only, so an older restricted version never becomes
    public; narrowing it narrows every version.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    file = models.FileField(upload_to=document_upload_to, max_length=500)
    filename = models.CharField(max_length=255)
    content_type = models.CharField(max_length=50)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    text = models.TextField(blank=True)
    # `knowledge.extraction.extractor_version` of the content type that made `text` (0: before
    # versions existed).
    # db_default: processes of the previous release still insert rows without it mid-deploy.
    extractor_version = models.PositiveSmallIntegerField(default=0, db_default=0)
    audience = models.CharField(
        max_length=10, choices=Document.Audience.choices, default=Document.Audience.AGENTS
    )
    segments = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["document_id", "version"]
        constraints = [
            models.UniqueConstraint(fields=["document", "version"], name="knowledge_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.filename} v{self.version}"


class Chunk(models.Model):
    """A searchable passage of one document version.

    Audience and segments are copied from the document version (and `is_live` is set when the
    version goes live) so that every search filter is a column of this table (filters run
    inside the index scans, never after them).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    version = models.PositiveIntegerField()
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    heading_path = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    context = models.CharField(
        max_length=1000, blank=True, help_text="Title and headings, weighted higher in full text."
    )
    span_start = models.PositiveIntegerField()
    span_end = models.PositiveIntegerField()
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    # Its sentences' vectors, embedded at indexing (`knowledge.sentences`); empty for passages
    # indexed before they were stored (a turn then embeds those sentences itself).
    sentence_vectors = models.BinaryField(default=bytes, db_default=b"", blank=True, editable=False)
    search_vector = models.GeneratedField(
        expression=SearchVector("context", weight="A", config=FTS_CONFIG)
        + SearchVector("text", weight="B", config=FTS_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    audience = models.CharField(max_length=10, choices=Document.Audience.choices)
    segments = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    is_live = models.BooleanField(default=False)

    class Meta:
        ordering = ["document_id", "version", "ordinal"]
        constraints = [
            models.UniqueConstraint(
                fields=["document", "version", "ordinal"], name="knowledge_chunk_unique"
            )
        ]
        indexes = [
            # Exact-scan path for small tenants: B-tree on tenant over searchable rows.
            models.Index(fields=["tenant"], condition=Q(is_live=True), name="knowledge_chunk_live"),
            HnswIndex(
                name="knowledge_chunk_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
                condition=Q(is_live=True),
            ),
            # Full text per tenant (btree_gin): the tenant narrows the posting lists inside
            # the index, so a small tenant never pays for other tenants' matches.
            GinIndex(
                fields=["tenant", "search_vector"],
                name="knowledge_chunk_tenant_fts",
                condition=Q(is_live=True),
            ),
            # Also knowledge_chunk_tenant_heading_fts, GIN (tenant, to_tsvector(context)), made
            # in migration 0003 with the exact expression the full-text query uses.
        ]

    def __str__(self) -> str:
        return f"chunk {self.pk} of document {self.document_id} v{self.version}"


class Term(models.Model):
    """A word of a tenant's indexed text (lower case, unstemmed), for typo and code lookup.

    Trigram matching against the tenant's vocabulary (thousands of short words) replaces
    trigram matching against every chunk's text, whose cost grew with the corpus. Words are
    only added: a word left over from a deleted document matches no live chunk.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    word = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "word"], name="knowledge_term_unique")
        ]
        indexes = [
            GinIndex(
                fields=["tenant", "word"],
                opclasses=["int8_ops", "gin_trgm_ops"],
                name="knowledge_term_trgm",
            ),
        ]

    def __str__(self) -> str:
        return self.word


class TenantKnowledge(models.Model):
    """A per-tenant counter bumped by every change to the tenant's documents."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="+")
    revision = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.tenant} knowledge r{self.revision}"
