import random
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.db import connection

from knowledge import services
from knowledge.embeddings import embed_query
from knowledge.models import Document
from knowledge.selectors import (
    Audience,
    candidates,
    chunk_get_many,
    evidence_strength,
    fulltext_candidates,
    search_passages,
    trigram_candidates,
    vector_candidates,
)
from knowledge.selectors.search import STRONG_EVIDENCE
from supportbot.services import Actor

from .conftest import upload_and_index
from .factories import ChunkFactory, DocumentFactory, near_vector, random_unit_vector

PAGES = Path(__file__).resolve().parents[2] / "demo"
QUERY = "how long is the return window for tents"
LURE = "Return window for tents: tents can be returned within 30 days. Return window tents."


@pytest.fixture
def crowded(tenant, other_tenant):
    """Many near-perfect matches that the asker must never see, a few it may see.

    `other_tenant` and the restricted documents of `tenant` hold 300 chunks whose text and
    vectors match QUERY almost exactly; `tenant` has 6 public chunks that match less well.
    Filtering after a top-k scan would return nothing (or the wrong rows).
    """
    rng = random.Random(7)
    target = embed_query(QUERY)
    for i in range(20):
        doc = DocumentFactory(tenant=other_tenant, title=f"Their returns {i}")
        for _ in range(10):
            ChunkFactory(document=doc, text=LURE, embedding=near_vector(target, rng))
    for audience, segments in [("agents", []), ("segments", ["vip"])]:
        for i in range(5):
            doc = DocumentFactory(
                tenant=tenant,
                title=f"Restricted {audience} {i}",
                audience=audience,
                segments=segments,
            )
            for _ in range(10):
                ChunkFactory(document=doc, text=LURE, embedding=near_vector(target, rng))
    public = DocumentFactory(tenant=tenant, title="Our returns")
    mine = [
        ChunkFactory(
            document=public,
            text=f"Tents may be returned within the window, rule {i}.",
            embedding=near_vector(target, rng, noise=0.08),
        )
        for i in range(6)
    ]
    return {"public": {c.pk for c in mine}}


def _doc_filter(ids, **filters) -> set[int]:
    return set(Document.objects.filter(chunks__id__in=ids, **filters).values_list("pk", flat=True))


@pytest.mark.parametrize("plan", ["exact", "hnsw"])
def test_vector_search_filters_tenant_and_audience_inside_the_scan(tenant, crowded, plan):
    ranked, used = vector_candidates(
        tenant=tenant,
        embedding=embed_query(QUERY),
        audience=Audience.customer(),
        limit=5,
        plan=plan,
    )
    assert used == plan
    assert {i for i, _ in ranked} <= crowded["public"]
    assert len(ranked) == 5  # filled from the tenant's own rows, not emptied by post-filtering


def test_customer_search_never_returns_other_tenants_or_restricted_chunks(tenant, crowded):
    result = search_passages(tenant=tenant, query=QUERY, audience=Audience.customer(), limit=8)
    ids = {p.chunk_id for p in result.passages}
    assert ids
    assert ids <= crowded["public"]
    assert len(result.passages) == 6
    lexical = fulltext_candidates(tenant=tenant, query=QUERY, audience=Audience.customer())
    assert {i for i, _ in lexical} <= crowded["public"]


def test_segment_customer_sees_own_segment_but_not_agent_documents(tenant, crowded):
    result = search_passages(
        tenant=tenant, query=QUERY, audience=Audience.customer(["vip"]), limit=20
    )
    docs = Document.objects.filter(pk__in={p.document_id for p in result.passages})
    assert {d.audience for d in docs} == {"segments"}  # the 50 closest; no agent-only ones
    assert all(d.tenant == tenant for d in docs)


def test_agent_sees_restricted_documents_of_own_tenant_only(tenant, other_tenant, crowded):
    result = search_passages(tenant=tenant, query=QUERY, audience=Audience.agent(), limit=20)
    docs = Document.objects.filter(pk__in={p.document_id for p in result.passages})
    assert "agents" in {d.audience for d in docs}
    assert all(d.tenant == tenant for d in docs)
    ids = [p.chunk_id for p in result.passages]
    assert not _doc_filter(ids, tenant=other_tenant)


def test_trigram_finds_codes_written_differently(tenant):
    doc = DocumentFactory(tenant=tenant, title="Repairs")
    code = ChunkFactory(
        document=doc, text="Pole sections for the Trailhead 2 tent TR-2210 cost $12."
    )
    ChunkFactory(document=doc, text="Zipper replacement costs from $15 to $35.")
    ChunkFactory(
        document=DocumentFactory(tenant=tenant, title="Hidden", audience="agents"),
        text="Internal note about TR-2210 poles.",
    )
    ranked = trigram_candidates(tenant=tenant, terms=["TR2210"], audience=Audience.customer())
    assert [i for i, _ in ranked] == [code.pk]


