from django.db import migrations

SCHEDULES = {
    "analytics: decide idle conversations' outcomes": (
        "analytics.tasks.outcomes_sweep_task",
        {"schedule_type": "I", "minutes": 5},
    ),
    "analytics: daily rollups of the recent days": (
        "analytics.tasks.rollups_recent_task",
        {"schedule_type": "H"},
    ),
}


def add_schedules(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    for name, (func, timing) in SCHEDULES.items():
        Schedule.objects.update_or_create(
            name=name, defaults={"func": func, "repeats": -1, **timing}
        )


def remove_schedules(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name__in=SCHEDULES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("analytics", "0001_initial"),
        (
            "django_q",
            "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more",
        ),
    ]

    operations = [migrations.RunPython(add_schedules, remove_schedules)]
