"""Amounts of money read from a customer's words: what is read, what is ambiguous (the bot
asks back), what is a bare number. Each row pins the amount, the currency and the span."""

from decimal import Decimal

import pytest

from actions import money
from actions.money import Money, read_amounts

CASES = [
    # (text, [(amount, currency, written)], ambiguous, bare numbers)
    ("$12.50", [("12.50", "USD", "$12.50")], [], []),
    ("$1,500", [("1500.00", "USD", "$1,500")], [], []),
    ("$1,500.25", [("1500.25", "USD", "$1,500.25")], [], []),
    ("£12.50", [("12.50", "GBP", "£12.50")], [], []),
    ("C$ 15", [("15.00", "CAD", "C$15")], [], []),
    ("¥1,000", [("1000.00", "JPY", "¥1,000")], [], []),
    # amounts in euro and other currencies are read in the German format by default
    ("€1.000,50 please", [("1000.50", "EUR", "€1.000,50")], [], []),
    ("CHF 1.234,5", [("1234.50", "CHF", "CHF1.234,5")], [], []),
    # codes in any case, before or after the figure; words after it
    ("usd 20", [("20.00", "USD", "usd20")], [], []),
    ("20 USD", [("20.00", "USD", "20 USD")], [], []),
    ("I paid 20 bucks", [("20.00", "USD", "20 bucks")], [], []),
    ("30 QUID", [("30.00", "GBP", "30 QUID")], [], []),
    ("twelve dollars", [("12.00", "USD", "12 dollars")], [], []),
    ("order 5 items for twenty dollars", [("20.00", "USD", "20 dollars")], [], ["5"]),
    # cents become dollars; a fraction of a cent is not money
    ("50 cents", [("0.50", "USD", "50 cents")], [], []),
    ("150 CENTS", [("1.50", "USD", "150 CENTS")], [], []),
    ("12.5 cents", [], ["12.5 cents"], []),
    ("1,500 cents", [("15.00", "USD", "1,500 cents")], [], []),
    # locale-dependent figures next to a dollar sign, more than two decimals: ambiguous
    ("$1.000", [], ["$1.000"], []),
    ("$1,5", [], ["$1,5"], []),
    ("$ 40.123", [], ["$40.123"], []),
    ("€12,345", [], ["€12,345"], []),
    ("€1.5", [], ["€1.5"], []),
    ("$12.500", [], ["$12.500"], []),
    # suffixes nobody should guess at
    ("$1k", [], ["$1 k"], []),
    ("$2 grand", [], ["$2 grand"], []),
    ("£3 mil", [], ["£3 mil"], []),
    ("€4 M", [], ["€4 M"], []),
    ("$1k or twelve dollars", [("12.00", "USD", "12 dollars")], ["$1 k"], []),
    # order ids are never amounts; a currency far from a figure does not make it money
    ("order A-1042 for $30", [("30.00", "USD", "$30")], [], []),
    ("5 items, refund in $", [], [], ["5"]),
    ("paid in euros 20 times", [], [], ["20"]),
    ("20", [], [], ["20"]),
    ("$", [], [], []),
]


@pytest.mark.parametrize(("text", "amounts", "ambiguous", "bare"), CASES)
def test_amounts_are_read_with_their_currency_and_span(text, amounts, ambiguous, bare):
    reading = read_amounts(text)
    assert [(str(m.amount), m.currency, m.written) for m in reading.amounts] == amounts
    assert reading.ambiguous == ambiguous
    assert reading.bare_numbers == bare


@pytest.mark.parametrize("text", [None, "", 42, ["$20"]])
def test_anything_but_text_reads_as_nothing(text):
    reading = read_amounts(text)
    assert (reading.amounts, reading.ambiguous, reading.bare_numbers) == ([], [], [])


def test_a_number_word_parser_failure_still_reads_the_digits(monkeypatch):
    def broken(text):
        raise ValueError("the parser's own edge case")

    monkeypatch.setattr(money, "words_to_digits", broken)
    reading = read_amounts("$1k and $20")
    assert [(str(m.amount), m.currency) for m in reading.amounts] == [("20.00", "USD")]
    assert reading.ambiguous == ["$1 k"]


def test_distinct_keeps_one_amount_per_value_and_currency():
    reading = read_amounts("refund $20 and $20 and €20")
    assert len(reading.amounts) == 3
    assert [(m.amount, m.currency) for m in reading.distinct()] == [
        (Decimal("20.00"), "USD"),
        (Decimal("20.00"), "EUR"),
    ]


def test_money_is_shown_with_its_symbol_or_its_code():
    assert str(Money(Decimal("1500.25"), "USD", "")) == "$1,500.25"
    assert str(Money(Decimal("3"), "EUR", "")) == "€3.00"
    assert str(Money(Decimal("12.5"), "GBP", "")) == "£12.50"
    assert str(Money(Decimal("1234.5"), "CHF", "")) == "1,234.50 CHF"
