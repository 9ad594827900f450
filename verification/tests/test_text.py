import pytest

from verification.text import content_words, split_sentences, stem


@pytest.mark.parametrize(
    ("asked", "written"),
    [
        ("when do results expire", "Results expires after one day"),
        ("when do results expire", "Every stored result expired after a day"),
        ("can i change the address", "Addresses can be changed until the parcel ships"),
        ("how do i delete my account", "Deleting an account removes its orders"),
        ("which policies apply", "The policy applies to every order"),
    ],
)
def test_a_customers_word_meets_the_pages_inflection_of_it(asked, written):
    shared = content_words(asked) & content_words(written)
    assert len(shared) >= 2, shared


@pytest.mark.parametrize("word", ["a-1042", "w-20931", "v2.3", "30", "café", "don't", ""])
def test_codes_numbers_and_foreign_words_stem_to_themselves(word):
    assert stem(word) == word


def test_a_megabyte_word_stems_without_error():
    word = "x" * 1_000_000
    assert stem(word) == word


def test_verbatim_sentences_leave_a_footnote_mark_where_the_source_has_it():
    text = "Other methods are also supported. [6]\n\nTo control the order, use targets."
    assert split_sentences(text) == [
        "Other methods are also supported [6].",
        "To control the order, use targets.",
    ]
    assert split_sentences(text, verbatim=True) == [
        "Other methods are also supported. [6]",
        "To control the order, use targets.",
    ]
    assert split_sentences(None, verbatim=True) == []
