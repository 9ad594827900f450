"""Small curated word lists: synonyms a paraphrase may use, contrasts it may not swap.

General English, not the calibration set's sentences: a synonym licenses a claim word the
passage does not contain; a contrast ("hard" for "soft", "excludes" for "including") is a
changed fact even where the contextual vectors of the two words are close.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

from knowledge.text import stem

_SYNONYMS = """
begin start commence
get receive obtain
send email mail
item product article goods
choose pick select
buy purchase
fast quick rapid prompt
help assist
need require necessary needed required mandatory
allow let permit
use employ utilize
show display
change modify alter
remove delete erase
create make
end finish complete
large big
small little tiny
immediately instantly promptly
automatic automatically
about approximately roughly around nearly almost
price cost
check verify inspect examine
review assess evaluate
keep store save retain hold
refund reimburse
give provide grant offer issue
rule policy
ship dispatch
arrive reach come
shop store
option choice alternative
error mistake
raise throw
typical usual common
identical same equal
state say
contact call
lightweight light
under below
over above
contain hold
reply answer respond
""".strip().splitlines()

_CONTRASTS = """
include exclude
before after
hard soft
same different
same separate
required optional
mandatory optional
allowed forbidden
allow forbid
increase decrease
increment decrement
maximum minimum
max min
first last
new old
enable disable
add remove
accept reject
approve decline
approved declined
send receive
arrive leave
reach leave
enter leave
buy sell
import export
input output
public private
read write
open close
start stop
internal external
local remote
local global
static dynamic
positive negative
ascending descending
upper lower
uppercase lowercase
major minor
long short
fast slow
high low
higher lower
strong weak
online offline
credit debit
parent child
client server
sender recipient
buyer seller
manual automatic
inside outside
above below
early late
earlier later
larger smaller
big small
full partial
full empty
true false
success failure
win lose
always never
left right
top bottom
daily weekly
weekly monthly
monthly yearly
daily monthly
temporary permanent
physical digital
cheap expensive
sorted unsorted
easy difficult
good bad
easy hard
simple complex
possible impossible
likely unlikely
each first
every first
each last
every last
sorted same
""".strip().splitlines()


class _Word(Protocol):
    text: str


@lru_cache(maxsize=65536)
def root(word: str) -> str:
    """The key of the synonym and contrast tables: the Snowball stem less a final e.

    Snowball already joins "include", "includes" and "including"; the final e still drops
    where Snowball keeps it ("base", "case"), as it did under the suffix stripper the tables
    were first written for.
    """
    base = stem(word)
    return base[:-1] if len(base) > 3 and base.endswith("e") else base


def _partners(lines: list[str]) -> dict[str, frozenset[str]]:
    """Each word's root -> the roots it shares a line with."""
    found: dict[str, set[str]] = {}
    for line in lines:
        roots = {root(w) for w in line.split()}
        for r in roots:
            found.setdefault(r, set()).update(roots - {r})
    return {r: frozenset(others) for r, others in found.items()}


_SYNONYMS_OF = _partners(_SYNONYMS)
_CONTRASTS_OF = _partners(_CONTRASTS)


def are_synonyms(a: _Word, b: _Word) -> bool:
    """Both words in one synonym group (and not the same word)."""
    return root(b.text) in _SYNONYMS_OF.get(root(a.text), ())


def synonyms_of(word: str) -> frozenset[str]:
    """The roots of the word's curated synonyms (empty when it has none)."""
    return _SYNONYMS_OF.get(root(word), frozenset())


def contrasts_of(word: str) -> frozenset[str]:
    """The roots of the word's curated contrasts (empty when it has none)."""
    return _CONTRASTS_OF.get(root(word), frozenset())


def contrasts(a: str, b: str) -> bool:
    """Two words (any inflection) are a curated contrast pair."""
    return root(b) in contrasts_of(a)


def are_contrasts(a: _Word, b: _Word) -> bool:
    """The words are a curated contrast pair (either order)."""
    return contrasts(a.text, b.text)
