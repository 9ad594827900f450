"""A tenant admin changes the policies in Chromium: a bad value comes back on the form, a good
save shows its fields and lands in the audit trail with old and new values."""

import json

import pytest

pytestmark = pytest.mark.browser
SCREENSHOT = "docs/screenshots/console-policies.png"


def test_an_admin_changes_a_policy_and_sees_a_bad_value_refused(live_stack, browser, csp):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = csp.watch(context.new_page())
    page.goto(f"{live_stack.url}/console/login/?next=/console/policies/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", live_stack.logins()["admin"])
    page.click("button[type=submit]")
    page.wait_for_url("**/console/policies/")
    before = live_stack.sql("SELECT handoff_capacity FROM supportbot_tenant WHERE slug = 'acme'")

    page.fill("input[name=handoff_capacity]", "0")
    page.click("#policies-form button[type=submit]")
    page.wait_for_selector("#policies-form .errorlist:has-text('Use 1 to 1000 open handoffs')")
    assert live_stack.sql("SELECT handoff_capacity FROM supportbot_tenant WHERE slug = 'acme'") == (
        before
    )

    page.fill("input[name=handoff_capacity]", "7")
    page.uncheck("#id_approvers_high input[value=agent]")
    page.click("#policies-form button[type=submit]")
    page.wait_for_selector(".flash:has-text('Saved: approver_roles, handoff_capacity')")
    assert page.input_value("input[name=handoff_capacity]") == "7"
    assert not page.is_checked("#id_approvers_high input[value=agent]")
    page.screenshot(path=SCREENSHOT, full_page=True)
    rows = live_stack.sql(
        "SELECT data FROM supportbot_auditevent WHERE action = 'policies.changed' "
        "ORDER BY id DESC LIMIT 1"
    )
    data = rows[0][0] if isinstance(rows[0][0], dict) else json.loads(rows[0][0])
    assert data["changes"]["handoff_capacity"] == {"old": before[0][0], "new": 7}
    assert data["changes"]["approver_roles"]["new"]["high"] == ["admin"]

    # Put them back for the other browser tests on this stack (agents approve there).
    page.fill("input[name=handoff_capacity]", str(before[0][0]))
    page.check("#id_approvers_high input[value=agent]")
    page.click("#policies-form button[type=submit]")
    page.wait_for_selector(".flash:has-text('Saved: approver_roles, handoff_capacity')")
    context.close()
    assert csp.violations == []
