"""Answer evaluation: the eval file format, key-fact scoring, corpus loading and the command."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from conversations.models import Message
from evals.evaluation import (
    Case,
    corpus_tenant_load,
    eval_set_load,
    key_fact_found,
    summarize,
)
from evals.evaluation.runner import CaseResult, _score
from knowledge.extraction import detect_content_type, extract
from knowledge.models import Document
from supportbot.errors import ApplicationError
from supportbot.models import Tenant

ROOT = Path(settings.BASE_DIR) / "demo"
PYFAQ = ROOT / "python_faq" / "eval_answers.json"
DEMO = ROOT / "helpcenter" / "eval_answers.json"
DEVFAQ = ROOT / "dev_faq" / "eval_answers.json"
DEVDEBIAN = ROOT / "dev_debian_faq" / "eval_answers.json"
DEVSQLALCHEMY = ROOT / "dev_sqlalchemy_faq" / "eval_answers.json"
DEVCELERY = ROOT / "dev_celery_faq" / "eval_answers.json"
DEVGIT = ROOT / "dev_git_faq" / "eval_answers.json"
DEVSQLITE = ROOT / "dev_sqlite_faq" / "eval_answers.json"
DEVFETCHMAIL = ROOT / "dev_fetchmail_faq" / "eval_answers.json"
DEVNANO = ROOT / "dev_nano_docs" / "eval_answers.json"
DEVZSH = ROOT / "dev_zsh_faq" / "eval_answers.json"
DEVCUPS = ROOT / "dev_cups_help" / "eval_answers.json"
DEVPODMAN = ROOT / "dev_podman_docs" / "eval_answers.json"
DEVPRIVOXY = ROOT / "dev_privoxy_docs" / "eval_answers.json"
DEVKEEPASSXC = ROOT / "dev_keepassxc_docs" / "eval_answers.json"
# Issue 31's development sets of new kinds (its two held-out sets stay out of every test).
DEVFISH = ROOT / "dev_fish_tutorial" / "eval_answers.json"
DEVEVINCE = ROOT / "dev_evince_help" / "eval_answers.json"


def reply(kind=Message.Kind.EXTRACTIVE, text="", titles=("Doc",)) -> Message:
    citations = [{"index": i, "title": t, "chunk_id": i} for i, t in enumerate(titles, 1)]
    return Message(kind=kind, text=text, citations=citations)


# --------------------------------------------------------------------------- the data sets


@pytest.mark.parametrize("path", [PYFAQ, DEVFAQ], ids=["python-faq", "dev-faq"])
def test_the_faq_sets_have_the_promised_question_counts(path):
    eval_set = eval_set_load(path)
    single = [c for c in eval_set.cases if c.expect == "answer" and not c.follow_up]
    follow_ups = [c for c in eval_set.cases if c.follow_up]
    declines = [c for c in eval_set.cases if c.expect == "decline"]
    assert len(single) >= 40
    assert all(c.key_facts and c.document for c in single)
    assert len(follow_ups) >= 10
    assert all(c.key_facts and len(c.before) == 1 for c in follow_ups)
    assert len(declines) >= 10
    assert eval_set.corpus == path.parent / "manifest.json"
    assert eval_set.tenant_slug != eval_set_load(DEMO).tenant_slug


@pytest.mark.parametrize("path", [DEVFISH, DEVEVINCE], ids=["dev-fish", "dev-evince"])
def test_the_new_kind_sets_have_their_promised_counts_and_adjacent_refusals(path):
    """40+ questions, 10+ follow-ups, 10+ out of scope of which at least half adjacent."""
    eval_set = eval_set_load(path)
    single = [c for c in eval_set.cases if c.expect == "answer" and not c.follow_up]
    follow_ups = [c for c in eval_set.cases if c.follow_up]
    declines = [c for c in eval_set.cases if c.expect == "decline"]
    assert len(single) >= 40
    assert all(c.key_facts and c.documents for c in single)
    assert len(follow_ups) >= 10
    assert all(c.key_facts and len(c.before) == 1 for c in follow_ups)
    assert len(declines) >= 10
    assert 2 * sum(1 for c in declines if c.category == "adjacent") >= len(declines)
    assert eval_set.corpus == path.parent / "manifest.json"


def test_the_long_entry_set_has_its_promised_question_counts():
    """The SQLAlchemy set exists for long entries: 30+ questions, 6+ follow-ups, 6+ out of scope."""
    eval_set = eval_set_load(DEVSQLALCHEMY)
    single = [c for c in eval_set.cases if c.expect == "answer" and not c.follow_up]
    follow_ups = [c for c in eval_set.cases if c.follow_up]
    declines = [c for c in eval_set.cases if c.expect == "decline"]
    assert len(single) >= 30
    assert all(c.key_facts and c.document for c in single)
    assert len(follow_ups) >= 6
    assert all(c.key_facts and len(c.before) == 1 for c in follow_ups)
    assert len(declines) >= 6
    assert eval_set.tenant_slug not in {eval_set_load(p).tenant_slug for p in (DEVDEBIAN, DEVFAQ)}


def test_the_demo_set_still_loads_and_its_knowledge_questions_carry_key_facts():
    eval_set = eval_set_load(DEMO)
    from_retrieval = [c for c in eval_set.cases if c.category == "in_scope"]
    assert len(from_retrieval) >= 50
    assert sum(1 for c in from_retrieval if c.key_facts) >= 48
    assert any(c.category == "tricky" and c.must_contain for c in eval_set.cases)
    assert any("summit-club" in c.segments for c in eval_set.cases)


def _document_texts(manifest_path: Path) -> dict[str, str]:
    manifest = json.loads(manifest_path.read_text())
    texts = {}
    for entry in manifest["documents"]:
        data = (manifest_path.parent / entry["file"]).read_bytes()
        kind = detect_content_type(filename=entry["file"], declared="", head=data[:2048])
        texts[entry["title"]] = extract(data=data, content_type=kind).text
    return texts


@pytest.mark.parametrize(
    "path",
    [
        PYFAQ,
        DEMO,
        DEVFAQ,
        DEVDEBIAN,
        DEVSQLALCHEMY,
        DEVCELERY,
        DEVGIT,
        DEVSQLITE,
        DEVFETCHMAIL,
        DEVNANO,
        DEVZSH,
        DEVCUPS,
        DEVPODMAN,
        DEVPRIVOXY,
        DEVKEEPASSXC,
        DEVFISH,
        DEVEVINCE,
    ],
    ids=[
        "python-faq",
        "demo",
        "dev-faq",
        "dev-debian",
        "dev-sqlalchemy",
        "dev-celery",
        "dev-git",
        "dev-sqlite",
        "dev-fetchmail",
        "dev-nano",
        "dev-zsh",
        "dev-cups",
        "dev-podman",
        "dev-privoxy",
        "dev-keepassxc",
        "dev-fish",
        "dev-evince",
    ],
)
def test_every_key_fact_can_be_found_in_its_labelled_document(path):
    """A label that its own document does not hold could never be met: catch typos."""
    eval_set = eval_set_load(path)
    texts = _document_texts(eval_set.corpus)
    unreachable = [
        (c.question, document)
        for c in eval_set.cases
        for document in c.documents
        if c.key_facts and not key_fact_found(texts[document], c.key_facts)
    ]
    assert unreachable == []


# --------------------------------------------------------------------------- scoring


def test_key_facts_match_across_case_quotes_dashes_and_line_breaks():
    assert key_fact_found("Refunds take 5–10\n business  DAYS.", ["5-10 business days"])
    assert key_fact_found("It’s Monty Python", ["it's monty python"])
    assert key_fact_found("use shutil.rmtree()", ["os.rmdir", "shutil.rmtree"])


@pytest.mark.parametrize(
    "text",
    ["", "Refunds take a while.", "5-10 days", "business days 5-10", "\x00\ufffd"],
)
def test_a_reply_without_the_key_fact_does_not_count(text):
    assert not key_fact_found(text, ["5-10 business days"])


def test_an_empty_phrase_never_matches_everything():
    assert not key_fact_found("anything", ["", "   "])


def test_a_reply_citing_the_right_document_but_missing_the_key_fact_fails_the_key_fact():
    case = Case("how do I delete a file", "answer", document="Library", key_facts=["os.remove"])
    correct, right_source, key_fact, reason = _score(
        case, reply(text="To remove a directory, use os.rmdir().", titles=["Library"])
    )
    assert right_source
    assert correct
    assert key_fact is False
    assert "no key fact" in reason
    assert _score(case, reply(text="Use os.remove(filename).", titles=["Library"]))[2] is True


def test_a_declined_or_wrongly_sourced_reply_never_scores_a_key_fact():
    case = Case("how do I delete a file", "answer", document="Library", key_facts=["os.remove"])
    refusal = reply(kind=Message.Kind.REFUSAL, text="os.remove? I can't help.", titles=[])
    assert _score(case, refusal)[2] is False
    wrong = _score(case, reply(text="Use os.remove(filename).", titles=["Programming"]))
    assert wrong[1] is False
    assert wrong[2] is True


def test_a_case_that_two_documents_answer_takes_either_as_the_right_source(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text(
        json.dumps(
            {
                "tenant": "t",
                "cases": [
                    {
                        "q": "how do I lock my database",
                        "expect": "answer",
                        "document": ["Getting Started", "User Guide"],
                        "key_facts": ["Ctrl + L"],
                    }
                ],
            }
        )
    )
    (case,) = eval_set_load(path).cases
    assert case.document == "Getting Started"
    for title in ("Getting Started", "User Guide"):
        assert _score(case, reply(text="Press Ctrl + L.", titles=[title]))[1] is True
    assert _score(case, reply(text="Press Ctrl + L.", titles=["Release Notes"]))[1] is False


def test_an_out_of_scope_case_passes_only_when_declined():
    case = Case("tell me a joke", "decline")
    assert _score(case, reply(kind=Message.Kind.HANDOFF, titles=[]))[0] is True
    assert _score(case, reply(kind=Message.Kind.EXTRACTIVE, text="Ha"))[0] is False


def test_summary_reports_in_scope_follow_ups_and_declines_separately():
    def result(case, key_fact, correct=True):
        return CaseResult(
            case, "extractive", "", ["D"], correct, [], 10.0, 20.0, "", correct, key_fact
        )

    rows = [
        result(Case("a", "answer", document="D", key_facts=["x"]), True),
        result(Case("b", "answer", document="D", key_facts=["x"]), False),
        result(Case("c", "answer", document="D"), None),
        result(Case("d", "answer", document="D", key_facts=["x"], before=["q"]), False),
        result(Case("e", "decline"), None, correct=False),
    ]
    rows[-1].unsupported = ["an invented claim"]
    summary = summarize(rows)
    assert summary["in_scope_source"] == (3, 3)
    assert summary["in_scope_key_fact"] == (1, 2)
    assert summary["follow_up_key_fact"] == (0, 1)
    assert summary["out_of_scope_declined"] == (0, 1)
    assert summary["unsupported_delivered"] == 1
    assert summary["out_of_scope_adjacent_declined"] == (0, 0)


def test_adjacent_out_of_scope_cases_are_counted_within_the_declines_and_on_their_own(tmp_path):
    path = tmp_path / "eval_answers.json"
    path.write_text(
        json.dumps(
            {
                "tenant": "t",
                "cases": [
                    {"q": "a recipe for bread", "expect": "decline"},
                    {"q": "does it run on windows 11", "expect": "decline", "category": "adjacent"},
                    {"q": "the pro plan price?", "expect": "decline", "category": "adjacent"},
                ],
            }
        )
    )
    far, near_refused, near_answered = eval_set_load(path).cases
    assert (far.category, near_refused.category) == ("out", "adjacent")

    def result(case, correct):
        return CaseResult(case, "refusal", "", [], correct, [], None, None)

    summary = summarize(
        [result(far, True), result(near_refused, True), result(near_answered, False)]
    )
    assert summary["out_of_scope_declined"] == (2, 3)
    assert summary["out_of_scope_adjacent_declined"] == (1, 2)


def test_a_quote_holding_the_sources_own_quotation_marks_is_read_whole():
    from evals.evaluation.runner import _QUOTE_RE

    text = "Here: “Versions are numbered “A.B.C” or “A.B”.” [2] and “Next one.” [1]"
    assert _QUOTE_RE.findall(text) == [
        ("Versions are numbered “A.B.C” or “A.B”.", "2"),
        ("Next one.", "1"),
    ]


@pytest.mark.django_db
def test_a_quote_running_on_into_its_section_counts_as_supported_and_an_invented_one_not(tenant):
    from chat.tests.helpcenter import index_document
    from evals.evaluation.runner import unsupported_sentences

    body = " ".join(f"Claim step {i} needs form {i} signed by the owner." for i in range(60))
    document = index_document(tenant, "Claims", f"# Claims\n\n## How\n\n{body}\n")
    first, second = document.chunks.filter(version=document.version).order_by("ordinal")[:2]
    last = first.text.rsplit(". ", 1)[-1]  # the chunk's last sentence, then the next chunk's
    following = second.text[first.span_end - second.span_start :].strip().split(". ")[0]
    running_on = f"{last} {following}."
    cite = [{"index": 1, "title": "Claims", "chunk_id": first.pk}]
    supported = Message(kind=Message.Kind.EXTRACTIVE, text=f"“{running_on}” [1]", citations=cite)
    assert unsupported_sentences(supported, tenant) == []
    invented = Message(
        kind=Message.Kind.EXTRACTIVE,
        text="“Claim step 3 needs no form at all.” [1]",
        citations=cite,
    )
    assert unsupported_sentences(invented, tenant) != []
    # a handoff quoting the closest passage: its queue wording is ours, its quote is checked
    handoff = (
        "I'm connecting you with a person from our team. Everyone on our team is busy or "
        "offline right now, so this may take a while. Meanwhile: The closest thing in our help "
        "center is: “{}” [1]"
    )
    kind = Message.Kind.HANDOFF
    quoted = Message(kind=kind, text=handoff.format(running_on), citations=cite)
    assert unsupported_sentences(quoted, tenant) == []
    changed = Message(kind=kind, text=handoff.format("Claim step 3 needs no form."), citations=cite)
    assert unsupported_sentences(changed, tenant) == ["Claim step 3 needs no form."]


# --------------------------------------------------------------------------- bad files


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json {", "not a readable JSON"),
        (b"\xff\xfe\x00bad", "not a readable JSON"),
        ('{"cases": []}', "'tenant'"),
        ('{"tenant": "t", "cases": [{"q": "hi", "expect": "maybe"}]}', "case 1"),
        ('{"tenant": "t", "cases": [{"turns": [{"q": "only one"}]}]}', "at least two turns"),
        ('{"tenant": "t", "cases": [{"q": "hi", "expect": "answer", "key_facts": "x"}]}', "list"),
        ('{"tenant": "t", "cases": [{"q": "  ", "expect": "answer"}]}', "non-empty"),
        ('{"tenant": "t", "cases": [{"q": "hi", "expect": "answer", "document": []}]}', "titles"),
        ('{"tenant": "t", "cases": [{"q": "hi", "expect": "answer", "document": [1]}]}', "titles"),
    ],
)
def test_a_bad_eval_file_is_refused_naming_the_problem(tmp_path, content, message):
    path = tmp_path / "eval.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ApplicationError, match=message):
        eval_set_load(path)


def test_the_command_refuses_a_bad_file_without_a_traceback(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text('{"tenant": "t", "cases": [{"q": "hi", "expect": "maybe"}]}')
    with pytest.raises(CommandError, match="case 1"):
        call_command("eval_answers", str(path))
    with pytest.raises(CommandError, match="No such file"):
        call_command("eval_answers", str(tmp_path / "missing.json"))


# --------------------------------------------------------------------------- end to end

CORPUS_RETURNS = """# Returns

