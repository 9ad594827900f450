"""The tools the bot may propose: name, JSON schema of the arguments, risk class, permission
check and provider call. Server code validates every proposal against these; the model's output
is only ever a proposal."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from jsonschema import Draft202012Validator

from actions.models import ActionRequest
from actions.providers import OrderProvider
from conversations.models import Customer

ORDER_ID_PATTERN = r"^[A-Za-z]-\d{3,8}$"
MAX_REFUND = 100000
FULL_AMOUNT = "full"


class ArgumentsInvalid(ValueError):
    """The arguments do not fit the tool (the message says which field and why)."""

    def __init__(self, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    schema: dict[str, Any]
    risk: str
    # Fields that define the tool's effect: they (normalized) make the retry key.
    key_fields: tuple[str, ...]
    normalize: Callable[[dict[str, Any]], dict[str, Any]]
    call: Callable[[OrderProvider, dict[str, Any], str], dict[str, Any]]
    # Find what an earlier call committed under the retry key (None: the tool has no lookup).
    lookup: Callable[[OrderProvider, str], dict[str, Any] | None] | None = None

    def permission(self, customer: Customer) -> str | None:
        """Why `customer` may not use this tool (an error code), or None if they may."""
        if not customer.verified or not customer.external_id:
            return "sign_in_required"
        return None

    def validate(self, arguments: Any) -> dict[str, Any]:
        """Check `arguments` against the schema and return them normalized."""
        if not isinstance(arguments, dict):
            raise ArgumentsInvalid("Arguments must be a JSON object.")
        errors = sorted(
            Draft202012Validator(self.schema).iter_errors(arguments), key=lambda e: e.path
        )
        if errors:
            first = errors[0]
            field = ".".join(str(p) for p in first.path) or None
            if first.validator == "required":
                field = first.message.split("'")[1] if "'" in first.message else field
            raise ArgumentsInvalid(first.message, field=field)
        return self.normalize(arguments)

    @property
    def is_write(self) -> bool:
        return self.risk != ActionRequest.Risk.READ

    def key_arguments(self, normalized: dict[str, Any]) -> str:
        return json.dumps({k: normalized[k] for k in self.key_fields}, sort_keys=True)


def _order_id(value: str) -> str:
    return value.strip().upper()


def _money(value: Any) -> Decimal:
    try:
        amount = Decimal(str(value))
    except InvalidOperation as exc:
        raise ArgumentsInvalid("amount is not a number.", field="amount") from exc
    if not amount.is_finite() or amount <= 0:
        raise ArgumentsInvalid("amount must be greater than 0.", field="amount")
    if amount != amount.quantize(Decimal("0.01")):
        raise ArgumentsInvalid("amount has more than two decimals.", field="amount")
    return amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def _normalize_check_order(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"order_id": _order_id(arguments["order_id"])}


def _normalize_refund(arguments: dict[str, Any]) -> dict[str, Any]:
    amount = arguments["amount"]
    return {
        "order_id": _order_id(arguments["order_id"]),
        # "full": the order's refundable amount, read from the provider when it is checked.
        "amount": FULL_AMOUNT if amount == FULL_AMOUNT else f"{_money(amount):.2f}",
        "currency": arguments.get("currency", "USD"),
        "reason": " ".join(arguments["reason"].split())[:500],
    }


def _call_check_order(provider: OrderProvider, arguments: dict[str, Any], key: str) -> dict:
    return provider.get_order(arguments["order_id"]) or {}


def _call_refund(provider: OrderProvider, arguments: dict[str, Any], key: str) -> dict:
    return provider.create_refund(
        order_id=arguments["order_id"],
        amount=Decimal(arguments["amount"]),
        reason=arguments["reason"],
        idempotency_key=key,
    )


_ORDER_ID = {"type": "string", "pattern": ORDER_ID_PATTERN, "description": "e.g. A-1042"}

TOOLS: dict[str, Tool] = {
    "check_order": Tool(
        name="check_order",
        description="Look up the status and details of one of the customer's orders.",
        schema={
            "type": "object",
            "properties": {"order_id": _ORDER_ID},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        risk=ActionRequest.Risk.READ,
        key_fields=("order_id",),
        normalize=_normalize_check_order,
        call=_call_check_order,
    ),
    "request_refund": Tool(
        name="request_refund",
        description="Refund (part of) one of the customer's delivered orders.",
        schema={
            "type": "object",
            "properties": {
                "order_id": _ORDER_ID,
                # A JSON number (strings other than "full", booleans and nulls are wrong
                # types), or "full": the order's refundable amount.
                "amount": {
                    "anyOf": [
                        {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_REFUND},
                        {"const": FULL_AMOUNT},
                    ]
                },
                "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "reason": {"type": "string", "minLength": 1, "maxLength": 500},
            },
            "required": ["order_id", "amount", "reason"],
            "additionalProperties": False,
        },
        risk=ActionRequest.Risk.HIGH,
        # `reason` is free text: rewording it must not make a second refund.
        key_fields=("order_id", "amount"),
        normalize=_normalize_refund,
        call=_call_refund,
        lookup=lambda provider, key: provider.find_refund(idempotency_key=key),
    ),
}


def tool_get(name: str) -> Tool | None:
    return TOOLS.get(name) if isinstance(name, str) else None


def proposal_response_format() -> dict[str, Any]:
    """OpenAI `response_format` for the model's tool proposal (guided decoding in vLLM).

    The model answers one flat object: `{"tool": "check_order", "order_id": "A-1042"}`,
    `{"tool": "request_refund", "order_id": …, "amount": 40.0, "reason": …}` or
    `{"tool": "none"}`. Split it with `proposal_parse` and pass it to `action_propose`, which
    validates everything again.
    """

    def model_properties(tool: Tool) -> dict[str, Any]:
        properties = dict(tool.schema["properties"])
        properties.pop("currency", None)
        if "amount" in properties:  # the model states a figure, never "full"
            properties["amount"] = {"type": "number", "exclusiveMinimum": 0}
        return properties

    variants = [
        {
            "type": "object",
            "properties": {"tool": {"const": tool.name}, **model_properties(tool)},
            "required": ["tool", *tool.schema["required"]],
            "additionalProperties": False,
        }
        for tool in TOOLS.values()
    ]
    variants.append(
        {
            "type": "object",
            "properties": {"tool": {"const": "none"}},
            "required": ["tool"],
            "additionalProperties": False,
        }
    )
    return {
        "type": "json_schema",
        "json_schema": {"name": "tool_proposal", "strict": True, "schema": {"anyOf": variants}},
    }


def proposal_parse(payload: Any) -> tuple[str, dict[str, Any]] | None:
    """Split the model's flat proposal into (tool, arguments); None for `{"tool": "none"}`.

    No validation happens here beyond the shape: `action_propose` validates the arguments.
    """
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except ValueError as exc:
            raise ArgumentsInvalid("The proposal is not JSON.") from exc
    if not isinstance(payload, dict) or "tool" not in payload:
        raise ArgumentsInvalid("The proposal must be an object with a 'tool'.", field="tool")
    tool = payload["tool"]
    if tool == "none":
        return None
    return tool, {k: v for k, v in payload.items() if k != "tool"}
