"""Amounts of money in a customer's own words.

Numbers are read with maintained parsers — number words through `number_parser` ("twelve
dollars" → "12 dollars"), digits through babel's strict locale-aware `parse_decimal` — and
only where a currency symbol, code or word stands next to them. Order ids are removed before
anything is read, so the digits of `A-1042` are never an amount.

Nothing is guessed: a figure whose reading depends on the locale ("1.000", "1,5" next to a
dollar sign), has more than two decimals, or carries a suffix we do not understand ("$1k") is
reported as ambiguous, and an amount in another currency as foreign, so the bot asks back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from babel.numbers import NumberFormatError, parse_decimal
from number_parser import parse as words_to_digits

# Currency symbols and words (lower case) → ISO code.
SYMBOLS = {"$": "USD", "us$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "c$": "CAD"}
CODES = {"usd", "eur", "gbp", "jpy", "cad", "aud", "chf"}
WORDS = {
    "dollar": "USD",
    "dollars": "USD",
    "buck": "USD",
    "bucks": "USD",
    "euro": "EUR",
    "euros": "EUR",
    "pound": "GBP",
    "pounds": "GBP",
    "quid": "GBP",
    "yen": "JPY",
}
CENT_WORDS = {"cent", "cents"}
# Which locale's number format a currency's amounts are written in by default.
LOCALE_FOR = {"USD": "en_US", "GBP": "en_GB", "CAD": "en_CA", "AUD": "en_AU", "JPY": "ja_JP"}

# Tokenizer only (the value is parsed by babel): a run of digits with separators, a currency
# symbol, or a word. It splits "$1,000.00" into "$" and "1,000.00".
_TOKEN = re.compile(r"(?:us|c)?\$|[€£¥]|\d[\d.,]*\d|\d|[A-Za-z]+|\S", re.IGNORECASE)
_ORDER_ID = re.compile(r"\b[A-Z]-\d{3,8}\b", re.IGNORECASE)
# Suffixes that make a figure unreadable ("$1k", "3 mil"): reported as ambiguous.
SUFFIXES = ("k", "m", "mil", "grand")
_SUFFIXED = re.compile(r"(\d[\d.,]*\s*(?:" + "|".join(SUFFIXES) + r")\b)", re.IGNORECASE)


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str
    written: str  # the span as the customer wrote it (after number words became digits)

    def __str__(self) -> str:
        symbol = {"USD": "$", "EUR": "€", "GBP": "£"}.get(self.currency)
        return f"{symbol}{self.amount:,.2f}" if symbol else f"{self.amount:,.2f} {self.currency}"


@dataclass
class Reading:
    """Every amount found in a text: readable ones, ambiguous spans, bare numbers."""

    amounts: list[Money] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)
    bare_numbers: list[str] = field(default_factory=list)

    def distinct(self) -> list[Money]:
        seen: dict[tuple[Decimal, str], Money] = {}
        for money in self.amounts:
            seen.setdefault((money.amount, money.currency), money)
        return list(seen.values())


def _currency_of(token: str) -> str | None:
    low = token.lower()
    if low in SYMBOLS:
        return SYMBOLS[low]
    if low in CODES:
        return low.upper()
    return WORDS.get(low)


def _read_number(raw: str, currency: str) -> Decimal | None:
    """The value of `raw` in `currency`'s usual format, or None when it is ambiguous.

    babel's strict parsing refuses a separator in the wrong place for the locale ("1,5" next
    to a dollar sign, "1.5" next to a euro sign), and a figure with more than two decimals is
    refused here: that also covers "1.000" or "12.500" next to a dollar sign (a European
    thousands group, or a decimal?)."""
    locale = LOCALE_FOR.get(currency, "de_DE")
    try:
        value = parse_decimal(raw, locale=locale, strict=True)
    except NumberFormatError:
        return None
    if value.as_tuple().exponent < -2:
        return None
    return value


def read_amounts(text: str) -> Reading:
    """Find the amounts of money in `text` (order ids removed first)."""
    reading = Reading()
    if not isinstance(text, str) or not text:
        return reading
    tokens = _TOKEN.findall(_with_digits(text))
    for i, token in enumerate(tokens):
        if token[0].isdigit():
            before = tokens[i - 1] if i > 0 else ""
            after = tokens[i + 1] if i + 1 < len(tokens) else ""
            _read_figure(reading, token, before, after)
    return reading


def _with_digits(text: str) -> str:
    """`text` without its order ids, number words written as digits where the parser can.

    A figure with a suffix ("3 mil", "2 grand") is kept as written: the parser would turn
    "mil" into 1000 and "£3 mil" would read as £3."""
    parts = _SUFFIXED.split(_ORDER_ID.sub(" ", text))
    try:
        return "".join(p if n % 2 else _words_to_digits(p) for n, p in enumerate(parts))
    except Exception:  # noqa: BLE001 - the parser's own edge cases: read the digits only
        return "".join(parts)


def _words_to_digits(part: str) -> str:
    """Number words as digits, the part's outer spaces kept (the parser strips them, which
    glued "1k" to the next word: "$1k or ten" read as $1)."""
    core = part.strip()
    if not core:
        return part
    start = part.index(core[0])
    return part[:start] + words_to_digits(core) + part[start + len(core) :]


def _currency_next_to(token: str, before: str, after: str) -> tuple[str | None, str]:
    """The currency written next to the figure `token` ("USD-cents" for "50 cents"; None when
    there is none) and the span as written."""
    # A symbol or code before the figure ("$20", "USD 20"), else a word after ("20 bucks").
    leading = before.lower() in SYMBOLS or before.lower() in CODES
    currency = _currency_of(before) if leading else None
    written = f"{before}{token}" if currency else token
    if currency is None and after:
        currency = _currency_of(after)
        written = f"{token} {after}"
        if after.lower() in CENT_WORDS:
            currency, written = "USD-cents", f"{token} {after}"
    return currency, written


def _money_of(token: str, currency: str, written: str) -> Money | None:
    """The figure `token` as money in `currency` (cents become dollars), or None if ambiguous."""
    if currency == "USD-cents":
        value = _read_number(token, "USD")
        if value is None or value != value.to_integral_value():
            return None
        return Money((value / 100).quantize(Decimal("0.01")), "USD", written)
    value = _read_number(token, currency)
    if value is None:
        return None
    return Money(value.quantize(Decimal("0.01")), currency, written)


def _read_figure(reading: Reading, token: str, before: str, after: str) -> None:
    """Add the figure `token`, between the tokens `before` and `after`, to `reading`: an
    amount, an ambiguous span, or a bare number (no currency next to it)."""
    currency, written = _currency_next_to(token, before, after)
    if currency is None:
        reading.bare_numbers.append(token)
        return
    # A letter glued to the figure ("$1k", "20usd" is split already) makes it unreadable.
    if after and after.isalpha() and after.lower() in SUFFIXES:
        reading.ambiguous.append(f"{written} {after}")
        return
    money = _money_of(token, currency, written)
    if money is None:
        reading.ambiguous.append(written)
    else:
        reading.amounts.append(money)
