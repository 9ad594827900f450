from django.db import migrations

# Row triggers never fire for TRUNCATE: a statement trigger refuses it too. Only a superuser
# (who could drop the trigger anyway: the test runner's flush, a DBA) is let through; the app
# connects as a role that is none (supportbot/dbroles.py).
GUARD = """
CREATE OR REPLACE FUNCTION supportbot_audit_no_truncate() RETURNS trigger AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'audit events are append-only (% refused)', TG_OP;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER supportbot_auditevent_no_truncate
    BEFORE TRUNCATE ON supportbot_auditevent
    FOR EACH STATEMENT EXECUTE FUNCTION supportbot_audit_no_truncate();
"""
UNGUARD = """
DROP TRIGGER IF EXISTS supportbot_auditevent_no_truncate ON supportbot_auditevent;
DROP FUNCTION IF EXISTS supportbot_audit_no_truncate();
"""


class Migration(migrations.Migration):
    dependencies = [("supportbot", "0005_retention_and_data_keys")]

    operations = [migrations.RunSQL(GUARD, UNGUARD)]
