"""Fact-level checks of a claim against the passage sentence that is meant to support it
(names and identifiers: `verification.names`).

Each check looks for one way a fluent paraphrase changes a fact while keeping nearly every
word: a number or its unit, a negation, a condition or comparison turned round, a name, or a
quantifier that widens or narrows the scope. A check returns the reasons it found (empty when
the claim keeps the fact). They are deliberately one-sided where a paraphrase may be less
specific than its source (dropping a number is not a changed fact; adding one is).
"""

from __future__ import annotations

import re
from functools import lru_cache

from knowledge.text import content_words, words
from verification.lexicon import contrasts, root, synonyms_of
from verification.names import name_reasons

# --------------------------------------------------------------------------- numbers


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "ninety": 90, "hundred": 100,
    "single": 1, "twice": 2, "thrice": 3, "half": 0.5,
}  # fmt: skip
_UNITS = {
    "second": "second", "minute": "minute", "min": "minute", "hour": "hour", "hr": "hour",
    "day": "day", "week": "week", "month": "month", "year": "year", "decade": "decade",
    "noon": "hour", "pm": "hour", "am": "hour", "percent": "percent", "%": "percent",
    "byte": "byte", "bit": "bit", "digit": "digit", "space": "space", "time": "time",
}  # fmt: skip
_NUMBER_TOKEN = re.compile(r"\$?\d[\d,]*(?:\.\d+)?%?|[A-Za-z]+(?:-[A-Za-z]+)?|%", re.UNICODE)
_SINGULAR = ("a", "an", "per", "every", "each", "once")
_NOT_A_NUMBER_AFTER_ONE = frozenset({"of", "and", "another", "or", "way"})


def _unit(token: str) -> str | None:
    token = token.lower().rstrip("s") if len(token) > 3 else token.lower()
    return _UNITS.get(token)


def _value(token: str) -> str | None:
    low = token.lower()
    if low in _NUMBER_WORDS:
        value = _NUMBER_WORDS[low]
        return str(int(value)) if float(value).is_integer() else str(value)
    match = re.fullmatch(r"\$?(\d[\d,]*(?:\.\d+)?)%?", token)
    if match is None:
        return None
    digits = match.group(1).replace(",", "")
    return digits.rstrip("0").rstrip(".") if "." in digits else digits


_ONE_TIME = re.compile(r"\b(?:a single|one) time\b", re.I)  # "used one time" = "used once"


def quantities(text: str) -> set[tuple[str, str | None]]:
    """(value, unit) pairs: "30 days" -> ("30", "day"), "a year" -> ("1", "year"), "$6.95"."""
    text = text.replace("’", "'").replace("–", "-").replace("noon", "12 pm")
    text = _ONE_TIME.sub("once", text)
    tokens = _NUMBER_TOKEN.findall(re.sub(r"(\d)-(?=[a-z])", r"\1 ", text))
    found: set[tuple[str, str | None]] = set()
    for i, token in enumerate(tokens):
        value = _value(token)
        following = tokens[i + 1 : i + 3]
        if value is None and token.lower() in _SINGULAR and following:
            if _unit(following[0]):  # "a year", "per month", "every week", "once a day"
                found.add(("1", _unit(following[0])))
            continue
        if value is None:
            continue
        if token.lower() == "once":
            continue
        if token.lower() == "one" and following and following[0].lower() in _NOT_A_NUMBER_AFTER_ONE:
            continue  # "one of the", "one and the same", "one another"
        unit = next((_unit(t) for t in following if _unit(t)), None)
        if unit is None and token.lower() in ("twice", "thrice"):
            unit = "time"
        found.add((value, unit))
    return found


def number_reasons(claim: str, support: str) -> list[str]:
    """Every number of the claim, with its unit when it has one, must be in the support."""
    have = quantities(support)
    values = {v for v, _ in have}
    units: dict[str, set[str | None]] = {}
    for v, u in have:
        units.setdefault(v, set()).add(u)
    reasons = []
    mine = sorted(quantities(claim), key=str)
    missing = sorted({value for value, _ in mine if value not in values})
    if missing:
        reasons.append(f"numbers not in passage: {missing}")
    for value, unit in mine:
        if value not in values:
            continue
        if unit and (value, unit) not in have and None not in units.get(value, set()):
            reasons.append(f"unit differs: {value} {unit}")
    return reasons


