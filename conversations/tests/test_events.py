"""Every client event is built in the events modules, from one schema that matches
docs/chat-protocol.md, and a saved message goes out under one wire name."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from conversations import events

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = (ROOT / "docs" / "chat-protocol.md").read_text()

# The modules allowed to write an event dict: the customer and console events (the
# conversations/events package), and the console queue's (handoffs/events.py, its own AST
# test: handoffs/tests/test_events.py).
EVENT_MODULES = ("conversations/events/", "handoffs/events.py")
# The benchmark's echo server: a stand-in that mimics a bare subset of the protocol (no
# product work, partial payloads) to measure the floor; it is never served by the product.
STAND_INS = {"bench/echo.py"}
SKIPPED_DIRS = {"tests", "migrations", "__pycache__"}


# --------------------------------------------------------------------------- the document


def _section(title: str) -> str:
    return PROTOCOL.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _documented_fields(cell: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(fields, optional fields `name`?) of a table cell; prose after `—` or `name`: and
    anything in parentheses or braces explains, it names no field."""
    previous = None
    while previous != cell:
        previous, cell = cell, re.sub(r"\([^()]*\)|\{[^{}]*\}", "", cell)
    cell = cell.split(" — ", 1)[0]
    cell = re.split(r"(?<=`):\s", cell, maxsplit=1)[0]
    found = re.findall(r"`([a-z_]+)\s*`(\??)", cell)
    return (
        tuple(name for name, mark in found if not mark),
        tuple(name for name, mark in found if mark),
    )


