"""Each document version keeps its own audience; existing versions get the document's."""

import django.contrib.postgres.fields
from django.db import migrations, models


def versions_take_document_audience(apps, schema_editor):
    Document = apps.get_model("knowledge", "Document")
    DocumentVersion = apps.get_model("knowledge", "DocumentVersion")
    document_audience = Document.objects.filter(pk=models.OuterRef("document_id"))
    DocumentVersion.objects.update(
        audience=models.Subquery(document_audience.values("audience")[:1]),
        segments=models.Subquery(document_audience.values("segments")[:1]),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0002_sweeper_schedule"),
    ]

    operations = [
        migrations.AddField(
            model_name="documentversion",
            name="audience",
            field=models.CharField(
                choices=[
                    ("public", "Public (every customer)"),
                    ("segments", "Customers in the listed segments (and agents)"),
                    ("agents", "Agents only"),
                ],
                default="agents",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="documentversion",
            name="segments",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=50), blank=True, default=list, size=None
            ),
        ),
        migrations.RunPython(versions_take_document_audience, migrations.RunPython.noop),
    ]