# --------------------------------------------------------------------------- negation

NEGATION_CUES = _set(
    """not no never cannot can't won't don't doesn't didn't isn't aren't wasn't weren't
    shouldn't couldn't wouldn't mustn't hasn't haven't hadn't without nor none neither nothing
    nobody nowhere lacks lack lacking unable fails fail"""
)
_CLAUSE_RE = re.compile(
    r"\s*(?:[;:()\u2014]|,\s*(?:and|but|or|so|as|because|though|although|while|which|whereas)\b"
    r"|\b(?:but|because|although|though|whereas|while)\b)\s*",
    re.I,
)


def clauses(text: str) -> list[str]:
    """Split a sentence into rough clauses (at ; : — and clause-joining conjunctions)."""
    return [c for c in (p.strip(" ,.") for p in _CLAUSE_RE.split(text)) if c]


# Phrases with a negation word that state no negation: a bound ("no more than"), a price
# ("no charge" = free); hyphenated compounds count once, as negative when they open with non-,
# not- or un- ("non-profit", "not-for-profit" vs "for-profit").
_NOT_NEGATIONS = re.compile(
    r"\bno (?:more|later|less|fewer|earlier) than\b|\b(?:at )?no (?:extra )?(?:charge|cost)\b"
    r"|\b(?:pay|pays|costs?) nothing\b|\bnothing to pay\b"
)
# "an array rather than a linked list" says "an array, not a linked list".
# "stops working" says "no longer works"; "differs from" says "is not the same as".
_NEGATING_PHRASES = re.compile(
    r"\b(?:rather than|instead of|(?:stops?|stopped|ceases?) (?:to )?\w+ing|differs? from)\b"
)
_COMPOUND = re.compile(r"\b[a-z]+(?:-[a-z]+)+\b")


def _compounds_marked(text: str) -> str:
    def mark(match: re.Match) -> str:
        negative = re.match(r"(?:non|not|un)-", match.group(0))
        return " not " if negative else " "

    return _COMPOUND.sub(mark, text)


def _prefix_negations(text: str, other: str) -> str:
    """ "unsafe" -> "not safe" when the other text says "safe" (likewise im-, in-, non); an un-
    word also when the other text says a synonym ("unnecessary" against "need")."""
    other_words = set(words(other))
    other_roots = {root(w) for w in other_words}

    def said(prefix: str, word: str) -> bool:
        # "unnecessary" against "need" (un- only: "incoming" is no "not coming")
        return word in other_words or (prefix == "un" and bool(synonyms_of(word) & other_roots))

    def expand(match: re.Match) -> str:
        prefix, word = match.group(1), match.group(2)
        return f"not {word}" if said(prefix, word) else match.group(0)

    return re.sub(r"\b(un|im|in|non)([a-z]{4,})\b", expand, text)


def negations(text: str, other: str = "") -> int:
    """Negations in the text (other: the text it is compared with, for un-/im- words)."""
    low = text.lower().replace("’", "'")
    low = _compounds_marked(_NOT_NEGATIONS.sub(" ", low))
    if other:
        low = _prefix_negations(low, other.lower())
    low = _NEGATING_PHRASES.sub(" not ", low)
    return sum(1 for w in words(low) if w in NEGATION_CUES or w.endswith("n't"))


def _aligned_clause(claim_clause: str, support_clauses: list[str]) -> str | None:
    words_c = content_words(claim_clause)
    if len(words_c) < 2:
        return None
    best, best_overlap = None, 0.0
    for clause in support_clauses:
        overlap = len(words_c & content_words(clause)) / len(words_c)
        if overlap > best_overlap:
            best, best_overlap = clause, overlap
    return best if best_overlap >= 0.4 else None


