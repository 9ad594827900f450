from django.db import migrations

import supportbot.fields
from supportbot import encryption

TABLES = {
    "conversations_conversation": ["summary"],
    "conversations_feedback": ["comment"],
    "conversations_message": ["text"],
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
        ("conversations", "0002_unanswered_sweep_schedule"),
        ("supportbot", "0005_retention_and_data_keys"),
    ]

    operations = [
        migrations.AlterField(
            model_name="conversation",
            name="summary",
            field=supportbot.fields.EncryptedTextField(blank=True),
        ),
        migrations.AlterField(
            model_name="feedback",
            name="comment",
            field=supportbot.fields.EncryptedTextField(blank=True),
        ),
        migrations.AlterField(
            model_name="message",
            name="text",
            field=supportbot.fields.EncryptedTextField(),
        ),
        migrations.RunPython(seal_rows, open_rows),
    ]
