"""The OpenAPI 3.1 document of the reference order service, served at /openapi.json."""

_ERROR = {
    "type": "object",
    "required": ["error", "detail"],
    "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
}
_MONEY = {"type": "string", "pattern": r"^\d+\.\d{2}$", "examples": ["40.00"]}
_REFUND = {
    "type": "object",
    "required": ["id", "idempotency_key", "order_id", "amount", "currency", "status"],
    "properties": {
        "id": {"type": "string", "examples": ["rf_3f2a9c1d0e4b5a67"]},
        "idempotency_key": {"type": "string"},
        "order_id": {"type": "string"},
        "amount": _MONEY,
        "currency": {"type": "string", "examples": ["USD"]},
        "reason": {"type": "string"},
        "status": {"type": "string", "enum": ["succeeded"]},
        "created_at": {"type": "string", "format": "date-time"},
        "replayed": {"type": "boolean", "description": "True when this is a repeated request."},
    },
}


def _err(description: str) -> dict:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


OPENAPI = {
    "openapi": "3.1.0",
    "info": {
        "title": "Acme order service (Supportbot reference implementation)",
        "version": "1.0.0",
        "description": (
            "The order system a tenant exposes to Supportbot. Refunds are idempotent: a repeat "
            "of POST /refunds with the same Idempotency-Key returns the first result and status; "
            "the same key with a different body answers 422."
        ),
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {
            "Error": _ERROR,
            "Refund": _REFUND,
            "Order": {
                "type": "object",
                "required": ["id", "owner", "items", "status", "amount", "currency"],
                "properties": {
                    "id": {"type": "string", "pattern": r"^[A-Z]-\d{3,8}$"},
                    "owner": {"type": "string", "description": "The customer's external id."},
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "quantity": {"type": "integer"},
                                "unit_price": _MONEY,
                            },
                        },
                    },
                    "status": {
                        "type": "string",
                        "enum": ["processing", "shipped", "delivered", "cancelled"],
                    },
                    "amount": _MONEY,
                    "refunded_amount": _MONEY,
                    "currency": {"type": "string"},
                    "placed_at": {"type": "string", "format": "date-time"},
                    "delivered_at": {"type": ["string", "null"], "format": "date-time"},
                },
            },
        },
    },
    "security": [{"bearer": []}],
    "paths": {
        "/orders/{order_id}": {
            "get": {
                "summary": "Look up one order",
                "parameters": [
                    {
                        "name": "order_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {
                    "200": {
                        "description": "The order",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Order"}}
                        },
                    },
                    "401": _err("Missing or wrong token"),
                    "404": _err("No such order"),
                },
            }
        },
        "/refunds": {
            "post": {
                "summary": "Refund (part of) an order, once per Idempotency-Key",
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string", "maxLength": 200},
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["order_id", "amount"],
                                "properties": {
                                    "order_id": {"type": "string"},
                                    "amount": _MONEY,
                                    "reason": {"type": "string", "maxLength": 500},
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "201": {
                        "description": "Refund committed (or the first result, replayed)",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Refund"}}
                        },
                    },
                    "400": _err("Missing Idempotency-Key or malformed body"),
                    "401": _err("Missing or wrong token"),
                    "404": _err("No such order"),
                    "422": _err("Amount not allowed, or key reused with a different body"),
                },
            },
            "get": {
                "summary": "Find the refund made with an Idempotency-Key",
                "parameters": [
                    {
                        "name": "idempotency_key",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {
                    "200": {
                        "description": "Zero or one refund",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "results": {
                                            "type": "array",
                                            "items": {"$ref": "#/components/schemas/Refund"},
                                        }
                                    },
                                }
                            }
                        },
                    },
                    "401": _err("Missing or wrong token"),
                },
            },
        },
        "/admin/faults": {
            "put": {
                "summary": "Inject faults (tests): latency_ms, fail_count + fail_status "
                "(+ fail_method), commit_then_timeout_count + timeout_sleep_s",
                "responses": {"200": {"description": "The fault settings now in force"}},
            }
        },
        "/admin/requests": {
            "get": {
                "summary": "Requests received and refunds committed (tests count calls)",
                "responses": {"200": {"description": "requests and refunds"}},
            }
        },
        "/admin/reset": {
            "post": {
                "summary": "Forget refunds, requests and faults; re-seed the orders",
                "responses": {"200": {"description": "reset"}},
            }
        },
    },
}
