import pytest

from inference.structured import InvalidStructuredOutput, json_schema_format, parse_structured

SCHEMA = {
    "type": "object",
    "properties": {
        "tool": {"type": "string", "enum": ["check_order", "none"]},
        "order_id": {"type": "string", "pattern": "^[A-Z]-[0-9]{4}$"},
    },
    "required": ["tool", "order_id"],
    "additionalProperties": False,
}


def test_valid_proposal_is_returned():
    value = parse_structured('{"tool": "check_order", "order_id": "A-1042"}', schema=SCHEMA)
    assert value == {"tool": "check_order", "order_id": "A-1042"}


@pytest.mark.parametrize(
    "text",
    [
        '{"tool": "refund_all", "order_id": "A-1042"}',
        '{"tool": "check_order", "order_id": "1042; DROP"}',
        '{"tool": "check_order"}',
        '{"tool": "check_order", "order_id": "A-1042", "amount": 5}',
    ],
)
def test_schema_violations_are_rejected(text):
    with pytest.raises(InvalidStructuredOutput, match="schema violation"):
        parse_structured(text, schema=SCHEMA)


def test_invalid_json_and_truncation_are_rejected():
    with pytest.raises(InvalidStructuredOutput, match="not JSON"):
        parse_structured('{"tool": "check_order", "order_', schema=SCHEMA)
    with pytest.raises(InvalidStructuredOutput, match="cut off"):
        parse_structured(
            '{"tool": "none", "order_id": "A-1042"}', schema=SCHEMA, finish_reason="length"
        )


def test_response_format_wraps_a_checked_schema():
    fmt = json_schema_format(name="tool_proposal", schema=SCHEMA)
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"] == SCHEMA
    with pytest.raises(Exception, match="is not valid"):
        json_schema_format(name="bad", schema={"type": "no-such-type"})
