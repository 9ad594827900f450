from django.db import migrations, models

import supportbot.fields
from supportbot import encryption

TABLES = {"actions_actionrequest": ["arguments", "order_snapshot", "result"]}


def seal_rows(apps, schema_editor):
    """Encrypt the rows written before encryption at rest."""
    for table, columns in TABLES.items():
        encryption.seal_existing_rows(schema_editor.connection, table=table, columns=columns)


def open_rows(apps, schema_editor):
    for table, columns in TABLES.items():
        encryption.open_existing_rows(schema_editor.connection, table=table, columns=columns)


def fill_order_keys(apps, schema_editor):
    """Keyed hashes of the order ids (read from the still-plaintext jsonb arguments)."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, tenant_id, arguments->>'order_id' FROM actions_actionrequest "
            "WHERE arguments ? 'order_id'"
        )
        for row_id, tenant_id, order_id in cursor.fetchall():
            key = encryption.blind_index(tenant_id=tenant_id, purpose="order", value=order_id)
            cursor.execute(
                "UPDATE actions_actionrequest SET order_key = %s WHERE id = %s", [key, row_id]
            )
    encryption.settle_deferred_checks(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("actions", "0003_confirmation_dedupe_policy"),
        ("supportbot", "0005_retention_and_data_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="actionrequest",
            name="order_key",
            field=models.CharField(blank=True, db_index=True, default="", max_length=64),
        ),
        migrations.RunPython(fill_order_keys, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="actionrequest",
            name="arguments",
            field=supportbot.fields.EncryptedJSONField(default=dict),
        ),
        migrations.AlterField(
            model_name="actionrequest",
            name="order_snapshot",
            field=supportbot.fields.EncryptedJSONField(blank=True, default=dict),
        ),
        migrations.AlterField(
            model_name="actionrequest",
            name="result",
            field=supportbot.fields.EncryptedJSONField(blank=True, default=dict),
        ),
        migrations.RunPython(seal_rows, open_rows),
    ]
