"""Answer verification: every sentence must be supported by a passage that was retrieved.

A sentence (a claim) is supported when one sentence of a retrieved passage
- holds most of the claim's content words (lexical recall),
- means nearly the same (embedding cosine),
- states every number and every policy term of the claim exactly, and
- has the same polarity (the claim adds or drops no negation).
The unit of support is one passage sentence, so a claim cannot stitch "opened items" from one
sentence to "full refund" from another.
Unsupported sentences are dropped; the caller falls back to an extractive answer when too
little survives. Citations are only ever to retrieved passages. A sentence that repeats four
consecutive words of the model's instructions which no passage holds is dropped as well
(`EchoGate`): the prompt is never part of an answer.
"""

from knowledge.text import (
    NEGATIONS,
    POLICY_TERMS,
    STOPWORDS,
    cited_indexes,
    content_words,
    has_negation,
    numbers,
    policy_terms,
    split_sentences,
    strip_citations,
)
from verification.quotes import (
    ECHO_WORDS,
    ELLIPSIS,
    RELEVANCE_RATIO,
    EchoGate,
    RelevanceGate,
    best_sentences,
    join_quote,
    quote_is_verbatim,
)
from verification.verifier import (
    EMBED_MIN,
    LEXICAL_MIN,
    MIN_CLAIM_WORDS,
    SUPPORT_SENTENCES,
    PassageVerifier,
    SentenceCheck,
    Verification,
    verify_answer,
)

__all__ = [
    "ECHO_WORDS",
    "ELLIPSIS",
    "EMBED_MIN",
    "LEXICAL_MIN",
    "MIN_CLAIM_WORDS",
    "NEGATIONS",
    "POLICY_TERMS",
    "RELEVANCE_RATIO",
    "STOPWORDS",
    "SUPPORT_SENTENCES",
    "EchoGate",
    "PassageVerifier",
    "RelevanceGate",
    "SentenceCheck",
    "Verification",
    "best_sentences",
    "cited_indexes",
    "content_words",
    "has_negation",
    "join_quote",
    "numbers",
    "policy_terms",
    "quote_is_verbatim",
    "split_sentences",
    "strip_citations",
    "verify_answer",
]
