"""Every event a client receives is built here, from one schema; every conversation event goes
through the conversation's channel-layer group.

- `schema`: the one schema (`SCHEMA`), each event's fields and route; `_event` refuses a
  payload that does not match its entry, so a builder cannot drift from the schema, and no
  other module writes an event dict (`conversations/tests/test_events.py` checks both, and
  the schema against the document).
- `builders`: one builder per event (`message_created`, `answer_completed`, `error`, ...).
- `routing`: the conversation's group, the group message envelope, and what the customer's
  connection (`for_customer`) and the agents' console (`for_console`) make of it.
- `publish`: sending through the channel layer, now or once the transaction commits.

One wire name per saved message, for customers and agents alike (`message_saved` decides it):
a bot answer is `answer.completed`, an agent's message `agent.message`, any other message
`message.created`. The console gets the same events under the same names as the customer,
each stamped with its `conversation_id` (`docs/console-events.md`).
"""

from conversations.events.builders import (
    action_proposed,
    action_updated,
    agent_message,
    answer_completed,
    answer_delta,
    answer_pending,
    answer_queued,
    answer_revised,
    answer_started,
    error,
    feedback_saved,
    handoff_contact_saved,
    handoff_started,
    identity_expired,
    message_accepted,
    message_created,
    message_saved,
    owner_changed,
    pong,
    rate_limited,
    session_ready,
)
from conversations.events.publish import notify_group_on_commit, publish, publish_on_commit
from conversations.events.routing import (
    GROUP_MESSAGE_TYPE,
    _group_message,
    console_queue_group,
    conversation_group,
    for_console,
    for_customer,
)
from conversations.events.schema import SCHEMA, EventSpec, _event

__all__ = [
    "GROUP_MESSAGE_TYPE",
    "SCHEMA",
    "EventSpec",
    "_event",
    "_group_message",
    "action_proposed",
    "action_updated",
    "agent_message",
    "answer_completed",
    "answer_delta",
    "answer_pending",
    "answer_queued",
    "answer_revised",
    "answer_started",
    "console_queue_group",
    "conversation_group",
    "error",
    "feedback_saved",
    "for_console",
    "for_customer",
    "handoff_contact_saved",
    "handoff_started",
    "identity_expired",
    "message_accepted",
    "message_created",
    "message_saved",
    "notify_group_on_commit",
    "owner_changed",
    "pong",
    "publish",
    "publish_on_commit",
    "rate_limited",
    "session_ready",
]
