from django.db import migrations

import supportbot.fields
from supportbot import encryption


def seal_rows(apps, schema_editor):
    """Encrypt customers' names and emails written before."""
    encryption.seal_existing_rows(
        schema_editor.connection, table="conversations_customer", columns=["name", "email"]
    )


def open_rows(apps, schema_editor):
    encryption.open_existing_rows(
        schema_editor.connection, table="conversations_customer", columns=["name", "email"]
    )


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0004_retention_schedule"),
    ]

    operations = [
        migrations.AlterField(
            model_name="customer",
            name="email",
            field=supportbot.fields.EncryptedTextField(blank=True),
        ),
        migrations.AlterField(
            model_name="customer",
            name="name",
            field=supportbot.fields.EncryptedTextField(blank=True),
        ),
        migrations.RunPython(seal_rows, open_rows),
    ]
