"""Names and identifiers of a claim: each one in the passage, identifiers in its order."""

from __future__ import annotations

import re

from knowledge.text import STOPWORDS


def names(text: str) -> list[tuple[str, bool]]:
    """Names and code in their order, as (lowercased token, is code): capitalised words that do
    not open the sentence, and identifiers (os.rmdir(), PyInit_foo, ST-300, rc1)."""
    found = []
    body = text.strip().lstrip("\"“”'")
    matches = list(re.finditer(r"[\w.'’()/-]+", body))
    for n, match in enumerate(matches):
        token = match.group(0).strip(".,'’()/-").replace("’", "'")
        if not token:
            continue
        is_code = bool(re.search(r"[a-z]\.[a-z]|\w\(|_|[a-z]\d|\d[a-z]", token, re.I))
        is_code = is_code or _lowercase_identifier(token, matches, n)
        if is_code or (token[0].isupper() and match.start() > 0):
            found.append((token.lower(), is_code))
    return found


_NAMED_BY = frozenset({"module", "modules"})


def _lowercase_identifier(token: str, matches: list[re.Match], n: int) -> bool:
    """A lowercase word that opens the sentence ("atexit provides …": prose opens with a
    capital) or names a module ("the pickle module")."""
    if not token.isalpha() or not token.islower() or token in STOPWORDS:
        return False
    if n == 0:
        return True
    following = matches[n + 1].group(0).strip(".,'’()/-").lower() if n + 1 < len(matches) else ""
    return following in _NAMED_BY and token not in _NAMED_BY


def _has(text: str, phrase: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


def _initials(text: str) -> set[str]:
    """Acronyms of capitalised runs: "Python Software Foundation" -> "psf"."""
    found = set()
    for run in re.findall(r"(?:\b[A-Z][\w'’-]*\s+){1,5}[A-Z][\w'’-]*", text):
        letters = [w[0].lower() for w in run.split()]
        for i in range(len(letters)):
            for j in range(i + 2, len(letters) + 1):
                found.add("".join(letters[i:j]))
    return found


def name_reasons(claim: str, support: str) -> list[str]:
    """Every name or identifier of the claim is in the support; identifiers in its order."""
    have = support.lower().replace("’", "'")
    mine = names(claim)
    initials = _initials(support)
    missing = [
        n
        for n, _ in mine
        if not _has(have, n) and not _has(have, n.rstrip("s")) and n not in initials
    ]
    reasons = [f"name not in passage: {n}" for n in dict.fromkeys(missing)]
    code = [n for n in dict.fromkeys(n for n, is_code in mine if is_code) if n not in missing]
    positions = [have.find(n) for n in code]
    if len(positions) >= 2 and positions != sorted(positions):
        reasons.append(f"identifiers in another order than the passage: {code}")
    return reasons
