"""Re-index every ready document whose live version an older extractor made, and store the
sentence vectors of passages indexed without them."""

from django.core.management.base import BaseCommand

from knowledge import services
from knowledge.extraction import EXTRACTOR_VERSIONS


class Command(BaseCommand):
    help = "Queue re-indexing of documents extracted by an older extractor (run after upgrades)."

    def add_arguments(self, parser):
        parser.add_argument("--limit", type=int, default=10_000)

    def handle(self, *args, limit: int, **options):
        done = services.documents_reextract_outdated(limit=limit)
        self.stdout.write(
            f"{len(done)} documents queued for re-indexing (extractor versions: "
            f"{', '.join(f'{t} {v}' for t, v in EXTRACTOR_VERSIONS.items())})"
        )
        filled = services.chunks_sentence_vectors_fill(limit=10_000_000)
        self.stdout.write(f"{filled} passages given their sentence vectors")
