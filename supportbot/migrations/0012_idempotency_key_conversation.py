"""Saved partner responses name their conversation, so erasure finds them by index.

Rows saved before (kept 24 hours) are linked from their path: `/api/v1/conversations/<id>/…`,
`/api/v1/messages/<id>/feedback` (through the message), and a `POST /api/v1/conversations`
by the id in its sealed body. A row that links to nothing stays unlinked and expires.
"""

import json
import re

from django.db import migrations, models

from supportbot import encryption

CONVERSATION_PATH = re.compile(r"^/api/v1/conversations/(\d+)(?:/|$)")
MESSAGE_PATH = re.compile(r"^/api/v1/messages/(\d+)(?:/|$)")
CONTEXT = "supportbot_idempotencykey.response_body"


def _conversation_of(connection, path: str, body: str | None) -> int | None:
    if match := CONVERSATION_PATH.match(path):
        return int(match.group(1))
    if match := MESSAGE_PATH.match(path):
        if "conversations_message" not in connection.introspection.table_names():
            return None
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT conversation_id FROM conversations_message WHERE id = %s",
                [int(match.group(1))],
            )
            row = cursor.fetchone()
        return row[0] if row else None
    if path.rstrip("/") == "/api/v1/conversations" and body:
        try:
            data = json.loads(encryption.unseal(body, context=CONTEXT))
        except (encryption.DecryptionError, ValueError):
            return None
        conversation_id = data.get("id") if isinstance(data, dict) else None
        return conversation_id if isinstance(conversation_id, int) else None
    return None


def link_saved_responses(apps, schema_editor) -> None:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, path, response_body FROM supportbot_idempotencykey "
            "WHERE conversation_id IS NULL"
        )
        rows = cursor.fetchall()
    for row_id, path, body in rows:
        conversation_id = _conversation_of(connection, path, body)
        if conversation_id is not None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE supportbot_idempotencykey SET conversation_id = %s WHERE id = %s",
                    [conversation_id, row_id],
                )


class Migration(migrations.Migration):
    dependencies = [("supportbot", "0011_audit_scrub_free_text")]

    operations = [
        migrations.AddField(
            model_name="idempotencykey",
            name="conversation_id",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="idempotencykey",
            index=models.Index(
                fields=["tenant", "conversation_id"], name="idempotency_conversation"
            ),
        ),
        migrations.RunPython(link_saved_responses, migrations.RunPython.noop),
    ]
