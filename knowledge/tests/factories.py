import hashlib
import random

import factory
from django.core.files.base import ContentFile

from knowledge import services
from knowledge.models import EMBEDDING_DIMENSIONS, Chunk, Document, DocumentVersion
from supportbot.tests.factories import TenantFactory


def random_unit_vector(rng: random.Random) -> list[float]:
    values = [rng.gauss(0, 1) for _ in range(EMBEDDING_DIMENSIONS)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def near_vector(vector: list[float], rng: random.Random, noise: float = 0.02) -> list[float]:
    """A unit vector very close to `vector` (cosine ~0.99)."""
    values = [v + rng.gauss(0, noise) for v in vector]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


class DocumentFactory(factory.django.DjangoModelFactory):
    """A ready document with a live version 1 (add chunks with ChunkFactory)."""

    class Meta:
        model = Document
        skip_postgeneration_save = True

    tenant = factory.SubFactory(TenantFactory)
    title = factory.Sequence(lambda n: f"Document {n}")
    audience = Document.Audience.PUBLIC
    version = 1
    live_version = 1
    status = Document.Status.READY

    @factory.post_generation
    def source(self, create, extracted, **kwargs):
        if not create:
            return
        data = (extracted or f"# {self.title}\n\nSome text.").encode()
        version = DocumentVersion(
            tenant=self.tenant,
            document=self,
            version=self.version,
            filename="doc.md",
            content_type="text/markdown",
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            audience=self.audience,
            segments=list(self.segments),
        )
        version.file.save("doc.md", ContentFile(data), save=False)
        version.save()


class ChunkFactory(factory.django.DjangoModelFactory):
    """A live chunk; pass `embedding` or get a random unit vector."""

    class Meta:
        model = Chunk
        skip_postgeneration_save = True

    document = factory.SubFactory(DocumentFactory)
    tenant = factory.LazyAttribute(lambda o: o.document.tenant)
    version = factory.LazyAttribute(lambda o: o.document.live_version or o.document.version)
    ordinal = factory.Sequence(lambda n: n)
    text = factory.Faker("paragraph", nb_sentences=4)
    heading_path = factory.LazyAttribute(lambda o: [o.document.title])
    context = factory.LazyAttribute(lambda o: o.document.title)
    span_start = 0
    span_end = factory.LazyAttribute(lambda o: len(o.text))
    embedding = factory.LazyFunction(lambda: random_unit_vector(random.Random()))
    audience = factory.LazyAttribute(lambda o: o.document.audience)
    segments = factory.LazyAttribute(lambda o: list(o.document.segments))
    is_live = True

    @factory.post_generation
    def terms(self, create, extracted, **kwargs):
        """Record the chunk's words in the tenant vocabulary, as indexing does."""
        if create:
            services.terms_add(chunk_ids=[self.pk])
