import sys
import threading

import pytest
import snowballstemmer

from knowledge import text as text_module
from knowledge.text import content_words, split_sentences, stem


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


def test_a_megabyte_word_stems_to_itself_and_stays_out_of_the_cache():
    before = text_module._stem_cached.cache_info().currsize
    for n in range(20):
        word = f"{n}" + "x" * 1_000_000 + "ing"
        assert stem(word) == word
    assert text_module._stem_cached.cache_info().currsize == before


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


def test_words_stemmed_on_many_threads_at_once_get_the_stems_of_one_thread():
    """Turns stem on several threads at once; a shared stemmer mixed their words up (wrong
    stems, IndexError, AssertionError: a turn failed with `internal`)."""
    bases = ["shipping", "refunded", "expires", "deliveries", "cancellations", "happily"]
    words = [f"{base}{'x' * (n % 7)}{n}" for n in range(3000) for base in bases[n % 6 : n % 6 + 1]]
    reference = snowballstemmer.stemmer("english")
    expected = {w: reference.stemWord(w) for w in words}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    text_module._stem_cached.cache_clear()
    failures: list = []
    gate = threading.Barrier(8)

    def stem_all(offset: int) -> None:
        gate.wait()
        for w in words[offset::8]:
            try:
                got = stem(w)
            except Exception as exc:  # noqa: BLE001 - any crash is the failure shown
                failures.append((w, repr(exc)))
            else:
                if got != expected[w]:
                    failures.append((w, got))

    try:
        threads = [threading.Thread(target=stem_all, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
        text_module._stem_cached.cache_clear()
    assert failures == []
