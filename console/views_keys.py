"""The partner API keys page for tenant admins: list, create (the secret shown once), revoke.

Only a key's SHA-256 is stored (supportbot.services.api_key_create), so the secret exists in
one response only: the page that answers the create POST, marked no-store. Keys are
credentials: staff without a membership do not see this page (console/access.py).
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from console.access import ADMIN, ConsoleAccess, console_page
from supportbot import selectors
from supportbot.errors import ApplicationError, NotFound
from supportbot.models import ApiKey
from supportbot.services import Actor, api_key_create, api_key_revoke


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(
        max_length=ApiKey.NAME_MAX_LENGTH, help_text="Who uses it, e.g. “Help center sync”."
    )
    may_search_agent_documents = forms.BooleanField(
        required=False, label="May search agents-only documents"
    )
    search_segments = forms.CharField(
        required=False,
        max_length=500,
        label="Customer segments it may search",
        help_text="Comma-separated, e.g. “vip, eu”. Public documents are always searchable.",
    )


def _keys_page(request: HttpRequest, access: ConsoleAccess, form: ApiKeyCreateForm, status=200):
    keys = selectors.api_key_list(tenant=access.tenant)
    return render(
        request,
        "console/api_keys.html",
        {"tenant": access.tenant, "keys": keys, "form": form},
        status=status,
    )


@never_cache
@require_http_methods(["GET"])
@console_page(role=ADMIN, staff_read=False)
def api_keys(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """The tenant's keys (never another tenant's) and the form for a new one."""
    return _keys_page(request, access, ApiKeyCreateForm())


@never_cache  # the one response that holds the secret: no cache may keep a copy
@require_POST
@console_page(role=ADMIN, staff_read=False)
def api_key_new(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """Create a key and answer with its secret, shown this once (no redirect: the secret never
    goes into the session or a URL); a bad form comes back with its errors."""
    form = ApiKeyCreateForm(request.POST)
    if not form.is_valid():
        return _keys_page(request, access, form, status=400)
    data = form.cleaned_data
    try:
        key, secret = api_key_create(
            tenant=access.tenant,
            name=data["name"],
            actor=Actor.for_user(request.user),
            created_by=request.user,
            may_search_agent_documents=data["may_search_agent_documents"],
            search_segments=data["search_segments"].split(","),
        )
    except ApplicationError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.detail)
        return _keys_page(request, access, form, status=400)
    return render(
        request,
        "console/api_key_created.html",
        {"tenant": access.tenant, "key": key, "secret": secret},
    )


@require_http_methods(["GET", "POST"])
@console_page(role=ADMIN, staff_read=False)
def api_key_revoke_page(request: HttpRequest, access: ConsoleAccess, key_id: int) -> HttpResponse:
    """GET asks to confirm; POST revokes (the API refuses the key from then on). Another
    tenant's key id is a 404 either way."""
    try:
        key = selectors.api_key_get(tenant=access.tenant, key_id=key_id)
    except NotFound as exc:
        raise Http404(exc.detail) from exc
    if request.method == "POST":
        if key.is_active:
            api_key_revoke(tenant=access.tenant, key_id=key.pk, actor=Actor.for_user(request.user))
            messages.success(request, f"Key “{key.name}” ({key.prefix}) revoked.")
        else:
            messages.info(request, f"Key “{key.name}” ({key.prefix}) was already revoked.")
        return redirect(reverse("console-api-keys") + access.query)
    return render(request, "console/api_key_revoke.html", {"tenant": access.tenant, "key": key})