## Return window
You can return unopened items within 30 days of delivery for a full refund. Opened items are
returned for store credit only.

## Return labels
A prepaid return label costs $6.95 and is deducted from your refund.
"""
CORPUS_WARRANTY = """# Warranty

## Coverage
Tents carry a 2-year warranty against manufacturing defects. To undo a warranty claim, reply
to the claim email with the word CANCEL within 48 hours.
"""


@pytest.fixture
def tiny_set(tmp_path):
    (tmp_path / "returns.md").write_text(CORPUS_RETURNS)
    (tmp_path / "warranty.md").write_text(CORPUS_WARRANTY)
    (tmp_path / "manifest.json").write_text(
        json.dumps(
            {
                "tenant_name": "Tiny eval",
                "documents": [
                    {"file": "returns.md", "title": "Returns"},
                    {"file": "warranty.md", "title": "Warranty"},
                ],
            }
        )
    )
    cases = [
        {"q": "how long do i have to return unopened stuff", "expect": "answer",
         "document": "Returns", "key_facts": ["30 days"]},
        {"q": "how much is the return label", "expect": "answer", "document": "Returns",
         "key_facts": ["a fact no document holds"]},
        {"turns": [{"q": "how long is the tent warranty?"},
                   {"q": "and how do I undo a claim?", "document": "Warranty",
                    "key_facts": ["CANCEL"]}]},
        {"q": "what's the capital of Mongolia?", "expect": "decline"},
    ]  # fmt: skip
    path = tmp_path / "eval_answers.json"
    path.write_text(json.dumps({"tenant": "tiny-eval", "corpus": "manifest.json", "cases": cases}))
    return path


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_corpus_loads_as_its_own_tenant_once_and_leaves_other_tenants_alone(tiny_set, tenant):
    from chat.tests.helpcenter import index_document

    index_document(tenant, "Returns", "# Returns\n\nAnother tenant's returns page.\n")
    first = corpus_tenant_load(slug="tiny-eval", manifest_path=tiny_set.parent / "manifest.json")
    assert (first.created, first.changed, first.failed) == (2, 0, [])
    assert first.tenant.pk != tenant.pk
    again = corpus_tenant_load(slug="tiny-eval", manifest_path=tiny_set.parent / "manifest.json")
    assert (again.tenant.pk, again.created, again.changed) == (first.tenant.pk, 0, 0)
    docs = Document.objects.filter(tenant=first.tenant)
    assert sorted(d.title for d in docs) == ["Returns", "Warranty"]
    assert all(d.status == Document.Status.READY for d in docs)
    assert Document.objects.get(tenant=tenant).version == 1  # the other tenant is untouched


@pytest.mark.django_db(transaction=True)
def test_a_set_without_a_corpus_needs_its_tenant_to_exist():
    with pytest.raises(ApplicationError, match="seed_demo"):
        corpus_tenant_load(slug="no-such-tenant", manifest_path=None)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_eval_answers_runs_a_corpus_through_the_orchestrator_and_scores_each_kind(
    tiny_set, tmp_path, settings
):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    out = tmp_path / "results.json"
    call_command("eval_answers", str(tiny_set), "--json", str(out), "--show")
    results = json.loads(out.read_text())[tiny_set.parent.name]
    by_question = {r["question"]: r for r in results}
    found = by_question["how long do i have to return unopened stuff"]
    assert found["right_source"]
    assert found["key_fact"] is True
    missing = by_question["how much is the return label"]
    assert missing["right_source"]
    assert missing["key_fact"] is False
    follow_up = by_question["and how do I undo a claim?"]
    assert follow_up["before"] == ["how long is the tent warranty?"]
    assert len(follow_up["earlier"]) == 1  # the first turn was answered in the same conversation
    turns = Message.objects.filter(
        conversation_id=follow_up["conversation_id"], role=Message.Role.CUSTOMER
    )
    assert turns.count() == 2  # both turns in one conversation
    assert follow_up["alone_key_fact"] in (True, False)  # the control ran too
    assert Tenant.objects.get(slug="tiny-eval").pk == turns.first().tenant_id
    assert by_question["what's the capital of Mongolia?"]["correct"] is True
