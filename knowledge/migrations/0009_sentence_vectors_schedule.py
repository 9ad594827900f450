from django.db import migrations

NAME = "knowledge: sentence vectors of passages indexed without them"


def add_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=NAME,
        defaults={
            "func": "knowledge.tasks.chunks_sentence_vectors_fill_task",
            "schedule_type": "H",
            "repeats": -1,
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0008_chunk_sentence_vectors"), ("django_q", "0001_initial")]

    operations = [migrations.RunPython(add_schedule, remove_schedule)]
