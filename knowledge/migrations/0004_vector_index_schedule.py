from django.db import migrations

NAME = "knowledge: per-tenant vector indexes"


def add_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={
            "func": "knowledge.tasks.tenant_vector_indexes_sweep_task",
            "schedule_type": "I",
            "minutes": 10,
            "repeats": -1,
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0003_search_budget")]

    operations = [migrations.RunPython(add_schedule, remove_schedule)]
