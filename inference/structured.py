"""Structured output (tool proposals): request a JSON schema, then validate what came back.

vLLM's guided decoding makes the model emit JSON matching the schema, but the server still
validates every field: a truncated answer (`finish_reason == "length"`), invalid JSON or a
schema violation raises `InvalidStructuredOutput` and nothing is acted on.
"""

from __future__ import annotations

import json

import jsonschema

from inference.errors import InferenceError


class InvalidStructuredOutput(InferenceError):
    status = 502
    code = "inference_invalid_structured_output"


def json_schema_format(*, name: str, schema: dict) -> dict:
    """The `response_format` asking vLLM for output matching `schema` (checked to be valid)."""
    jsonschema.Draft202012Validator.check_schema(schema)
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def parse_structured(text: str, *, schema: dict, finish_reason: str | None = None) -> dict:
    """Parse and validate a structured answer; raise InvalidStructuredOutput if it is unusable."""
    if finish_reason == "length":
        raise InvalidStructuredOutput("structured output was cut off at max_tokens")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidStructuredOutput(f"not JSON: {exc.msg} at {exc.pos}") from exc
    try:
        jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)
    except jsonschema.ValidationError as exc:
        path = "/".join(str(p) for p in exc.absolute_path)
        raise InvalidStructuredOutput(f"schema violation at '{path}': {exc.message}") from exc
    return value
