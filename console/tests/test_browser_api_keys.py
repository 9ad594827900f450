"""A tenant admin makes a partner API key in Chromium, sees its secret once, copies it, uses
it against the running API, and revokes it: the API refuses it at once."""

import httpx
import pytest

pytestmark = pytest.mark.browser
SCREENSHOT = "docs/screenshots/console-api-keys.png"
LIST_SCREENSHOT = "docs/screenshots/console-api-keys-list.png"


def search(stack, secret: str, **params) -> httpx.Response:
    return httpx.get(
        f"{stack.url}/api/v1/search",
        params={"q": "shipping", **params},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=30,
    )


def test_an_admin_creates_a_key_sees_it_once_and_revokes_it(live_stack, browser, csp):
    context = browser.new_context(
        permissions=["clipboard-read", "clipboard-write"], viewport={"width": 1200, "height": 900}
    )
    page = csp.watch(context.new_page())
    page.goto(f"{live_stack.url}/console/login/?next=/console/api-keys/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", live_stack.logins()["admin"])
    page.click("button[type=submit]")
    page.wait_for_url("**/console/api-keys/")

    # One bad input: an invalid segment comes back on the form, nothing is made.
    page.fill("input[name=name]", "Help center sync")
    page.fill("input[name=search_segments]", "vip, Not Valid!")
    page.click("#api-key-form button[type=submit]")
    page.wait_for_selector("#api-key-form .errorlist:has-text('Invalid segment')")
    assert page.locator("#api-key-list tr", has_text="Help center sync").count() == 0

    page.fill("input[name=search_segments]", "vip")
    page.check("input[name=may_search_agent_documents]")
    page.click("#api-key-form button[type=submit]")
    page.wait_for_selector("#api-key-created")
    secret = page.inner_text("#api-key-secret").strip()
    assert secret.startswith("sb_")
    page.click("#api-key-copy")
    page.wait_for_selector("#api-key-copied:has-text('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    page.screenshot(path=SCREENSHOT, full_page=True)

    # The key works with the scopes chosen, over HTTP against the running stack.
    assert search(live_stack, secret, audience="agent").status_code == 200
    assert search(live_stack, secret, segments="vip").status_code == 200
    assert search(live_stack, secret, segments="eu").status_code == 403

    # Shown once: the list (a reload) has its prefix, never the secret.
    page.goto(f"{live_stack.url}/console/api-keys/")
    prefix = secret.split("_")[1]
    row = page.locator(f"#api-key-list tr[data-prefix='{prefix}']")
    assert "Help center sync" in row.inner_text()
    assert "active" in row.inner_text()
    assert secret not in page.content()

    row.get_by_role("link", name="Revoke…").click()
    page.wait_for_selector("#api-key-revoke")
    assert search(live_stack, secret).status_code == 200  # the confirmation changed nothing
    page.click("#api-key-revoke-confirm")
    page.wait_for_url("**/console/api-keys/**")
    page.wait_for_selector(".flash:has-text('revoked')")
    assert "revoked" in row.locator(".key-status").inner_text()
    page.screenshot(path=LIST_SCREENSHOT, full_page=True)
    refused = search(live_stack, secret)
    assert refused.status_code == 401, refused.text
    actions = live_stack.sql(
        "SELECT action FROM supportbot_auditevent WHERE target_type = 'api_key' "
        "AND data->>'prefix' = %s ORDER BY id",
        (prefix,),
    )
    assert actions == [("api_key.created",), ("api_key.revoked",)]
    context.close()
    assert csp.violations == []
