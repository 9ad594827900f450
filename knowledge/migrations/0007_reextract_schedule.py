from django.db import migrations

NAME = "knowledge: re-index documents an older extractor made"


def add_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={
            "func": "knowledge.tasks.documents_reextract_outdated_task",
            "schedule_type": "D",
            "repeats": -1,
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0006_extractor_version")]

    operations = [migrations.RunPython(add_schedule, remove_schedule)]