def test_strength_is_strong_for_an_answerable_question_and_none_off_topic(tenant):
    upload_and_index(
        tenant,
        "returns.md",
        b"# Returns\n\n## Return window\n\nYou can return most items within 30 days of "
        b"delivery. Opened items get store credit only.\n",
    )
    upload_and_index(
        tenant, "account.md", b"# Account\n\n## Password\n\nReset links expire after 60 minutes.\n"
    )
    answerable = search_passages(
        tenant=tenant,
        query="how many days do I have to return an item",
        audience=Audience.customer(),
    )
    assert answerable.strength == "strong"
    assert answerable.passages[0].heading_path == ["Returns", "Return window"]
    assert answerable.passages[0].evidence > answerable.passages[-1].evidence
    assert set(answerable.timings_ms) >= {"embed", "plan", "lists_exact", "fetch", "total"}
    off_topic = search_passages(
        tenant=tenant, query="who won the football world cup", audience=Audience.customer()
    )
    assert off_topic.strength == "none"


@pytest.mark.parametrize(
    ("evidences", "expected"),
    [
        # a best passage that stands out, however close the runners-up of a strong best
        ([0.9, 0.88, 0.87], ("strong", False)),
        ([0.65, 0.5, 0.4], ("strong", False)),
        # three nearly equal, moderately close passages: the topic, not the answer
        ([0.62, 0.6, 0.58, 0.3], ("weak", True)),
        ([0.6, 0.59, 0.6], ("weak", True)),  # order of the passages does not matter
        # two close ones are a choice between two answers, not a spread
        ([0.62, 0.6], ("strong", False)),
        ([0.62, 0.6, 0.5], ("strong", False)),
        ([0.5, 0.49, 0.48], ("weak", False)),
        ([0.2, 0.1], ("none", False)),
        ([], ("none", False)),
    ],
)
def test_evidence_strength_is_weak_when_no_passage_stands_out(evidences, expected):
    assert evidence_strength(evidences) == expected


def test_a_question_the_page_only_touches_is_weak_and_ambiguous_one_it_answers_strong(tenant):
    """On one page of print options every passage is about printing: "a DRAFT watermark"
    (never covered) meets a dozen of them about equally; "both sides" meets its section."""
    page = PAGES / "dev_cups_help" / "pages" / "options.html"
    upload_and_index(tenant, "options.html", page.read_bytes())
    touched = search_passages(
        tenant=tenant,
        query="how do i print a DRAFT watermark across every page",
        audience=Audience.customer(),
    )
    assert (touched.strength, touched.ambiguous) == ("weak", True)
    assert max(p.evidence for p in touched.passages) >= STRONG_EVIDENCE  # strong on its own
    one = search_passages(
        tenant=tenant,
        query="how do i print a DRAFT watermark across every page",
        audience=Audience.customer(),
        limit=1,
    )  # judged on the same eight passages: a partner asking for one gets the same strength
    assert (len(one.passages), one.strength, one.ambiguous) == (1, "weak", True)
    assert one.passages[0].chunk_id == touched.passages[0].chunk_id
    answered = search_passages(
        tenant=tenant,
        query="how do i print on both sides of the paper",
        audience=Audience.customer(),
    )
    assert (answered.strength, answered.ambiguous) == ("strong", False)
    assert "sides" in answered.passages[0].text


def test_passage_url_points_to_the_public_page_and_is_empty_for_restricted(tenant, client):
    public = upload_and_index(tenant, "a.md", b"# Returns\n\nReturn within 30 days.\n")
    upload_and_index(
        tenant, "b.md", b"# Internal\n\nReturn exceptions need a lead.\n", audience="agents"
    )
    result = search_passages(tenant=tenant, query="return", audience=Audience.agent())
    urls = {p.document_id: p.url for p in result.passages}
    chunk = next(p for p in result.passages if p.document_id == public.pk)
    assert urls[public.pk] == f"/kb/{tenant.slug}/{public.pk}/v1/#chunk-{chunk.chunk_id}"
    assert [u for d, u in urls.items() if d != public.pk] == [""]
    page = client.get(urls[public.pk].split("#")[0])
    assert page.status_code == 200
    assert f'id="chunk-{chunk.chunk_id}"' in page.content.decode()


def test_restricted_and_foreign_documents_have_no_public_page(tenant, other_tenant, client):
    restricted = upload_and_index(tenant, "b.md", b"# Internal\n\nSecret.\n", audience="agents")
    assert client.get(f"/kb/{tenant.slug}/{restricted.pk}/").status_code == 404
    public = upload_and_index(tenant, "a.md", b"# Public\n\nHello.\n")
    assert client.get(f"/kb/{other_tenant.slug}/{public.pk}/").status_code == 404
    assert client.get(f"/kb/{tenant.slug}/{public.pk}/v9/").status_code == 404