def _alignment(claim: str, support: str) -> list[tuple[str, str]]:
    """(claim part, support clause) pairs: the claim's clauses grouped by the support clause
    each restates (a list split over two claim clauses is one part)."""
    support_clauses = clauses(support)
    grouped: dict[str, list[str]] = {}
    for clause in clauses(claim):
        aligned = _aligned_clause(clause, support_clauses)
        if aligned is not None:
            grouped.setdefault(aligned, []).append(clause)
    return [(" ".join(parts), aligned) for aligned, parts in grouped.items()]


def negation_reasons(claim: str, support: str) -> list[str]:
    """Each part of the claim has as many negations as the support clause it restates."""
    return [
        f"negation differs: {part!r} vs {aligned!r}"
        for part, aligned in _alignment(claim, support)
        if negations(part, aligned) != negations(aligned, part)
        and not _negated_contrast(
            part, aligned, negations(part, aligned) - negations(aligned, part)
        )
    ]


def _negated_contrast(part: str, aligned: str, difference: int) -> bool:
    """One negation more and a contrast word instead ("a bad idea" for "not a good idea")."""
    if abs(difference) != 1:
        return False
    mine, theirs = set(words(part)), set(words(aligned))
    return any(contrasts(a, b) for a in mine - theirs for b in theirs - mine)


# --------------------------------------------------------------------------- scope

_UNIVERSAL = _set("all every always anywhere everywhere whole entire")
_GROUPS = {
    "most": _set("most majority mostly"),
    "some": _set("some certain several sometimes"),
    "usually": _set("usually typically generally normally"),
    "only": _set("only solely exclusively exactly"),
    "may": _set("may might possibly perhaps probably likely"),
}
_PHRASES = {
    "nearly all": "most",
    "almost all": "most",
    "a few": "some",
    "in most cases": "usually",
    "most common": "usually",
    "most often": "usually",
}
_JUST_A_NUMBER = re.compile(
    r"\bjust (?=(?:\d|one|two|three|four|five|six|seven|eight|nine|ten|a single|the|a|an)\b)"
)
_SUPERLATIVE = re.compile(r"\b(?:the|a) most \w+")


_EACH = re.compile(r"\b(?:each|any)\b")  # "every package" restates "each package"
_LIMITS = frozenset({"only", "most", "may", "usually"})  # dropping one widens the claim


def _scope_words(text: str) -> tuple[set[str], bool]:
    low = " ".join(words(text))
    groups = {g for phrase, g in _PHRASES.items() if f" {phrase} " in f" {low} "}
    low = _SUPERLATIVE.sub(" ", low)  # "the most common" is no quantifier
    low = re.sub(r"\bat all\b", " ", low)  # "not at all" is emphasis, not "all"
    low = re.sub(r"\bat (?:most|least)\b", " ", low)  # a bound, not a quantifier
    low = _JUST_A_NUMBER.sub(" only ", low)  # "just one", "just the" = "only"; "just over" is not
    tokens = set(low.split())
    groups |= {g for g, members in _GROUPS.items() if tokens & members}
    return groups, bool(tokens & _UNIVERSAL)


def scope_reasons(claim: str, support: str) -> list[str]:
    """The claim may not widen (all, always, any) or narrow (most, some, only) the scope."""
    claim_groups, claim_universal = _scope_words(claim)
    support_groups, support_universal = _scope_words(support)
    added = claim_groups - support_groups - {"may"}  # a hedge the passage lacks is no new fact
    reasons = [f"scope word not in passage: {g}" for g in sorted(added)]
    if claim_universal and not support_universal and not _EACH.search(" ".join(words(support))):
        reasons.append("claims all/every/always where the passage does not")
    for part, aligned in _alignment(claim, support):
        dropped = (_scope_words(aligned)[0] - _scope_words(part)[0]) & _LIMITS
        if dropped:
            reasons.append(f"drops a scope limit: {sorted(dropped)}")
    return reasons


# --------------------------------------------------------------------------- conditions

