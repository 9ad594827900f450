"""What the customer's own words ask the order tools for (checked before any model).

The result is one of:
- `Proposal("check_order")` — look the order up now (a read: fresh provider data each time).
  Status questions, questions about a refund ("where is my refund for A-1042?", "did you
  refund me?"), a refund request with neither an amount nor words for the whole of it
  ("refund A-1042": the bot shows the order and asks how much), and a bare order id.
- `Proposal("request_refund")` — a refund *request* with one order and one readable amount in
  the order's currency, or the whole refundable amount ("in full", "the whole amount", "what
  I paid", "all of it back", and "my money back" with no amount beside it). It only ever
  becomes a proposal card: nothing is executed until the customer confirms that exact
  proposal. Words asking for less ("half of what I paid") are never a full refund.
- `Clarify(code)` — the request is a refund request but cannot be proposed as written: two
  orders, an ambiguous or foreign-currency amount, several amounts, someone else's order.
- None — nothing for the tools (the help center answers; hypotheticals land here too).

Never a refund from: questions about a refund, negations ("don't refund…", "not yet"),
hypotheticals ("what would happen if I asked for a refund…"), words inside quotes (an
instruction the customer is quoting), sarcasm markers, or another person's order.
Amounts are read by `actions.money` (babel + number_parser), never from an order id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from actions.money import Money, Reading, read_amounts

ORDER_ID = re.compile(r"\b([A-Z]-\d{3,8})\b", re.IGNORECASE)
# Ids that are not orders: warranty claims, tickets, return authorizations.
NOT_AN_ORDER = re.compile(r"\b(claim|ticket|case|rma|reference|ref)\s*#?\s*$", re.IGNORECASE)

# What the customer paid, named as a whole: "what I paid", "everything I was charged".
_PAID = (
    r"(what|everything|all|the (full |whole |entire )?(amount|price|sum|total|money)) (that )?"
    r"(i|we) (paid|spent|was charged|were charged|got charged)"
)
# The whole of it, wanted back: "I want all of it back", "get everything I paid back".
# Only after a verb of getting: "send it all back" returns the goods, not the money.
_WHOLE = (
    r"(" + _PAID + r"|all of it|it all|everything|every (cent|penny|dollar)|all (of )?(my|the|"
    r"our) money|the (full|whole|entire) (amount|price|sum|cost)|the total)\b"
)
_WHOLE_BACK = (
    r"\b(want|get|have|need|like|give me|send me|refund me) "
    rf"(back {_WHOLE}|{_WHOLE}[^.?!]{{0,30}}?\bback\b)"
)
REFUND = re.compile(
    r"\b(refund\w*|reimburs\w*|money back|pay(ing)? me back|give me back|"
    r"return (my|the) money|charge(d)? back my|credit (it )?back|"
    r"revers\w* (the |my |this |that )?(charge|payment|transaction)|"
    r"(\d+|dollars?|bucks|euros?|pounds?|money|cash) back)\b|" + _WHOLE_BACK,
    re.IGNORECASE,
)
# Questions about a refund that may already exist: these look the order up, never refund.
REFUND_QUESTION = re.compile(
    r"\b(where('?s| is| are)? (my|the|our) (refund|money)|"
    r"(did|have|has|haven'?t|hasn'?t|didn'?t) (you|u) (already |even |yet |ever )*"
    r"(refund|reimburs|process|issue|send|sent|pay|paid)\w*|"
    r"(did|have|has|haven'?t|hasn'?t|didn'?t|was|were|is) (i|it|my \w+|the \w+) "
    r"(been |already |even |yet |ever )*(refund|reimburs|get|got|gotten|receiv)\w*|"
    r"(refund|reimbursement)'?s? (status|update|progress)|status of (my|the) (refund|money)|"
    r"(when|how (long|soon)) (will|do|does|would|can|is) (i|it|my|the|refunds?|you)\b[^.?!]*"
    r"(refund|money|back)|still waiting|track(ing)? (my|the) refund|any news|"
    r"(is|was) (my|the) (refund|money)|(received|got|seen) (my|the|a|any) (refund|money)|"
    r"(how|what) (do|does|did|is|are) (refunds?|the refund)|"
    r"why (haven'?t|hasn'?t|didn'?t|did|have|has)[^.?!]*refund|how (long|soon|quickly)\b[^.?!]*"
    r"(refund|money back)|(refund|money)[^.?!]*(arrive|show up|take|come through)|"
    r"\b(has|have|was|were|is) (my |the |your |this |that )?(refund|money|reimbursement|it)\b"
    r"[^.?!]*\b(processed|issued|sent|approved|completed|refunded|credited)\b)",
    re.IGNORECASE,
)
NEGATION = re.compile(
    r"\b(don'?t|do not|dont|doesn'?t|does not|never|no need to|without|stop|hold off( on)?|"
    r"shouldn'?t|should not|won'?t|will not|wouldn'?t)(\W+\w+){0,2}?\W+(refund|reimburs|"
    r"(my|our|the) money|money back)|"
    r"\bnot (a |any |the |to |want a |yet )?((full|whole|partial) )?(refund|reimburs)|"
    r"\bnot (asking|requesting|looking|wanting|seeking|after)\b[^.?!]*\b(refund|reimburs|"
    r"money back)|\bno refunds?\b|"
    r"\brefund\w*\b[^.?!]*\b(not yet|yet\W+i only|later)\b|"
    r"\b(cancel|withdraw|forget)\w* (the |my |that )?(refund|request)|"
    r"\b(actually|wait|on second thought|scratch that)\b[^?!]*\b(no|don'?t|never ?mind|cancel|"
    r"not)\b|\bno,? don'?t\b",
    re.IGNORECASE,
)
HYPOTHETICAL = re.compile(
    r"\b(what (would|will|could) happen|what if|what happens|if i (were to |was to )?"
    r"(ask|asked|want|wanted|request|requested|say|said|got|need|needed)|hypothetical\w*|suppos\w*|"
    r"in theory|theoretically|just curious|out of curiosity|would i (be able|get|be)|"
    r"is it possible|am i (able|eligible|allowed)|can refunds?|could refunds?|in case|"
    r"imagine|let'?s say|do you (do|offer|allow) refunds?)\b",
    re.IGNORECASE,
)
# Instructions aimed at the bot rather than a customer's ask: never a tool call.
INJECTION = re.compile(
    r"\b(ignore|disregard|forget|override) (all |any |the |your |my )?(previous |prior |above |"
    r"earlier )?(instructions|rules|prompts?|policy|policies|guidelines)\b|"
    r"^\W*(system|assistant|developer|tool)\s*:|\n\s*(system|assistant|developer|tool)\s*:|"
    r"\b(new|updated) (rule|instruction|policy)\b|\byou are now\b|\bdeveloper mode\b|"
    r"</?\s*(passages?|system|instructions?)\s*>|\bjailbreak\b",
    re.IGNORECASE,
)
SARCASM = re.compile(r"\b(yeah right|as if|lol|lmao|rofl|sure,? why not|/s)\b|/s\b", re.IGNORECASE)
THIRD_PARTY = re.compile(
    r"\b(my (friend|wife|husband|partner|boyfriend|girlfriend|brother|sister|mother|mom|mum|"
    r"father|dad|son|daughter|colleague|co-?worker|boss|neighbou?r|roommate|flatmate|cousin|"
    r"aunt|uncle|kid|child|parents?|grand\w+)'?s?|someone else'?s?|somebody else'?s?|"
    r"another (customer|person|account)'?s?|on behalf of|his order|her order|their order|"
    r"for (him|her|them)\b)",
    re.IGNORECASE,
)
# The whole refundable amount, in so many words ("in full", "the whole amount", "what I
# paid", "every penny", "all of it back"); "$5 of what I paid" is $5 (an amount wins).
FULL = re.compile(
    r"\b(full|whole|entire|complete|total) (refund|amount|price|order|sum|cost|payment)|"
    r"\bin full\b|\brefund\w*\b[^.?!]{0,30}?\b(fully|completely|entirely)\b|"
    r"(all|everything) (of )?my money back|\brefund\w* (me |us )?(everything|all of it|it all)\b|"
    r"\b(100|one hundred) ?(%|percent)|"
    r"\b" + _PAID + r"\b|\bevery (cent|penny|dollar)\b|" + _WHOLE_BACK,
    re.IGNORECASE,
)
# "My money back" for an order with no amount named: the money paid for it, so the whole
# refundable amount (the card shows the figure; nothing runs until the customer confirms).
MONEY_BACK = re.compile(
    r"\b(my|our) ((full|whole|entire) )?money back\b|\bpay(ing)? (me|us) back\b|"
    r"\bgive (me|us) back (my|our) money\b|\breturn (my|our) money\b",
    re.IGNORECASE,
)
# Less than the whole: "half of what I paid", "the full price minus shipping", "some of my
# money back". Never read as a full refund; the bot asks how much.
PARTIAL = re.compile(
    r"\b(half|halves|part|partial\w*|some|portion|most|a bit|a little|fraction|"
    r"except|minus|less|excluding|apart from|other than|but not|not (the )?(full|whole|entire|"
    r"total)|only (for|the|one|a|an))\b|\b(?!100\b)\d+ ?(%|percent\b)",
    re.IGNORECASE,
)
REQUEST = re.compile(
    r"\b(i('?d| would)? (like|want|need|wish)|i'?m (asking|requesting)|"
    r"(please|pls|plz|kindly)\b|(can|could|would|will) (you|u) (please )?|"
    r"(can|could|may) i (please )?(get|have|receive)|requesting|request(ing)? a|"
    r"give me|send me|process|issue|refund me|refund (the|my|order)|go ahead and|"
    r"i demand|i'?m owed|want (my|a|the)|get (my|a) refund|refund \$?\d|refund [A-Z]-\d)",
    re.IGNORECASE,
)
# A question, even without its question mark: "does someone have to approve it".
QUESTION_WORDS = re.compile(
    r"(^|[,;:]\s*|\b(and|but|so)\s+)(does|do|is|are|can|could|will|would|should|how|what|"
    r"why|when|where|who|which|am i|has|have)\b",
    re.IGNORECASE,
)
# Order status and whereabouts: these look the order up.
STATUS = re.compile(
    r"\b(where|status|track\w*|arriv\w*|deliver\w*|shipp?ed|dispatch\w*|when will|eta|late|"
    r"lost|(hasn'?t|not|never) moved|stuck|look (it |this )?up|check( on)?|what happened|"
    r"hasn'?t (come|arrived))\b",
    re.IGNORECASE,
)
# Text between quotes is someone else's words (a quoted instruction), not the customer's ask.
QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|«[^»]*»|(?<![\w])'[^']{3,}'(?![\w])|`[^`]*`")
REPORTED = re.compile(
    r"\b(said|says|told me|wrote|writes|texted|asked me)\b[:,]?\s*(to )?(\"|“|')?.*$", re.IGNORECASE
)
# A whole message that answers a proposal card: consent is an explicit yes ("yes please",
# "YES!", "yes, go ahead", "confirm"), never an acknowledgement ("ok", "sure", "right", "y"),
# which is what customers type after a queue or system notice too.
AFFIRM = re.compile(
    r"^\W*(yes|yep|yeah|yup|confirm(ed)?|go ahead|do it|please do|approved?|proceed)"
    r"(\W+(please|thanks|thank you|do it|go ahead|confirm|that'?s (right|correct)|it is|"
    r"correct))*\W*$",
    re.IGNORECASE,
)
# Words that acknowledge without consenting: after a card, the bot asks for an explicit yes.
ACKNOWLEDGE = re.compile(
    r"^\W*(ok(ay)?|k|sure|right|y|ya|correct|that'?s (right|correct)|sounds good|fine|"
    r"alright|all right|cool|got it)(\W+(thanks|thank you))?\W*$",
    re.IGNORECASE,
)
DECLINE = re.compile(
    r"^\W*(no|nope|nah|n|cancel( it| that| the refund)?|don'?t|do not|stop|never ?mind|"
    r"forget it|no thanks|no thank you|not now|wait)(\W+(please|thanks|thank you|"
    r"don'?t do it|cancel( it)?))*\W*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Proposal:
    tool: str
    arguments: dict[str, Any]
    source: str = "intent"
    follow_up: str | None = None  # "ask_refund_amount": show the order, ask for the amount
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Clarify:
    """A refund request the bot must ask back about (nothing is proposed)."""

    code: str  # which_order | which_amount | ambiguous_amount | foreign_currency | not_yours |
    #            amount_words
    order_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def _unquoted(text: str) -> str:
    """The customer's own words: quoted passages and reported speech removed."""
    text = QUOTED.sub(" ", text)
    return REPORTED.sub(" ", text)


