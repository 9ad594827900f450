"""Word alignment: swapped words the passage does not license, with the real MiniLM vectors."""

import numpy as np
import pytest

from knowledge.embeddings import EmbeddingError, embed_tokens
from verification import PassageVerifier, verify_answer
from verification.alignment import WordVectorCache, licence, variant, words_of
from verification.lexicon import are_contrasts, are_synonyms, synonyms_of

GIFT = "Refunds for orders paid by gift card go to a new gift card within 2 business days."
KLARNA = "Klarna runs a soft credit check when you choose it at checkout."
TAX = "Your refund covers the item price, including sales tax."
BOX = "Replacement parts ship in the same box as the order."
SIZE = "The warranty covers defects for 2 years, but it does not cover the wrong size."
LABEL = "You can send the item back within 30 days and we will email a prepaid label."
CART = "Choose a new size, then remove the old item from your cart."
INSPECT = "We inspect every returned item within 3 business days of its arrival."


@pytest.mark.parametrize(
    ("claim", "passage"),
    [
        (
            "Refunds for orders paid by gift card go to your credit card within 2 business days.",
            GIFT,
        ),
        ("Klarna runs a hard credit check when you choose it at checkout.", KLARNA),
        ("Your refund covers the item price, excluding sales tax.", TAX),
        ("Replacement parts ship in a separate box from the order.", BOX),
        ("The warranty covers defects for 2 years, but it does not cover the wrong color.", SIZE),
    ],
)
def test_a_swapped_word_the_passage_does_not_license_is_rejected(claim, passage):
    result = verify_answer(claim, [passage])
    assert result.supported == [], result.checks[0].reasons
    assert any("passage says" in r or "replaces" in r for r in result.checks[0].reasons)


@pytest.mark.parametrize(
    ("claim", "passage"),
    [
        ("Orders paid by gift card are refunded to a new gift card within 2 business days.", GIFT),
        ("Klarna does a soft credit check if you pick it at checkout.", KLARNA),
        ("You have 30 days to return the item, and a prepaid label is emailed to you.", LABEL),
        # fewer than half of these words are the passage's (main's lexical recall rejected them)
        ("Pick a new size and delete the previous product from the basket.", CART),
        (
            "Products may be returned for up to 30 days, and a prepaid label gets mailed to you.",
            LABEL,
        ),
        (
            "Each returned product gets examined no later than 3 business days after it arrives.",
            INSPECT,
        ),
    ],
)
def test_a_reworded_claim_whose_new_words_are_licensed_passes(claim, passage):
    result = verify_answer(claim, [passage])
    assert len(result.supported) == 1, result.checks[0].reasons


def test_without_token_vectors_a_swap_is_still_rejected_and_synonyms_still_pass():
    verifier = PassageVerifier([GIFT], token_embed=None)
    swapped, kept = verifier.check_many(
        [
            "Refunds for orders paid by gift card go to your credit card within 2 business days.",
            "Refunds for orders paid by gift card go to a new gift card within 2 business days.",
        ]
    )
    assert not swapped.supported
    assert kept.supported, kept.reasons


def test_token_vectors_cover_each_word_and_are_unit_length():
    text = "Klarna’s soft credit-check runs at checkout."
    (aligned,) = WordVectorCache(embed_tokens)([text])
    assert [w.text for w in aligned.words] == [
        "klarna's", "soft", "credit", "check", "runs", "at", "checkout",
    ]  # fmt: skip
    assert aligned.vectors.shape == (7, 384)
    assert np.allclose(np.linalg.norm(aligned.vectors, axis=1), 1.0, atol=1e-4)
    assert text[aligned.words[3].start : aligned.words[3].end] == "check"


def test_the_word_vector_cache_embeds_each_text_once():
    calls = []

    def token_embed(texts):
        calls.append(list(texts))
        return embed_tokens(texts)

    cache = WordVectorCache(token_embed, size=2)
    cache(["one sentence here", "another one"])
    cache(["one sentence here", "a third"])
    assert calls == [["one sentence here", "another one"], ["a third"]]


def test_licensed_recall_counts_forms_synonyms_and_close_vectors():
    cache = WordVectorCache(embed_tokens)
    claim, passage = cache(
        ["Pick a gift card and delete it.", "Choose a gift card, then remove it."]
    )
    result = licence(claim, passage)
    assert result.recall == 1.0
    assert result.unlicensed == []


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("deletion", "delete", True),
        ("editor", "editing", True),
        ("increasing", "incrementing", False),
    ],
)
def test_variant_accepts_inflections_not_other_words(a, b, expected):
    assert variant(a, b) is expected


def test_curated_lists_match_any_inflection():
    excludes, including, removed, deleting = words_of("excludes including removed deleting")
    assert are_contrasts(excludes, including)
    assert are_synonyms(removed, deleting)
    assert not are_contrasts(removed, deleting)
    assert "need" in synonyms_of("necessary")


def test_a_clause_of_new_content_is_rejected_even_when_most_words_match():
    passage = (
        "When your order ships from our Reno warehouse we email a tracking link, and tracking "
        "usually starts updating within 24 hours on the carrier website."
    )
    claim = (
        "When your order ships from our Reno warehouse we email a tracking link, tracking "
        "usually starts updating within 24 hours, and a driver texts you a photo of the parcel "
        "at your door."
    )
    (check,) = verify_answer(claim, [passage]).checks
    assert not check.supported
    assert check.lexical >= 0.6  # licensed recall alone would have let it through
    assert "words the passage does not license" in " ".join(check.reasons)


def _flat(texts):
    return [[1.0] + [0.0] * 383 for _ in texts]


def test_a_remote_embedding_backend_checks_word_forms_and_lists_only(settings):
    settings.KNOWLEDGE_EMBEDDINGS_BACKEND = "openai"
    with pytest.raises(EmbeddingError, match="local embedding model"):
        embed_tokens(["Token vectors need the local model."])
    verifier = PassageVerifier([KLARNA], embed=_flat)
    assert verifier.word_vectors.token_embed is None
    swapped, kept = verifier.check_many(
        [
            "Klarna runs a hard credit check when you choose it at checkout.",
            "Klarna runs a soft credit check when you select it at checkout.",
        ]
    )
    assert not swapped.supported
    assert kept.supported, kept.reasons
