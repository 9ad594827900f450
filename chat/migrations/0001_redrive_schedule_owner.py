"""The re-drive of unfinished replies moved from conversations.tasks to chat.tasks."""

from django.db import migrations

NAME = "conversations: answer acknowledged messages left without a reply"
OLD = "conversations.tasks.unanswered_messages_sweep_task"
NEW = "chat.tasks.unanswered_messages_sweep_task"


def point_to_chat(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).update(func=NEW)


def point_to_conversations(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=NAME).update(func=OLD)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0002_unanswered_sweep_schedule")]

    operations = [migrations.RunPython(point_to_chat, point_to_conversations)]
