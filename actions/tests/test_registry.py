import pytest
from jsonschema import Draft202012Validator

from actions import crypto, intents, registry
from actions.models import ProviderConfig
from actions.services import provider_config_set


def test_response_format_accepts_the_models_flat_proposal():
    fmt = registry.proposal_response_format()
    assert fmt["type"] == "json_schema"
    schema = fmt["json_schema"]["schema"]
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    assert validator.is_valid({"tool": "check_order", "order_id": "A-1042"})
    assert validator.is_valid(
        {"tool": "request_refund", "order_id": "A-1042", "amount": 40.0, "reason": "broken"}
    )
    assert validator.is_valid({"tool": "none"})
    assert not validator.is_valid({"tool": "request_refund", "order_id": "A-1042"})
    assert not validator.is_valid({"tool": "delete_everything"})


def test_proposal_parse_splits_tool_and_arguments():
    assert registry.proposal_parse('{"tool": "check_order", "order_id": "A-1"}') == (
        "check_order",
        {"order_id": "A-1"},
    )
    assert registry.proposal_parse({"tool": "none"}) is None
    with pytest.raises(registry.ArgumentsInvalid):
        registry.proposal_parse("not json")


@pytest.mark.parametrize(
    ("text", "tool", "arguments", "follow_up"),
    [
        ("Where is my order A-1042?", "check_order", {"order_id": "A-1042"}, None),
        ("where is a-1042", "check_order", {"order_id": "A-1042"}, None),
        (
            "Please refund $40 for order A-1042",
            "request_refund",
            {
                "order_id": "A-1042",
                "amount": 40.0,
                "currency": "USD",
                "reason": "Customer asked for a refund in chat.",
            },
            None,
        ),
        (
            "I want my money back for A-1042, 19.99 dollars",
            "request_refund",
            {
                "order_id": "A-1042",
                "amount": 19.99,
                "currency": "USD",
                "reason": "Customer asked for a refund in chat.",
            },
            None,
        ),
        ("Refund order A-1042 please", "check_order", {"order_id": "A-1042"}, "ask_refund_amount"),
    ],
)
def test_intents_propose_deterministically(text, tool, arguments, follow_up):
    proposal = intents.propose_from_text(text)
    assert proposal.tool == tool
    assert proposal.arguments == arguments
    assert proposal.follow_up == follow_up
    assert proposal.source == "intent"


@pytest.mark.parametrize("text", ["How do returns work?", "I want a refund"])
def test_intents_propose_nothing_without_an_order_id(text):
    assert intents.propose_from_text(text) is None


def test_two_orders_in_one_refund_request_are_asked_back():
    asked = intents.propose_from_text("refund A-1042 and A-1043 for $10")
    assert isinstance(asked, intents.Clarify)
    assert asked.code == "which_order"


def test_provider_credentials_are_encrypted_at_rest(tenant):
    provider_config_set(tenant=tenant, base_url="http://127.0.0.1:1", token="s3cret-token")
    stored = ProviderConfig.objects.get(tenant=tenant).credentials_encrypted
    assert "s3cret-token" not in stored
    assert crypto.decrypt(stored) == "s3cret-token"


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("where is my order A-1042?", "check_order"),
        ("A-1042", "check_order"),
        ("tracking for A-1042 hasn't moved in a week", "check_order"),
        ("how do I start a return for order A-1042", None),
        ("what's the status of claim W-20931", None),
        ("refund $40 for A-1042 please", "request_refund"),
    ],
)
def test_order_ids_route_to_the_order_tool_only_for_status_or_refunds(text, tool):
    proposal = intents.propose_from_text(text)
    assert (proposal.tool if proposal else None) == tool
