"""Security headers on every page type, per-tenant framing, and forwarded headers."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.test import Client, RequestFactory

from supportbot.client_address import client_address, parse_networks
from supportbot.middleware import TrustedProxyMiddleware
from supportbot.models import validate_origin
from supportbot.tests.factories import UserFactory

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.I)
INLINE_STYLE = re.compile(r"<style\b|\sstyle=\"", re.I)
INLINE_HANDLER = re.compile(r"\son[a-z]+=\"", re.I)


@pytest.fixture(autouse=True)
def _local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def csp_of(response) -> dict[str, list[str]]:
    header = response.headers.get("Content-Security-Policy")
    assert header, f"no CSP on {response.request['PATH_INFO']}"
    policy = {}
    for directive in header.split(";"):
        name, *sources = directive.split()
        policy[name] = sources
    return policy


def assert_strict_page(response) -> dict[str, list[str]]:
    assert response.status_code == 200, response.content[:500]
    policy = csp_of(response)
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'", settings.KB_PAGE_STYLE_HASH]
    assert policy["object-src"] == ["'none'"]
    html = response.content.decode()
    assert not INLINE_SCRIPT.search(html), INLINE_SCRIPT.search(html)
    assert not INLINE_STYLE.search(html), INLINE_STYLE.search(html)
    assert not INLINE_HANDLER.search(html), INLINE_HANDLER.search(html)
    return policy


@pytest.fixture
def staff(db):
    return UserFactory(username="operator", is_staff=True, is_superuser=True)


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_chat_page_may_be_framed_only_by_the_tenants_allowed_origins(client, tenant):
    tenant.allowed_origins = ["https://shop.example.com", "https://www.example.org"]
    tenant.save()
    policy = assert_strict_page(client.get(f"/chat/{tenant.slug}/"))
    assert policy["frame-ancestors"] == [
        "'self'",
        "https://shop.example.com",
        "https://www.example.org",
    ]
    assert "X-Frame-Options" not in client.get(f"/chat/{tenant.slug}/").headers


def test_chat_page_of_a_tenant_without_allowed_origins_is_frameable_only_by_us(
    client, tenant, other_tenant
):
    other_tenant.allowed_origins = ["https://globex.example"]
    other_tenant.save()
    policy = assert_strict_page(client.get(f"/chat/{tenant.slug}/?embed=1"))
    assert policy["frame-ancestors"] == ["'self'"]


@pytest.mark.parametrize("path", ["/console/login/", "/admin/login/", "/api/docs/", "/healthz"])
def test_public_pages_have_a_strict_csp_and_cannot_be_framed(client, db, path):
    r = client.get(path)
    policy = csp_of(r)
    assert policy["frame-ancestors"] == ["'none'"]
    assert r.headers["X-Frame-Options"] == "DENY"
    if path != "/healthz":
        assert_strict_page(r)


def test_console_pages_have_a_strict_csp(agent, tenant):
    client = logged_in(agent)
    for path in ["/console/", "/console/actions/"]:
        policy = assert_strict_page(client.get(path))
        assert policy["frame-ancestors"] == ["'none'"]


def test_tenant_admin_pages_have_a_strict_csp(tenant_admin, tenant):
    assert_strict_page(logged_in(tenant_admin).get("/console/gaps/"))


def test_ops_page_and_django_admin_have_a_strict_csp(staff, tenant):
    client = logged_in(staff)
    for path in ["/console/ops/", "/admin/", "/admin/supportbot/tenant/", "/admin/auth/user/"]:
        assert_strict_page(client.get(path))
    assert_strict_page(client.get(f"/admin/supportbot/tenant/{tenant.pk}/change/"))


def test_api_docs_load_swagger_ui_from_our_static_files(client, db):
    r = client.get("/api/docs/")
    html = r.content.decode()
    assert "cdn" not in html.lower()
    assert "@latest" not in html
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    script = client.get("/api/docs/", {"script": ""})
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in script.content.decode()


def test_help_center_page_style_is_the_one_allowed_inline_block(client, db):
    """Editing the knowledge page's <style> needs a new hash (better: a static stylesheet)."""
    template = Path(settings.BASE_DIR, "knowledge/templates/knowledge/document_page.html")
    blocks = re.findall(r"<style>(.*?)</style>", template.read_text(), re.S)
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(b.encode()).digest()).decode() + "'"
        for b in blocks
    ]
    assert hashes in ([settings.KB_PAGE_STYLE_HASH], [])