def order_ids(text: str) -> list[str]:
    """Order ids named in `text` (upper case, first mention order), claims/tickets excluded."""
    found = []
    for m in ORDER_ID.finditer(text):
        if NOT_AN_ORDER.search(text[max(0, m.start() - 12) : m.start()]):
            continue
        if m.group(1).upper() not in found:
            found.append(m.group(1).upper())
    return found


def is_affirmation(text: str) -> bool:
    """An explicit yes to a proposal card (the whole message, nothing added)."""
    return isinstance(text, str) and len(text) <= 60 and bool(AFFIRM.match(text.strip()))


def is_acknowledgement(text: str) -> bool:
    """ "ok", "sure", "right", "y": heard, but not consent to a refund."""
    return isinstance(text, str) and len(text) <= 60 and bool(ACKNOWLEDGE.match(text.strip()))


def is_decline(text: str) -> bool:
    return isinstance(text, str) and len(text) <= 60 and bool(DECLINE.match(text.strip()))


# After the refund words and an injection check, the first of these that matches the
# customer's own words names the kind (the order matters: "don't refund my friend's order" is
# third_party, "what if I asked where my refund is?" is hypothetical, not a question).
_KIND_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("third_party", THIRD_PARTY),
    ("negated", NEGATION),
    ("hypothetical", HYPOTHETICAL),
    ("sarcasm", SARCASM),
    ("question", REFUND_QUESTION),
)


