import pytest

from knowledge.selectors import terms_unknown

from .conftest import upload_and_index

GUIDE = b"""# Installing Gizmo

Gizmo runs on Linux and macOS. Install it with the apt package gizmo-tools, version 2.4.

## Colors
Autosuggestions appear in gray after the cursor; press the right arrow to accept them.
"""


@pytest.fixture
def guide(tenant):
    return upload_and_index(tenant, "guide.md", GUIDE, title="Gizmo guide")


def test_words_no_document_mentions_are_unknown_in_the_order_asked(tenant, guide):
    asked = ["windows", "linux", "wsl", "2.4", "3.0", "gizmo-tools", "oh-my-gizmo"]
    assert terms_unknown(tenant=tenant, words=asked) == ["windows", "wsl", "3.0", "oh-my-gizmo"]


def test_casing_plurals_and_misspellings_of_mentioned_words_are_known(tenant, guide):
    asked = ["LINUX", "MacOS", "Autosuggestion", "autosugestions", "Linuks", "Gizmos"]
    assert terms_unknown(tenant=tenant, words=asked) == []


def test_stop_words_and_punctuation_are_never_unknown(tenant, guide):
    assert terms_unknown(tenant=tenant, words=["the", "--", "", "?!"]) == []


def test_another_tenants_documents_mention_nothing(tenant, other_tenant, guide):
    assert terms_unknown(tenant=other_tenant, words=["linux", "gizmo"]) == ["linux", "gizmo"]
