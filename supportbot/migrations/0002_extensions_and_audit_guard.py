from django.contrib.postgres.operations import CreateExtension, TrigramExtension
from django.db import migrations

GUARD = """
CREATE OR REPLACE FUNCTION supportbot_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only (% refused)', TG_OP;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER supportbot_auditevent_append_only
    BEFORE UPDATE OR DELETE ON supportbot_auditevent
    FOR EACH ROW EXECUTE FUNCTION supportbot_audit_append_only();
"""
UNGUARD = """
DROP TRIGGER IF EXISTS supportbot_auditevent_append_only ON supportbot_auditevent;
DROP FUNCTION IF EXISTS supportbot_audit_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [("supportbot", "0001_initial")]

    operations = [
        CreateExtension("vector"),
        TrigramExtension(),
        migrations.RunSQL(GUARD, UNGUARD),
    ]
