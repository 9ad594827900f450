"""The database round trips of one answered turn: a budget that only goes down (issue 36)."""

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat import orchestrator
from conversations.models import Message

from .test_orchestrator import Recorder

# An extractive turn, the answer cache off, the tenant's plan and headings already known:
# accept (data key, insert, conversation touched), the turn's conversation, reply
# reserved, searching, the search (trigram setting, one statement, the passages' fetch), model
# check, reply written under the bot-owns lock (owner, reply row, data key, update), answered,
# conversation touched, summary due. The two data-key reads are the test's: its transaction
# never commits, so the key is not cached as a running process caches it. 21 before the vector
# plan was kept, the ANSWERING write left to turns that wait on the model and the summary check
# made one query, 18 before the accept inserted first instead of reading for a duplicate.
EXTRACTIVE_TURN_QUERIES = 17


@pytest.fixture
def warm(help_center, conversation, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.ANSWER_CACHE_ENABLED = False
    ask = async_to_sync(orchestrator.handle_customer_message)
    ask(conversation=conversation, client_message_id="w", text="How long does shipping take?")
    return ask


def _statements(ctx) -> list[str]:
    """The statements sent, without the test transaction's savepoints."""
    return [
        q["sql"]
        for q in ctx.captured_queries
        if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))
    ]


def test_an_extractive_turn_stays_within_its_query_budget(warm, conversation):
    with CaptureQueriesContext(connection) as ctx:
        outcome = warm(
            conversation=conversation,
            client_message_id="q",
            text="Can I return an opened item?",
            emit=Recorder(),
        )
    assert outcome.reply.kind == Message.Kind.EXTRACTIVE
    sent = _statements(ctx)
    assert len(sent) <= EXTRACTIVE_TURN_QUERIES, "\n".join(s[:120] for s in sent)


def test_an_answer_that_waits_on_no_model_goes_from_searching_to_answered(warm, conversation):
    with CaptureQueriesContext(connection) as ctx:
        warm(conversation=conversation, client_message_id="s", text="Can I return an opened item?")
    states = [s for s in _statements(ctx) if 'SET "state" = ' in s]
    assert ["searching" in states[0], "answered" in states[-1]] == [True, True]
    assert not any("'answering'" in s for s in states)
