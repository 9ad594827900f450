"""The names a question asks about, recognised by their form alone: what a customer writes as a
name (a product, platform, tool or version) rather than as an ordinary word.

Whether the tenant's documents mention them is another matter (`selectors.terms_unknown`):
a question that names something the documents never mention is not answered by them, however
close its other words come to a passage ("does it run on Windows 11", "install it with
Homebrew"). Only forms are read here, never lists of words: an ordinary word a customer uses
instead of the documents' word ("grey" for "gray", "folder" for "directory") is no name, so
it never makes an answerable question look unanswerable.

A name is:
- a version: dotted numbers ("4.0", "22.04", "v3.12.1");
- a word with digits in it after letters ("win11", "wsl2", "python3"), not a file name (a
  number alone is a count or a page, never a name);
- a word of three or more hyphenated parts of letters ("oh-my-fish", "text-to-speech"): a
  coined name (two parts are mostly ordinary words or keys: "spell-correcting", "ctrl-c");
- a capitalised word inside a sentence that is not all capitals or all title case
  ("on Windows", "with Homebrew", an acronym "WSL"), not "I" and its contractions;
- a word written as code (`brew`, ``apt-get``): its punctuation is ignored.
"""

from __future__ import annotations

import re
import unicodedata

# A word as a customer writes it: letters or digits, joined by . _ - + # ' (no trailing dot).
_TOKEN_RE = re.compile(r"[^\W_](?:[\w.+#'-]*[^\W_+#.'-]|[+#]+)?")
_VERSION_RE = re.compile(r"[vV]?\d+(?:\.\d+)+")
_LETTERS_DIGITS_RE = re.compile(r"[^\W\d_]{2,}\d[^\W_]*")
_HYPHENATED_RE = re.compile(r"[^\W\d_]{2,}(?:-[^\W\d_]{2,}){2,}")
_FILE_RE = re.compile(r".+\.[^\W\d_]{1,5}")  # file_1.txt, main.tex: the customer's own file
_CODE_SPAN_RE = re.compile(r"`+([^`]+)`+")
_SENTENCE_END_RE = re.compile(r"[.!?:;]\s*$|^\s*$")
MAX_NAMES = 8


def question_names(text: str) -> list[str]:
    """The words of `text` written as names (see the module), lower case, in order, at most
    MAX_NAMES."""
    text = unicodedata.normalize("NFKC", text)
    names = [t for span in _CODE_SPAN_RE.findall(text) for t in _TOKEN_RE.findall(span)]
    plain = _CODE_SPAN_RE.sub(" ", text)
    capitals_mean_names = _capitals_mean_names(plain)
    for match in _TOKEN_RE.finditer(plain):
        token = match.group()
        if _is_name_form(token) or (
            capitals_mean_names and _is_capitalised_inside(plain, match.start(), token)
        ):
            names.append(token)
    names = [n.lower().strip("'") for n in names if not _FILE_RE.fullmatch(n)]
    return list(dict.fromkeys(n for n in names if len(n) > 1))[:MAX_NAMES]


def _is_name_form(token: str) -> bool:
    return bool(
        _VERSION_RE.fullmatch(token)
        or _LETTERS_DIGITS_RE.fullmatch(token)
        or _HYPHENATED_RE.fullmatch(token)
    )


def _capitals_mean_names(text: str) -> bool:
    """Whether capitals tell names here: not when every word is capitalised (a title, or
    shouting), nor when none is."""
    words = [w for w in _TOKEN_RE.findall(text) if w[0].isalpha()]
    capitalised = sum(1 for w in words if w[0].isupper())
    return 0 < capitalised < max(2, len(words) * 0.6)


def _is_capitalised_inside(text: str, start: int, token: str) -> bool:
    """A capitalised word that does not begin a sentence, other than "I" ("I'm", "I've")."""
    if not token[0].isupper() or token.split("'")[0] == "I":
        return False
    return not _SENTENCE_END_RE.search(text[:start])