def test_chunk_get_many_keeps_order_and_skips_other_tenants(tenant, other_tenant):
    mine = ChunkFactory.create_batch(3, document=DocumentFactory(tenant=tenant))
    theirs = ChunkFactory(document=DocumentFactory(tenant=other_tenant))
    ids = [mine[2].pk, theirs.pk, mine[0].pk]
    assert [p.chunk_id for p in chunk_get_many(tenant=tenant, chunk_ids=ids)] == [
        mine[2].pk,
        mine[0].pk,
    ]


def test_random_vectors_helper_is_unit_length():
    vector = random_unit_vector(random.Random(1))
    assert abs(sum(v * v for v in vector) - 1) < 1e-9


def test_fulltext_ranks_every_match_when_they_fit_the_pool(tenant):
    doc = DocumentFactory(tenant=tenant, title="Shipping")
    chunks = [
        ChunkFactory(document=doc, text=" ".join(["shipping"] * (i + 1) + ["canada"] * (i % 3)))
        for i in range(12)
    ]
    ranked = fulltext_candidates(
        tenant=tenant, query="shipping to canada", audience=Audience.customer()
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH q AS (SELECT replace(websearch_to_tsquery('english', %s)::text, ' & ', ' | ')"
            "::tsquery AS q) SELECT c.id FROM knowledge_chunk c, q WHERE c.id = ANY(%s)"
            " AND c.search_vector @@ q.q ORDER BY ts_rank_cd(c.search_vector, q.q) DESC, c.id",
            ["shipping to canada", [c.pk for c in chunks]],
        )
        everything_ranked = [row[0] for row in cursor.fetchall()]
    assert [i for i, _ in ranked] == everything_ranked


def test_fulltext_pool_keeps_all_term_matches_when_any_term_matches_too_many(tenant, monkeypatch):
    monkeypatch.setattr(candidates, "FULLTEXT_RANK_POOL", 3)
    doc = DocumentFactory(tenant=tenant, title="Notes")
    ChunkFactory.create_batch(8, document=doc, text="Shipping shipping shipping is quick.")
    both = ChunkFactory.create_batch(2, document=doc, text="Shipping to Canada takes a week.")
    ranked = fulltext_candidates(
        tenant=tenant, query="shipping canada", audience=Audience.customer()
    )
    assert len(ranked) == 3
    assert {c.pk for c in both} <= {i for i, _ in ranked}


def test_trigram_finds_misspelled_words_through_the_tenant_vocabulary(tenant, other_tenant):
    mine = ChunkFactory(
        document=DocumentFactory(tenant=tenant), text="Standard shipping takes five days."
    )
    ChunkFactory(document=DocumentFactory(tenant=tenant), text="Gift cards never expire.")
    ChunkFactory(
        document=DocumentFactory(tenant=tenant, audience="agents"),
        text="Shipping exceptions need a lead.",
    )
    ChunkFactory(document=DocumentFactory(tenant=other_tenant), text="Shipping is free.")
    ranked = trigram_candidates(tenant=tenant, terms=["shiping"], audience=Audience.customer())
    assert [i for i, _ in ranked] == [mine.pk]
    # a word full text already matches is not looked up
    assert trigram_candidates(tenant=tenant, terms=["shipping"], audience=Audience.customer()) == []


def test_hybrid_search_lists_run_as_one_statement(tenant, django_assert_max_num_queries):
    doc = DocumentFactory(tenant=tenant, title="Repairs")
    ChunkFactory(document=doc, text="Pole sections for the TR-2210 tent cost $12.")
    embed_query("how much is a TR2210 pole")  # the model loads outside the count
    # plan choice, SET LOCAL, the lists, the passages (+ savepoint and release)
    with django_assert_max_num_queries(6):
        result = search_passages(
            tenant=tenant, query="how much is a TR2210 pole", audience=Audience.customer()
        )
    assert result.passages


def test_fulltext_pool_takes_heading_matches_before_body_only_matches(tenant, monkeypatch):
    monkeypatch.setattr(candidates, "FULLTEXT_RANK_POOL", 2)
    body = DocumentFactory(tenant=tenant, title="Notes")
    ChunkFactory.create_batch(6, document=body, text="Klarna klarna klarna payments.")
    heading = DocumentFactory(tenant=tenant, title="Klarna")
    titled = ChunkFactory.create_batch(2, document=heading, text="Pay later in four parts.")
    ranked = fulltext_candidates(tenant=tenant, query="klarna refund", audience=Audience.customer())
    assert {i for i, _ in ranked} == {c.pk for c in titled}


def _long_section(topic: str, sentences: int) -> str:
    return " ".join(
        f"Sentence {i} about {topic} says something different, number {i} of the section."
        for i in range(sentences)
    )


def test_a_passage_carries_the_rest_of_its_section_up_to_the_next_chunks_end(tenant):
    body = _long_section("warranty claims", 40)
    document = upload_and_index(
        tenant,
        "warranty.md",
        f"# Warranty\n\n## Claims\n\n{body}\n\n## Repairs\n\nRepairs take a week.\n".encode(),
    )
    version = document.versions.get(version=document.version)
    chunks = list(document.chunks.filter(version=document.version).order_by("ordinal"))
    claims = [c for c in chunks if c.heading_path == ["Warranty", "Claims"]]
    assert len(claims) >= 3  # the section spans several overlapping chunks
    passages = {
        p.chunk_id: p for p in chunk_get_many(tenant=tenant, chunk_ids=[c.pk for c in chunks])
    }
    for this, following in zip(claims, claims[1:], strict=False):
        # verbatim the version's text after this chunk, to the end of the next one
        assert passages[this.pk].continuation == version.text[this.span_end : following.span_end]
    # a section's last chunk runs on into nothing: the next chunk is another section's
    assert passages[claims[-1].pk].continuation == ""
    repairs = next(c for c in chunks if c.heading_path == ["Warranty", "Repairs"])
    assert passages[repairs.pk].continuation == ""


def test_a_continuation_stays_in_its_own_version_and_document(tenant, other_tenant):
    old = upload_and_index(
        tenant, "terms.md", f"# Terms\n\n{_long_section('old terms', 40)}\n".encode()
    )
    old_chunks = list(old.chunks.filter(version=old.version).values_list("pk", flat=True))
    services.document_replace_file(
        tenant=tenant,
        document_id=old.pk,
        file=ContentFile(f"# Terms\n\n{_long_section('new terms', 40)}\n".encode(), "terms.md"),
        actor=Actor.system("test"),
    )
    services.document_index(document_id=old.pk, version=old.version + 1)
    upload_and_index(
        other_tenant, "theirs.md", f"# Terms\n\n{_long_section('old terms', 40)}\n".encode()
    )
    # answers that cited the superseded version still read its own text
    cited = chunk_get_many(tenant=tenant, chunk_ids=old_chunks)
    assert [p.continuation != "" for p in cited] == [True] * (len(cited) - 1) + [False]
    assert all("new terms" not in p.continuation for p in cited)
    live = search_passages(tenant=tenant, query="new terms sentence", audience=Audience.customer())
    assert live.passages
    assert all("old terms" not in p.continuation for p in live.passages)


def test_chunks_that_do_not_overlap_are_joined_by_a_block_break(tenant):
    # paragraphs longer than the overlap budget: the next chunk starts after a gap
    paragraphs = "\n\n".join(_long_section(f"topic {i}", 4) for i in range(12))
    document = upload_and_index(tenant, "guide.md", f"# Guide\n\n{paragraphs}\n".encode())
    version = document.versions.get(version=document.version)
    chunks = list(document.chunks.filter(version=document.version).order_by("ordinal"))
    passages = {
        p.chunk_id: p for p in chunk_get_many(tenant=tenant, chunk_ids=[c.pk for c in chunks])
    }
    gaps = [(a, b) for a, b in zip(chunks, chunks[1:], strict=False) if b.span_start >= a.span_end]
    assert gaps
    for this, following in gaps:
        assert version.text[this.span_end : following.span_start].strip() == ""
        assert passages[this.pk].continuation == "\n\n" + following.text


def test_evidence_counts_question_words_whose_stem_would_stem_again(tenant):
    # "database" stems to "databas", which stemmed again is "databa": comparing the question's
    # stems by stemming them once more left such words uncovered in every passage.
    query = "database releases license please"
    doc = DocumentFactory(tenant=tenant, title="Notes")
    chunk = ChunkFactory(
        document=doc,
        text="Each database release ships its license; please read it.",
        embedding=embed_query(query),
    )
    result = search_passages(tenant=tenant, query=query, audience=Audience.customer())
    assert [p.chunk_id for p in result.passages] == [chunk.pk]
    assert result.passages[0].evidence == 1.0  # cosine 1 and all four words found


def test_evidence_reads_question_words_with_quotes_and_backslashes(tenant):
    doc = DocumentFactory(tenant=tenant, title="Paths")
    ChunkFactory(document=doc, text=r"O'Neil keeps files in C:\temp\o'neil and D:\\share.")
    result = search_passages(
        tenant=tenant,
        query=r"where does o'neil keep C:\temp\o'neil files",
        audience=Audience.customer(),
    )
    assert result.passages
    assert 0 < result.passages[0].evidence <= 1
