from django.db import migrations

import supportbot.fields
from supportbot import encryption


def seal_rows(apps, schema_editor):
    encryption.seal_existing_rows(
        schema_editor.connection, table="supportbot_idempotencykey", columns=["response_body"]
    )


def open_rows(apps, schema_editor):
    encryption.open_existing_rows(
        schema_editor.connection, table="supportbot_idempotencykey", columns=["response_body"]
    )


class Migration(migrations.Migration):
    dependencies = [
        ("supportbot", "0006_audit_refuses_truncate"),
    ]

    operations = [
        migrations.AlterField(
            model_name="idempotencykey",
            name="response_body",
            field=supportbot.fields.EncryptedJSONField(blank=True, null=True),
        ),
        migrations.RunPython(seal_rows, open_rows),
    ]
