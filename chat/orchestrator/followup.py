"""Follow-ups: a message that leans on the one before it ("and how do I undo that?") is
searched together with the previous question and answered for its own words.

Measured on the development set (demo/dev_faq, 22 follow-ups): the follow-up and the previous
question searched together 20/22 answered; with the start of the previous reply added to the
search 12/22 (its words pull the search back to what was already quoted); the old rule (only
messages of at most four words, previous question first) 14/22. Penalising sentences the
previous reply had quoted cost one more (a follow-up often asks again for what was said), and
weighing the previous question into the choice of sentences changed nothing.

Detection is by the message's form, never by topic: it is short, or it opens like a
continuation ("and …", "what about …", "then …"), or it refers back with a pronoun or a word
that needs an antecedent ("that", "it", "undo", "instead", "too"), or contrasts with it
("… though?"), or ends on a bare question word ("i do want to overwrite it, how?").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from conversations import selectors
from conversations.models import Message

SHORT_WORDS = 4
_LEADS = re.compile(
    r"^\s*(?:and|also|but|then|so|or|plus|ok(?:ay)?|what about|how about|same for|"
    r"what if|and if|if so|if not|in that case)\b",
    re.I,
)
_ANAPHORA = frozenset(
    {
        "that",
        "it",
        "this",
        "those",
        "these",
        "them",
        "they",
        "its",
        "there",
        "one",
        "ones",
        "too",
        "either",
        "instead",
        "else",
        "undo",
        "revert",
        "same",
        "though",  # "is that safe though?": a contrast with what was just said
    }
)
# A question word left bare at the end ("…, how?") asks about what was just said.
_BARE_TAIL = re.compile(r"[,;]\s*(?:how|why|where|when|which)\s*[?!.]*\s*$", re.I)
_WORD = re.compile(r"[a-z']+")


def is_follow_up(text: str) -> bool:
    """Does the message read as a continuation of the one before it?"""
    words = _WORD.findall(text.lower().replace("’", "'"))
    if len(text.split()) <= SHORT_WORDS:
        return True
    if _LEADS.match(text) or _BARE_TAIL.search(text):
        return True
    return any(w in _ANAPHORA for w in words)


@dataclass(frozen=True)
class Resolved:
    """How a message is searched and answered."""

    search: str  # the search query
    context: str = ""  # the question a follow-up resolves against ("" for a new question)

    @property
    def follow_up(self) -> bool:
        return bool(self.context)


def resolve(*, conversation, message: Message) -> Resolved:
    """The message alone, or for a follow-up: the message with the previous question."""
    text = message.text
    if not is_follow_up(text):
        return Resolved(search=text)
    previous = selectors.previous_customer_text(conversation=conversation, before_id=message.pk)
    if not previous:
        return Resolved(search=text)
    return Resolved(search=f"{text} {previous}", context=previous)
