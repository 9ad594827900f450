"""Agent console pages (server-rendered shell; live data through console.js)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.core.files.base import ContentFile
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify
from django.views.decorators.cache import never_cache

from console.access import ADMIN, console_page
from handoffs import selectors
from knowledge import services as knowledge_services
from supportbot import selectors as tenancy_selectors
from supportbot.services import WIDGET_SECRET_MAX_OVERLAP_S, Actor, tenant_widget_secret_rotate


class LoginView(auth_views.LoginView):
    """The one console login; `next` (default the queue) says where to go after it."""

    template_name = "console/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self):
        return "/console/"


@console_page()
def console(request, access, handoff_id: int | None = None):
    """The live queue, and the user's own recent failed logins (someone guessing shows)."""
    return render(
        request,
        "console/queue.html",
        {
            "tenant": access.tenant,
            "membership": access.membership,
            "handoff_id": handoff_id,
            "login_failures": tenancy_selectors.login_failures_recent(user=request.user),
        },
    )


class ArticleDraftForm(forms.Form):
    title = forms.CharField(max_length=200)
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 10}), max_length=20000)


@console_page(role=ADMIN)
def knowledge_gaps(request, access):
    tenant = access.tenant
    gaps = selectors.knowledge_gaps(tenant=tenant)
    initial_question = request.GET.get("question", "")
    form = ArticleDraftForm(
        request.POST or None,
        initial={"title": initial_question[:200], "body": f"# {initial_question}\n\n"},
    )
    if request.method == "POST" and form.is_valid():
        title = form.cleaned_data["title"]
        body = form.cleaned_data["body"]
        if not body.lstrip().startswith("#"):
            body = f"# {title}\n\n{body}"
        document = knowledge_services.document_upload(
            tenant=tenant,
            file=ContentFile(body.encode(), name=f"{slugify(title) or 'article'}.md"),
            title=title,
            actor=Actor.for_user(request.user),
            user=request.user,
        )
        messages.success(request, f"Article “{document.title}” saved; indexing started.")
        return redirect(reverse("console-gaps") + access.query)
    return render(request, "console/gaps.html", {"tenant": tenant, "gaps": gaps, "form": form})


class WidgetSecretRotateForm(forms.Form):
    overlap_hours = forms.IntegerField(
        min_value=0,
        max_value=WIDGET_SECRET_MAX_OVERLAP_S // 3600,
        initial=24,
        help_text="How long tokens signed with the old secret still verify.",
    )


@never_cache  # shows the secret: no cache may keep a copy (the redirect after a POST too)
@console_page(role=ADMIN, staff_read=False)
def widget_settings(request, access):
    """The tenant's widget secret for its admins, and its rotation with an overlap window."""
    tenant, membership = access.tenant, access.membership
    form = WidgetSecretRotateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        tenant_widget_secret_rotate(
            tenant=tenant,
            actor=Actor.for_user(request.user),
            overlap_seconds=form.cleaned_data["overlap_hours"] * 3600,
        )
        messages.success(request, "New widget secret made; update your site's backend.")
        return redirect(reverse("console-widget") + access.query)
    tenant.refresh_from_db()
    previous_until = tenant.widget_secret_previous_until
    if not tenant.widget_secret_previous or not previous_until or previous_until <= timezone.now():
        previous_until = None
    response = render(
        request,
        "console/widget.html",
        {
            "tenant": tenant,
            "membership": membership,
            "form": form,
            "previous_until": previous_until,
        },
    )
    return response
