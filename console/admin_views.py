"""Console pages for tenant admins: the audit trail (filterable, CSV) and a customer's data
(export for an access request, erasure). Admins only; staff read the audit trail, never a
customer's data (an export answers a customer's request, so it is an act: console/access.py).
"""

from __future__ import annotations

import csv
import json
from datetime import datetime, time, timedelta

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from console.access import ADMIN, console_page
from conversations import customer_data
from supportbot import selectors
from supportbot.errors import NotFound
from supportbot.services import Actor

PAGE_SIZE = 100
# A spreadsheet runs a cell that starts with one of these as a formula: quote it.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class AuditFilterForm(forms.Form):
    action = forms.CharField(max_length=100, required=False, help_text="e.g. handoff. or login")
    actor = forms.CharField(max_length=200, required=False)
    target_type = forms.CharField(max_length=50, required=False)
    since = forms.DateField(required=False, help_text="YYYY-MM-DD")
    until = forms.DateField(required=False, help_text="YYYY-MM-DD (inclusive)")


def _filtered_events(request, tenant):
    form = AuditFilterForm(request.GET or None)
    filters = {}
    if form.is_valid():
        data = form.cleaned_data
        tz = timezone.get_current_timezone()
        filters = {
            "action": data["action"].strip(),
            "actor": data["actor"].strip(),
            "target_type": data["target_type"].strip(),
            "since": datetime.combine(data["since"], time.min, tz) if data["since"] else None,
            "until": (
                datetime.combine(data["until"] + timedelta(days=1), time.min, tz)
                if data["until"]
                else None
            ),
        }
    return form, selectors.audit_event_filter(tenant=tenant, **filters)


@console_page(role=ADMIN)
def audit_log(request, access):
    tenant, membership = access.tenant, access.membership
    form, events = _filtered_events(request, tenant)
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "console/audit.html",
        {
            "tenant": tenant,
            "membership": membership,
            "form": form,
            "page": page,
            "query": query.urlencode(),
        },
    )


def _cell(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return "'" + text if text.startswith(_FORMULA_START) else text


class _Echo:
    def write(self, value: str) -> str:
        return value


@never_cache  # a download of the audit trail: no cache may keep a copy
@console_page(role=ADMIN)
def audit_log_csv(request, access):
    tenant = access.tenant
    _, events = _filtered_events(request, tenant)
    writer = csv.writer(_Echo())
    header = ["created_at", "actor_type", "actor", "action", "target_type", "target_id", "data"]

    def rows():
        yield writer.writerow(header)
        for e in events.iterator(chunk_size=500):
            yield writer.writerow(
                [
                    e.created_at.isoformat(),
                    e.actor_type,
                    _cell(e.actor_label),
                    _cell(e.action),
                    _cell(e.target_type),
                    _cell(e.target_id),
                    _cell(e.data),
                ]
            )

    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="audit-{tenant.slug}-{stamp}.csv"'
    return response


class CustomerForm(forms.Form):
    external_id = forms.CharField(max_length=200)


class EraseForm(CustomerForm):
    confirm = forms.CharField(max_length=200, help_text="Type the external id again.")

    def clean(self):
        data = super().clean()
        if data.get("external_id") and data.get("confirm") != data.get("external_id"):
            raise forms.ValidationError("Type the same external id twice to erase.")
        return data


@console_page(role=ADMIN)
def customers(request, access):
    tenant, membership = access.tenant, access.membership
    return render(
        request,
        "console/customers.html",
        {
            "tenant": tenant,
            "membership": membership,
            "export_form": CustomerForm(),
            "erase_form": EraseForm(),
        },
    )


@never_cache  # personal data: no cache may keep a copy
@console_page(role=ADMIN, write=True)
def customer_export(request, access):
    tenant = access.tenant
    form = CustomerForm(request.GET)
    if not form.is_valid():
        messages.error(request, "Name the customer's external id.")
        return redirect(reverse("console-customers") + access.query)
    external_id = form.cleaned_data["external_id"]
    try:
        data = customer_data.customer_export(
            tenant=tenant, external_id=external_id, actor=Actor.for_user(request.user)
        )
    except NotFound:
        messages.error(request, "This tenant has no customer with that external id.")
        return redirect(reverse("console-customers") + access.query)
    response = HttpResponse(
        json.dumps(data, indent=2, ensure_ascii=False), content_type="application/json"
    )
    response["Content-Disposition"] = 'attachment; filename="customer-export.json"'
    return response


@require_POST
@console_page(role=ADMIN)
def customer_erase(request, access):
    tenant = access.tenant
    form = EraseForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(form.errors.get("__all__", ["Name the customer."])))
        return redirect(reverse("console-customers") + access.query)
    try:
        result = customer_data.customer_erase(
            tenant=tenant,
            external_id=form.cleaned_data["external_id"],
            actor=Actor.for_user(request.user),
        )
    except NotFound:
        messages.error(request, "This tenant has no customer with that external id.")
        return redirect(reverse("console-customers") + access.query)
    if result["already_erased"]:
        messages.info(request, "This customer was erased before; nothing left to erase.")
    else:
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(result["erased"].items()) if n)
        messages.success(request, f"Erased: {counts}.")
    return redirect(reverse("console-customers") + access.query)