def refund_kind(text: str) -> str | None:
    """How `text` relates to a refund: request | question | negated | hypothetical | sarcasm |
    third_party | injection | None (no refund words in the customer's own words)."""
    own = _unquoted(text)
    if not REFUND.search(own):
        return None
    if INJECTION.search(text):  # the whole text, quoted passages included
        return "injection"
    for kind, pattern in _KIND_PATTERNS:
        if pattern.search(own):
            return kind
    return _request_or_question(own)


def _request_or_question(own: str) -> str:
    """Tell a plain refund request from a question, for words no pattern above classified."""
    if REQUEST.search(own):
        return "request"
    if "?" in own or QUESTION_WORDS.search(own):
        return "question"  # "my refund is over $50, does someone have to approve it"
    if FULL.search(own):
        return "request"  # "refund A-1042 in full, the sole came off after a week"
    if own.strip().endswith(("!", ".")) or len(own.split()) <= 12:
        return "request"  # "refund $20 for A-1042, the zipper broke"
    return "question"


def _money_arguments(money: Money) -> dict[str, Any]:
    return {"amount": float(money.amount), "currency": money.currency}


def propose_from_text(text: str, *, currency: str = "USD") -> Proposal | Clarify | None:
    """The tool call the customer's words ask for, a question back, or None.

    `currency` is the shop's currency: an amount in another one is asked back, never
    converted. Arguments are validated again by `action_propose`.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    own = _unquoted(text)
    ids = order_ids(own)
    kind = refund_kind(text)
    if kind == "request":
        return _refund_request(own, ids, currency)
    return _order_lookup(own, ids, kind)


def _refund_request(own: str, ids: list[str], currency: str) -> Proposal | Clarify | None:
    """A refund request: propose it for its one order, or ask which order (or none at all)."""
    if THIRD_PARTY.search(own):
        return Clarify("not_yours", ids[0] if ids else None)
    if len(ids) > 1:
        return Clarify("which_order", detail={"order_ids": ids})
    reading = read_amounts(own)
    whole = _whole_amount(own)
    if not ids:
        return Clarify("which_order") if reading.distinct() or whole == "full" else None
    return _refund_of_order(ids[0], reading, whole, currency)


def _whole_amount(own: str) -> str | None:
    """Whether the request is for the whole refundable amount: "full" when the words say so
    ("in full", "what I paid"), "money_back" for "my money back" (the whole amount unless a
    number stands beside it), None otherwise and whenever the words ask for less ("half of
    what I paid", "the full price minus shipping")."""
    if PARTIAL.search(own):
        return None
    if FULL.search(own):
        return "full"
    return "money_back" if MONEY_BACK.search(own) else None


def _refund_of_order(
    order_id: str, reading: Reading, whole: str | None, currency: str
) -> Proposal | Clarify:
    """A refund request for `order_id`: its one readable amount, the whole refundable amount,
    or a question back. A bare number beside "my money back" is asked about ("my money back
    for A-1042 1042"); beside "in full" it is not an amount ("refund both pairs in full")."""
    amounts = reading.distinct()
    if reading.ambiguous:
        return Clarify("ambiguous_amount", order_id, {"written": reading.ambiguous[0]})
    if len(amounts) > 1:
        return Clarify("which_amount", order_id, {"amounts": [str(m) for m in amounts]})
    if amounts:
        return _amount_refund(order_id, amounts[0], currency)
    if whole == "full" or (whole == "money_back" and not reading.bare_numbers):
        return Proposal(
            tool="request_refund",
            arguments={
                "order_id": order_id,
                "amount": "full",
                "currency": currency,
                "reason": "Customer asked for a full refund in chat.",
            },
            detail={"amount_written": "full refund"},
        )
    if reading.bare_numbers:
        return Clarify("ambiguous_amount", order_id, {"written": reading.bare_numbers[0]})
    return Proposal(
        tool="check_order", arguments={"order_id": order_id}, follow_up="ask_refund_amount"
    )


def _amount_refund(order_id: str, money: Money, currency: str) -> Proposal | Clarify:
    """The refund of `money` on `order_id`, or a question back when it is another currency."""
    if money.currency != currency:
        return Clarify(
            "foreign_currency", order_id, {"written": money.written, "currency": currency}
        )
    return Proposal(
        tool="request_refund",
        arguments={
            "order_id": order_id,
            **_money_arguments(money),
            "reason": "Customer asked for a refund in chat.",
        },
        detail={"amount_written": money.written},
    )


def _order_lookup(own: str, ids: list[str], kind: str | None) -> Proposal | Clarify | None:
    """Anything but a refund request: look its one order up, ask which order, or None."""
    if kind == "third_party":
        return Clarify("not_yours", ids[0] if ids else None) if ids else None
    if len(ids) != 1:  # none, or several: the bot asks which order (or answers from docs)
        return Clarify("which_order", detail={"order_ids": ids}) if len(ids) > 1 else None
    order_id = ids[0]
    if kind in ("question", "negated") or STATUS.search(own) or len(own.split()) <= 4:
        return Proposal(tool="check_order", arguments={"order_id": order_id})
    # A how-to question or hypothetical that merely names an order is answered from the help
    # center ("how do I return A-1042?", "what would happen if I asked for a refund on A-1042").
    return None


def amount_matches_words(amount: Any, text: str, *, currency: str = "USD") -> bool:
    """True when `amount` is exactly one of the amounts the customer wrote (whole readings)."""
    try:
        wanted = Decimal(str(amount)).quantize(Decimal("0.01"))
    except ArithmeticError:
        return False
    return any(
        m.amount == wanted and m.currency == currency
        for m in read_amounts(_unquoted(text)).distinct()
    )


def order_id_in_words(order_id: Any, text: str) -> bool:
    """True when `order_id` is one of the order ids the customer wrote (a whole token)."""
    return isinstance(order_id, str) and order_id.strip().upper() in order_ids(_unquoted(text))