def documented_server_events() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Server -> client events of the protocol: name -> (fields, optional fields)."""
    table = PROTOCOL.split("## Server → client\n", 1)[1].split("\nError codes", 1)[0]
    rows = re.findall(r"^\| `([a-z_.]+)` \| (.*) \|$", table, flags=re.MULTILINE)
    documented = {name: _documented_fields(cell) for name, cell in rows}
    for name in re.findall(r"answered with `([a-z_.]+)`", PROTOCOL):
        documented[name] = ((), ())  # `ping` is answered with a bare `pong`
    return documented


def _documented_route_names(pattern: str) -> list[str]:
    listed = re.search(pattern, PROTOCOL, flags=re.DOTALL)
    assert listed, pattern
    return re.findall(r"`([a-z_.*]+)`", listed.group(1))


DOCUMENTED = documented_server_events()


def test_the_protocol_document_is_parsed():
    assert len(DOCUMENTED) >= 18, DOCUMENTED
    assert DOCUMENTED["error"] == (
        ("code", "detail"),
        ("field", "client_message_id", "action_id", "state", "current_version"),
    )
    assert DOCUMENTED["answer.pending"] == (("reply_to",), ())
    assert DOCUMENTED["session.ready"][0][-4:] == ("owner", "handoff", "history", "actions")


# --------------------------------------------------------------------------- the schema


def test_every_documented_server_event_has_one_schema_entry_and_a_builder():
    assert set(events.SCHEMA) == set(DOCUMENTED)
    assert [name for name, spec in events.SCHEMA.items() if spec.builder is None] == []


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_the_schema_holds_the_documented_fields(name):
    spec = events.SCHEMA[name]
    assert (spec.fields, spec.optional) == DOCUMENTED[name]
    assert not set(spec.extra) & set(spec.fields + spec.optional)


def test_each_event_takes_the_documented_route():
    direct = _documented_route_names(r"sent to it directly \((.*?)\)\.")
    group = _documented_route_names(r"Every conversation event \((.*?)\) goes through")
    assert {name: events.SCHEMA[name].route for name in direct} == dict.fromkeys(direct, "direct")
    for pattern in group:
        matched = [
            n
            for n in events.SCHEMA
            if re.fullmatch(pattern.replace("*", ".*"), n) and n not in direct  # answer.pending
        ]
        assert matched, pattern
        assert {events.SCHEMA[n].route for n in matched} == {"group"}, pattern


MESSAGE = {
    "id": 6,
    "conversation_id": 7,
    "role": "bot",
    "kind": "answer",
    "text": "Refunds take 5-10 business days [1].",
    "reply_to": 5,
    "citations": [],
}
# Every argument of every builder, optional ones included.
SAMPLES = {
    "session.ready": {
        "tenant": {"slug": "acme", "name": "Acme"},
        "conversation_id": 7,
        "visitor_token": "v",
        "identity_session": None,
        "identity_expires_at": None,
        "customer": {"verified": False, "name": ""},
        "owner": "bot",
        "handoff": None,
        "history": [],
        "actions": [],
    },
    "message.accepted": {"client_message_id": "c1", "message": MESSAGE, "duplicate": False},
    "answer.started": {"reply_to": 5, "message_id": 6},
    "answer.delta": {"message_id": 6, "text": "Refunds take"},
    "answer.revised": {"message_id": 6, "text": "“Refunds…” [1]", "citations": []},
    "answer.completed": {"message": MESSAGE},
    "answer.pending": {"reply_to": 5, "message_id": 6},
    "answer.queued": {"reply_to": 5, "position": 2, "wait_seconds": 7},
    "handoff.started": {
        "handoff": SimpleNamespace(pk=3, reason="customer_request"),
        "position": SimpleNamespace(
            position=1, estimated_wait_minutes=4, agents_online=1, ask_for_email=False
        ),
    },
    "handoff.contact_saved": {"email": "dana@example.com"},
    "action.proposed": {"card": {"id": 2, "version": 1}},
    "action.updated": {"card": {"id": 2, "version": 2}},
    "agent.message": {"message": {**MESSAGE, "role": "agent"}},
    "message.created": {"message": {**MESSAGE, "role": "customer"}},
    "conversation.owner": {"owner": "human", "version": 2},
    "feedback.saved": {"message_id": 6, "rating": "helpful"},
    "rate_limited": {
        "limit": "message_customer",
        "retry_after": 30,
        "detail": "Too many messages.",
        "event_type": "message.send",
        "client_message_id": "c1",
        "ref": "r1",
    },
    "identity.expired": {},
    "error": {
        "code": "stale_version",
        "detail": "Stale.",
        "field": "version",
        "client_message_id": "c1",
        "action_id": 2,
        "state": "proposed",
        "current_version": 3,
        "ref": "r1",
    },
    "pong": {},
}


def _positional(name: str, kwargs: dict) -> tuple[tuple, dict]:
    """Builders of one object (a message, a card) take it positionally."""
    if name in ("answer.completed", "agent.message", "message.created"):
        return (kwargs["message"],), {}
    if name in ("action.proposed", "action.updated"):
        return (kwargs["card"],), {}
    return (), kwargs


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_each_builder_emits_exactly_the_documented_payload(name):
    spec = events.SCHEMA[name]
    args, kwargs = _positional(name, SAMPLES[name])
    event = spec.builder(*args, **kwargs)
    assert event["type"] == name
    fields, optional = DOCUMENTED[name]
    assert set(fields) <= event.keys() - {"type"} <= set(fields + optional + spec.extra)


def test_a_payload_that_drifts_from_the_schema_is_refused():
    with pytest.raises(ValueError, match=r"answer.delta: missing \['text'\]"):
        events._event("answer.delta", message_id=6)
    with pytest.raises(ValueError, match=r"unknown \['reason'\]"):
        events._event("feedback.saved", message_id=6, rating="helpful", reason="x")


def test_optional_fields_without_a_value_are_left_out():
    assert events.error(code="internal", detail="Oops.", field=None, ref=None) == {
        "type": "error",
        "code": "internal",
        "detail": "Oops.",
    }
    assert events.answer_pending(reply_to=5) == {"type": "answer.pending", "reply_to": 5}


# --------------------------------------------------------------------------- one wire name


@pytest.mark.parametrize(
    ("role", "name"),
    [("agent", "agent.message"), ("customer", "message.created"), ("system", "message.created")],
)
def test_a_saved_message_goes_out_under_one_name(role, name):
    assert events.message_saved({**MESSAGE, "role": role})["type"] == name


def test_a_bot_answer_is_not_announced_as_a_saved_message():
    with pytest.raises(ValueError, match="answer.completed"):
        events.message_saved(MESSAGE)


def test_the_customer_gets_every_event_but_the_echo_of_its_own_message():
    created = events.message_saved({**MESSAGE, "role": "customer"})
    own = events._group_message(created, "chan-1", 7)
    assert events.for_customer(own, "chan-1") is None
    assert events.for_customer(own, "chan-2") == created
    agent = events.message_saved({**MESSAGE, "role": "agent"})
    assert events.for_customer(events._group_message(agent, None, 7), "chan-1") == agent


def test_the_console_gets_the_customers_event_under_the_same_name_with_its_conversation():
    for event in (
        events.message_saved({**MESSAGE, "role": "agent"}),
        events.answer_completed(MESSAGE),
    ):
        group_message = events._group_message(event, None, 7)
        assert events.for_console(group_message, viewing_conversation_id=7) == {
            **event,
            "conversation_id": 7,
        }
        assert events.for_console(group_message, viewing_conversation_id=8) is None


# --------------------------------------------------------------------------- no inline events


def _client_to_server_names() -> set[str]:
    return set(re.findall(r"^\| `([a-z_.]+)` \|", _section("Client → server"), re.MULTILINE)) | {
        "presence.ping"  # the console's heartbeat (docs/console-events.md)
    }


def _is_event_name(value: str, inbound: set[str]) -> bool:
    """A server -> client event name: one of the schema, the group envelope, or any dotted
    name (`x.y`) that is not an inbound one (JSON-schema `type`s are never dotted)."""
    if value in inbound:
        return False
    return (
        value in events.SCHEMA
        or value == events.GROUP_MESSAGE_TYPE
        or re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", value) is not None
    )


def inline_events(source: str, inbound: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every dict literal whose "type" names an event."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and key.value == "type"
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
                and _is_event_name(value.value, inbound)
            ):
                found.append((node.lineno, value.value))
    return found


def _product_modules():
    for package in sorted(p for p in ROOT.iterdir() if (p / "__init__.py").exists()):
        for path in sorted(package.rglob("*.py")):
            relative = path.relative_to(ROOT)
            if not SKIPPED_DIRS & set(relative.parts[:-1]):
                yield relative.as_posix(), path


def test_the_scan_finds_an_inline_event_dict():
    source = (
        'a = {"type": "feedback.saved", "message_id": 1}\n'
        'b = {"type": "widget.opened"}\n'
        'c = {"type": "object", "properties": {}}\n'
        'd = {"type": "message.send", "text": "hi"}\n'
    )
    assert inline_events(source, _client_to_server_names()) == [
        (1, "feedback.saved"),
        (2, "widget.opened"),
    ]


def test_no_client_event_is_built_outside_the_events_modules():
    inbound = _client_to_server_names()
    offenders = [
        f"{relative}:{line} {name}"
        for relative, path in _product_modules()
        if not relative.startswith(EVENT_MODULES) and relative not in STAND_INS
        for line, name in inline_events(path.read_text(), inbound)
    ]
    assert offenders == [], "build these with a builder in conversations/events/builders.py"
