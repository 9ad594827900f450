"""Fact-level checks: each kind of changed fact is caught, its faithful rewording is not."""

import pytest

from verification.facts import (
    clauses,
    condition_reasons,
    fact_reasons,
    name_reasons,
    negation_reasons,
    number_reasons,
    quantities,
    scope_reasons,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("within 30 days of delivery", {("30", "day")}),
        ("a 30-day window", {("30", "day")}),
        ("Cancel within an hour", {("1", "hour")}),
        ("Five failed sign-ins", {("5", None)}),
        ("$1,000 and $6.95", {("1000", None), ("6.95", None)}),
        ("twice per item", {("2", "time")}),
        ("one of the 50 US states", {("50", None)}),
        ("$49 a year", {("49", "year"), ("1", "year")}),
    ],
)
def test_quantities_read_digits_number_words_and_units(text, expected):
    assert quantities(text) == expected


SUPPORT = "If you cancel an order within 1 hour of placing it, we don't charge your card at all."


@pytest.mark.parametrize(
    ("check", "claim", "support"),
    [
        (number_reasons, "Cancel within a day of ordering.", SUPPORT),
        (number_reasons, "Three failed sign-ins lock it.", "After 5 failed sign-in attempts."),
        (number_reasons, "Refunds take 5-10 calendar weeks.", "Refunds take 5-10 business days."),
        (
            negation_reasons,
            "Gift cards expire and have no fees.",
            "Gift cards never expire and have no fees.",
        ),
        (negation_reasons, "Other countries are served.", "We don't ship to other countries yet."),
        (scope_reasons, "Every product can be returned.", "You can return most items."),
        (scope_reasons, "We always refund it.", "We may refund you without asking."),
        (
            scope_reasons,
            "Bugfix releases contain fixes for problems.",
            "Bugfix releases contain only fixes for problems.",
        ),
        (
            condition_reasons,
            "Orders placed after noon ship today.",
            "Orders placed before noon ship today.",
        ),
        (
            condition_reasons,
            "Python raises TabError in trailing whitespace.",
            "Python raises TabError in leading whitespace.",
        ),
        (condition_reasons, "It returns a sorted copy.", "list.sort() sorts the list in-place."),
        (name_reasons, "Show the QR code at a FedEx Office.", "Show the QR code at any UPS Store."),
        (
            name_reasons,
            "Each bugfix release increases B.",
            "C is incremented for each bugfix release.",
        ),
        (
            name_reasons,
            "Delete it with os.mkdir() and create one with os.rmdir().",
            "To remove a directory, use os.rmdir(); use os.mkdir() to create one.",
        ),
    ],
)
def test_each_kind_of_changed_fact_is_caught(check, claim, support):
    assert check(claim, support)


@pytest.mark.parametrize(
    ("claim", "support"),
    [
        ("Cancel within an hour of ordering and your card is never charged.", SUPPORT),
        (
            "Acme gift cards don't expire and come without fees.",
            "Acme gift cards never expire and have no fees.",
        ),
        (
            "Every thread is killed the moment the main thread exits.",
            "As soon as the main thread exits, all threads are killed.",
        ),
        ("The PSF owns the copyright.", "The Python Software Foundation holds the copyright."),
        ("The widget lacks keyboard focus.", "The widget doesn't have keyboard focus."),
        (
            "You delete a directory with os.rmdir() and make one with os.mkdir().",
            "To remove a directory, use os.rmdir(); use os.mkdir() to create one.",
        ),
        (
            "Each order takes just one promo code.",
            "Only one promo code can be used per order, and it must be entered first; "
            "we can't add a code afterwards.",
        ),
    ],
)
def test_faithful_rewordings_keep_their_facts(claim, support):
    assert fact_reasons(claim, support) == []


@pytest.mark.parametrize(
    "text",
    ["", "   ", "\x00\x01\ufffd", "$$$ ,,, ;;;", "1" * 500, "ÄÖÜ naïve café — “quoted”"],
)
def test_odd_bytes_and_empty_text_never_crash(text):
    assert isinstance(fact_reasons(text, "Refunds take 5-10 business days."), list)
    assert isinstance(fact_reasons("Refunds take 5-10 business days.", text), list)
    assert isinstance(clauses(text), list)


@pytest.mark.parametrize(
    ("check", "claim", "support"),
    [
        (name_reasons, "signal provides a register function.", "The atexit module provides one."),
        (name_reasons, "Load it with the json module.", "Load it with the pickle module."),
        (condition_reasons, "Then i % j is at least 0.", "When j is negative, i % j is <= 0."),
        (condition_reasons, "The price excludes sales tax.", "The price includes sales tax."),
        (
            negation_reasons,
            "Readers of the forum still need to join the mailing list.",
            "Readers of the forum find it unnecessary to join the mailing list.",
        ),
    ],
)
def test_changed_facts_in_other_forms_are_caught(check, claim, support):
    assert check(claim, support)


@pytest.mark.parametrize(
    ("claim", "support"),
    [
        ("A list is an array rather than a linked list.", "Lists are arrays, not linked lists."),
        (
            "Readers of the forum don't need to join the mailing list.",
            "Readers of the forum find it unnecessary to join the mailing list.",
        ),
        ("We keep just the card brand.", "We only keep the card brand."),
        (
            "Remove the app and the plugin stops working.",
            "Remove the app and the plugin no longer works.",
        ),
        (
            "The search path differs from the one Windows uses.",
            "The search path is not the same as the one Windows uses.",
        ),
        (
            "Static objects with constructors are a bad idea.",
            "Static objects with constructors are not a good idea.",
        ),
        ("Every package gets a tracking link.", "Each package gets its own tracking link."),
        ("The reset code works a single time.", "The reset code works once."),
        ("Then i % j is at most 0.", "When j is negative, i % j is <= 0."),
        (
            "Shipping stays free if what you keep is under $50.",
            "Orders over $50 ship free, even if what you keep is below $50.",
        ),
    ],
)
def test_faithful_rewordings_in_other_forms_keep_their_facts(claim, support):
    assert fact_reasons(claim, support) == []
