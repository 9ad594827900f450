from django.db import migrations

NAME = "conversations: erase conversations past their tenant's retention"


def add_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={
            "func": "conversations.tasks.retention_sweep_task",
            "schedule_type": "H",
            "repeats": -1,
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [("conversations", "0003_encrypt_text")]

    operations = [migrations.RunPython(add_schedule, remove_schedule)]
