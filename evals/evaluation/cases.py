"""The answer-evaluation file format and its loader.

An eval file is one JSON object:
- `tenant`: the slug of the tenant the questions are asked of;
- `corpus` (optional): a manifest (path relative to the file) of the documents that tenant's
  knowledge is loaded from (see `corpus`); without it the tenant must exist already;
- `in_scope_from` (optional): a retrieval question set (`knowledge` eval format) whose
  questions become in-scope cases (their optional `key_facts` included);
- `cases`: one object per case. A single-turn case has `q` and `expect` ("answer" or
  "decline"); a multi-turn case has `turns` (a list of `{"q": ...}`), scored on its last turn,
  whose labels sit on that last turn. Labels: `document` (expected cited title; a list when
  several documents say the same, any of them is the right source), `key_facts`
  (any-of phrases the reply text must contain), `must_contain` (all-of), `must_not_contain`,
  `category` ("in_scope", "tricky", "follow_up", "out"; defaults from `expect`; a decline may
  be "adjacent": it names a tool, version or platform the corpus never mentions, or asks what
  the corpus is silent about, so retrieval finds near neighbours — reported on its own too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from supportbot.errors import ApplicationError

EXPECTS = ("answer", "decline")


@dataclass
class Case:
    question: str
    expect: str  # "answer" | "decline"
    document: str | None = None  # the first of `documents`
    documents: list[str] = field(default_factory=list)  # any-of: the right sources
    heading: str | None = None
    must_contain: list[str] = field(default_factory=list)
    must_not_contain: list[str] = field(default_factory=list)
    category: str = "in_scope"
    key_facts: list[str] = field(default_factory=list)  # any-of; empty: not scored on facts
    before: list[str] = field(default_factory=list)  # earlier turns of the same conversation
    segments: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.document and not self.documents:
            self.documents = [self.document]

    @property
    def follow_up(self) -> bool:
        return bool(self.before)


@dataclass
class EvalSet:
    name: str
    path: Path
    tenant_slug: str
    cases: list[Case]
    corpus: Path | None = None  # manifest of the documents to load as the tenant's knowledge


def _strings(raw: dict, key: str, where: str) -> list[str]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ApplicationError(f"{where}: {key!r} must be a list of non-empty strings.")
    return value


def _case(raw: dict, where: str) -> Case:
    if not isinstance(raw, dict):
        raise ApplicationError(f"{where}: a case must be an object.")
    turns = raw.get("turns")
    if turns is not None:
        if not isinstance(turns, list) or len(turns) < 2:
            raise ApplicationError(f"{where}: 'turns' needs at least two turns.")
        if not all(isinstance(t, dict) and isinstance(t.get("q"), str) for t in turns):
            raise ApplicationError(f"{where}: every turn needs a 'q' string.")
        labels = {**raw, **turns[-1]}
        before = [t["q"] for t in turns[:-1]]
    else:
        labels, before = raw, []
    question = labels.get("q")
    if not isinstance(question, str) or not question.strip():
        raise ApplicationError(f"{where}: 'q' must be a non-empty string.")
    expect = labels.get("expect", "answer" if before else None)
    if expect not in EXPECTS:
        raise ApplicationError(f"{where}: 'expect' must be one of {EXPECTS}.")
    default_category = ("follow_up" if before else "in_scope") if expect == "answer" else "out"
    documents = labels.get("document")
    if isinstance(documents, str):
        documents = [documents]
    elif documents is None:
        documents = []
    elif not documents or not all(isinstance(d, str) and d.strip() for d in documents):
        raise ApplicationError(f"{where}: 'document' must be a title or a list of titles.")
    return Case(
        question=question,
        expect=expect,
        document=documents[0] if documents else None,
        documents=list(documents),
        heading=labels.get("heading"),
        must_contain=_strings(labels, "must_contain", where),
        must_not_contain=_strings(labels, "must_not_contain", where),
        category=labels.get("category", default_category),
        key_facts=_strings(labels, "key_facts", where),
        before=before,
        segments=_strings(labels, "segments", where),
    )


def eval_set_load(path: Path, *, name: str | None = None) -> EvalSet:
    """Read and check an eval file; raise ApplicationError naming the bad case."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApplicationError(f"{path}: not a readable JSON eval file ({exc}).") from exc
    if not isinstance(data, dict) or not isinstance(data.get("tenant"), str):
        raise ApplicationError(f"{path}: the file needs a 'tenant' slug.")
    cases: list[Case] = []
    source = data.get("in_scope_from")
    if source:
        retrieval = json.loads((path.parent / source).read_text(encoding="utf-8"))
        for n, q in enumerate(retrieval["questions"], start=1):
            cases.append(_case({**q, "expect": "answer"}, f"{source} question {n}"))
    for n, raw in enumerate(data.get("cases", []), start=1):
        cases.append(_case(raw, f"{path.name} case {n}"))
    corpus = data.get("corpus")
    return EvalSet(
        name=name or path.parent.name,
        path=path,
        tenant_slug=data["tenant"],
        cases=cases,
        corpus=(path.parent / corpus) if corpus else None,
    )
