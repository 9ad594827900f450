from django.db import migrations

import supportbot.fields
from supportbot import encryption

TABLES = {
    "handoffs_handoff": ["customer_email", "summary", "reason_detail"],
    "handoffs_internalnote": ["text"],
}


def seal_rows(apps, schema_editor):
    """Encrypt the rows written before encryption at rest."""
    for table, columns in TABLES.items():
        encryption.seal_existing_rows(schema_editor.connection, table=table, columns=columns)


def open_rows(apps, schema_editor):
    for table, columns in TABLES.items():
        encryption.open_existing_rows(schema_editor.connection, table=table, columns=columns)


class Migration(migrations.Migration):
    dependencies = [
        ("handoffs", "0003_escalation_schedule"),
        ("supportbot", "0005_retention_and_data_keys"),
    ]

    operations = [
        migrations.AlterField(
            model_name="handoff",
            name="reason_detail",
            field=supportbot.fields.EncryptedTextField(blank=True),
        ),
        migrations.AlterField(
            model_name="handoff",
            name="customer_email",
            field=supportbot.fields.EncryptedTextField(blank=True),
        ),
        migrations.AlterField(
            model_name="handoff",
            name="summary",
            field=supportbot.fields.EncryptedTextField(blank=True),
        ),
        migrations.AlterField(
            model_name="internalnote",
            name="text",
            field=supportbot.fields.EncryptedTextField(),
        ),
        migrations.RunPython(seal_rows, open_rows),
    ]
