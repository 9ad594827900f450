"""Scrub free text out of audit rows written before audit data held ids and codes only.

Handoff requests copied the customer's words (`detail`), approvals and denials the agent's
reason, rejected proposals the model's tool name and the schema's message, failed refunds the
order system's detail. Those keys are dropped (ids, counts and codes stay), so an erased
customer leaves nothing readable in the append-only trail. The append-only trigger is
disabled for this one UPDATE, inside the migration's transaction (the owner runs migrations).
"""

from django.db import migrations

# Keys that held free text, by the events that wrote them.
FREE_TEXT_KEYS = {
    "handoff.requested": ["detail"],
    "action.proposal_rejected": ["detail"],
    "action.decision_refused": ["detail"],
    "action.approved": ["reason"],
    "action.denied": ["reason"],
    "action.unknown": ["detail"],
    "action.failed": ["detail"],
}
KNOWN_TOOLS = ["check_order", "request_refund"]
# A field name of a tool's schema (or "tool"); anything else came from the model's output.
FIELD_RE = "^[a-z_][a-z0-9_]{0,49}$"
CODE_RE = "^[A-Za-z0-9_.:-]{1,64}$"


def _statements() -> list[tuple[str, list]]:
    out = []
    for action, keys in FREE_TEXT_KEYS.items():
        out.append(
            (
                "UPDATE supportbot_auditevent SET data = data - %s::text[] WHERE action = %s AND data ?| %s",
                [keys, action, keys],
            )
        )
    out += [
        # The model's tool name only when it names a real tool.
        (
            "UPDATE supportbot_auditevent SET data = jsonb_set(data, '{tool}', '\"unknown\"') "
            "WHERE action = 'action.proposal_rejected' AND data ? 'tool' "
            "AND NOT (data->>'tool' = ANY(%s))",
            [KNOWN_TOOLS],
        ),
        (
            "UPDATE supportbot_auditevent SET data = jsonb_set(data, '{field}', 'null') "
            "WHERE action = 'action.proposal_rejected' AND jsonb_typeof(data->'field') = 'string' "
            "AND data->>'field' !~ %s",
            [FIELD_RE],
        ),
        # The order system's error codes, which were copied as they came.
        (
            "UPDATE supportbot_auditevent SET data = jsonb_set(data, '{code}', '\"other\"') "
            "WHERE action LIKE 'action.%%' AND jsonb_typeof(data->'code') = 'string' "
            "AND data->>'code' !~ %s",
            [CODE_RE],
        ),
    ]
    return out


def audit_scrub_free_text(apps, schema_editor) -> None:
    """Drop the free-text keys of existing audit rows (idempotent)."""
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        # ALTER TABLE refuses while deferred foreign-key checks of earlier writes are queued.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(
            "ALTER TABLE supportbot_auditevent DISABLE TRIGGER supportbot_auditevent_append_only"
        )
        for sql, params in _statements():
            cursor.execute(sql, params)
        cursor.execute(
            "ALTER TABLE supportbot_auditevent ENABLE TRIGGER supportbot_auditevent_append_only"
        )


class Migration(migrations.Migration):
    dependencies = [("supportbot", "0008_merge_20261201_1324")]

    operations = [
        migrations.RunPython(audit_scrub_free_text, migrations.RunPython.noop, elidable=False),
    ]