def test_origin_validation_accepts_only_bare_origins():
    validate_origin("https://shop.example.com")
    validate_origin("http://localhost:8080")
    for bad in [
        "shop.example.com",
        "https://shop.example.com/",
        "https://shop.example.com/path",
        "javascript:alert(1)",
        "https://*.example.com",
        "https://Shop.example.com",
        "https://user@shop.example.com",
        "https://shop.example.com:99999",
        "'unsafe-inline'",
        "https://a.example; script-src *",
        "https://a.example https://b.example",
    ]:
        with pytest.raises(ValidationError):
            validate_origin(bad)


# --------------------------------------------------------------------------- forwarded headers


def through_middleware(settings, *, trusted: list[str], **meta) -> dict:
    settings.TRUSTED_PROXIES = trusted
    seen = {}

    def view(request):
        seen["remote_addr"] = request.META["REMOTE_ADDR"]
        seen["secure"] = request.is_secure()
        seen["forwarded_for"] = request.META.get("HTTP_X_FORWARDED_FOR")
        return HttpResponse()

    request = RequestFactory().get("/", **meta)
    TrustedProxyMiddleware(view)(request)
    return seen


def test_forwarded_headers_from_an_untrusted_peer_are_ignored(settings):
    seen = through_middleware(
        settings,
        trusted=["10.0.0.0/8"],
        REMOTE_ADDR="203.0.113.9",
        HTTP_X_FORWARDED_FOR="198.51.100.1",
        HTTP_X_FORWARDED_PROTO="https",
    )
    assert seen == {"remote_addr": "203.0.113.9", "secure": False, "forwarded_for": None}


def test_forwarded_headers_are_ignored_when_no_proxy_is_configured(settings):
    seen = through_middleware(
        settings,
        trusted=[],
        REMOTE_ADDR="10.0.0.5",
        HTTP_X_FORWARDED_FOR="198.51.100.1",
        HTTP_X_FORWARDED_PROTO="https",
    )
    assert seen["remote_addr"] == "10.0.0.5"
    assert seen["secure"] is False


def test_forwarded_headers_from_a_trusted_proxy_are_honoured(settings):
    seen = through_middleware(
        settings,
        trusted=["10.0.0.0/8"],
        REMOTE_ADDR="10.1.2.3",
        HTTP_X_FORWARDED_FOR="198.51.100.1",
        HTTP_X_FORWARDED_PROTO="https",
    )
    assert seen["remote_addr"] == "198.51.100.1"
    assert seen["secure"] is True


def test_client_address_skips_trusted_hops_and_ignores_what_the_client_prepended():
    networks = parse_networks(["10.0.0.0/8", "192.168.0.1"])
    # The client sent "1.1.1.1" itself; the edge proxy appended the real peer 198.51.100.7.
    chain = "1.1.1.1, 198.51.100.7, 10.0.0.2"
    assert client_address(peer="10.0.0.3", forwarded_for=chain, networks=networks) == (
        "198.51.100.7"
    )
    assert client_address(peer="10.0.0.3", forwarded_for="garbage", networks=networks) == (
        "10.0.0.3"
    )


def test_https_redirect_follows_a_trusted_proxys_proto_only(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.TRUSTED_PROXIES = ["127.0.0.1"]
    assert client.get("/healthz").status_code == 200  # exempt: load-balancer probes
    behind = client.get("/console/login/", HTTP_X_FORWARDED_PROTO="https")
    assert behind.status_code == 200
    settings.TRUSTED_PROXIES = []
    spoofed = Client().get("/console/login/", HTTP_X_FORWARDED_PROTO="https")
    assert spoofed.status_code == 301
    assert spoofed["Location"].startswith("https://")