_OPPOSITES = [
    ("before", "after"), ("first", "last"), ("over", "under"), ("above", "below"),
    ("over", "below"), ("above", "under"), ("more than", "less than"), ("at least", "at most"),
    ("minimum", "up to"),
    ("more", "less"), ("more", "fewer"), ("earlier", "later"), ("early", "late"),
    ("increase", "decrease"), ("inside", "outside"), ("leading", "trailing"),
    ("big", "little"), ("minimum", "maximum"), ("least", "most"), ("open", "closed"),
    ("in stock", "out of stock"), ("same", "next"), ("same", "different"), ("local", "global"),
    ("lowercase", "uppercase"), ("upper", "lower"), ("higher", "lower"), ("start", "end"),
    ("allowed", "forbidden"), ("required", "optional"), ("mandatory", "optional"),
    ("free", "paid"), ("free", "fee"), ("include", "exclude"), ("included", "excluded"),
    ("accepted", "rejected"), ("approved", "declined"),
    ("unopened", "opened"), ("in place", "copy"), ("must", "may"),
    ("must", "optionally"),
]  # fmt: skip
# A comparison the passage may state in another word ("under $50" for "below $50").
_SAME_AS = {"under": ("below",), "below": ("under",), "over": ("above",), "above": ("over",)}
_CONDITION_CUES = ("if", "unless", "when", "whenever", "once", "as long as", "provided", "only if")
_CUE_GROUPS = {
    "an exception": ("unless", "except", "other than", "apart from", "besides"),
    "a concession": ("even if", "even after", "even when", "even though", "whether or not",
                     "regardless"),
}  # fmt: skip


def _count(text: str, phrase: str) -> int:
    return len(re.findall(rf"(?<!\w){re.escape(phrase)}(?!\w)", text))


def _has(text: str, phrase: str) -> bool:
    return _count(text, phrase) > 0


def _forms(word: str) -> str:
    """A word with its inflections: "include" -> include|includes|included|including."""
    w = re.escape(word)
    if word.endswith("e"):
        return rf"{w[:-1]}(?:e|es|ed|ing)"
    doubled = re.escape(word[-1]) if re.search(r"[^aeiou][aeiou][bdgmnprt]$", word) else ""
    return rf"{w}(?:s|es|ed|ing|{doubled}ed|{doubled}ing)?" if doubled else rf"{w}(?:s|es|ed|ing)?"


@lru_cache(maxsize=1024)
def _phrase_pattern(phrase: str) -> re.Pattern:
    """A phrase; a one-word phrase of four letters or more in any of its inflections."""
    body = re.escape(phrase) if " " in phrase or len(phrase) < 4 else _forms(phrase)
    return re.compile(rf"(?<!\w){body}(?!\w)")


def _count_forms(text: str, phrase: str) -> int:
    """Occurrences of a phrase; a one-word phrase in any of its inflections."""
    return len(_phrase_pattern(phrase).findall(text))


_BOUND_SIGNS = {"<=": " at most ", "≤": " at most ", ">=": " at least ", "≥": " at least "}


def _bounds(text: str) -> str:
    """Comparison signs as words: "<= 0" -> "at most 0"."""
    for sign, phrase in _BOUND_SIGNS.items():
        text = text.replace(sign, phrase)
    return text


def condition_reasons(claim: str, support: str) -> list[str]:
    """No condition or comparison turned into its opposite, no exception the passage lacks."""
    c, s = (_bounds(t.lower().replace("’", "'")).replace("-", " ") for t in (claim, support))
    reasons = []
    for a, b in _OPPOSITES:
        for mine, theirs in ((a, b), (b, a)):
            # "after discounts and after tax" against "after discounts and before tax"
            mine_c = _count_forms(c, mine)
            mine_s = _count_forms(s, mine) + sum(_count(s, a) for a in _SAME_AS.get(mine, ()))
            if mine_c > mine_s and _count_forms(c, theirs) < _count_forms(s, theirs):
                reasons.append(f"says {mine!r} where the passage says {theirs!r}")
    for name, cues in _CUE_GROUPS.items():
        if any(_has(c, cue) for cue in cues) and not any(_has(s, cue) for cue in cues):
            reasons.append(f"adds {name} the passage lacks")
    return reasons


def fact_reasons(claim: str, support: str) -> list[str]:
    """All fact-level differences between a claim and its supporting sentence."""
    return [
        *number_reasons(claim, support),
        *negation_reasons(claim, support),
        *scope_reasons(claim, support),
        *condition_reasons(claim, support),
        *name_reasons(claim, support),
    ]
