"""Agent console pages (server-rendered shell; live data through console.js)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.files.base import ContentFile
from django.http import HttpResponseForbidden
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.text import slugify

from handoffs import selectors
from knowledge import services as knowledge_services
from supportbot.models import Membership, Tenant
from supportbot.services import WIDGET_SECRET_MAX_OVERLAP_S, Actor, tenant_widget_secret_rotate


def _console_tenant(request):
    """(tenant, membership) of the console; staff naming a tenant they are not a member of
    get (tenant, None): they may watch, the API refuses them every change."""
    memberships = list(
        Membership.objects.filter(user=request.user, tenant__is_active=True).select_related(
            "tenant"
        )
    )
    slug = request.GET.get("tenant")
    for membership in memberships:
        if not slug or membership.tenant.slug == slug:
            return membership.tenant, membership
    if slug and request.user.is_staff:
        tenant = Tenant.objects.filter(slug=slug, is_active=True).first()
        if tenant is not None:
            return tenant, None
    return None, None


class LoginView(auth_views.LoginView):
    template_name = "handoffs/login.html"
    redirect_authenticated_user = True


@login_required
def console(request, handoff_id: int | None = None):
    tenant, membership = _console_tenant(request)
    if tenant is None:
        return HttpResponseForbidden("You are not an agent of any tenant.")
    return render(
        request,
        "handoffs/console.html",
        {
            "tenant": tenant,
            "membership": membership,
            "handoff_id": handoff_id,
            "read_only": membership is None,
        },
    )


class ArticleDraftForm(forms.Form):
    title = forms.CharField(max_length=200)
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 10}), max_length=20000)


@login_required
def knowledge_gaps(request):
    tenant, membership = _console_tenant(request)
    if tenant is None or membership is None or membership.role != Membership.Role.ADMIN:
        return HttpResponseForbidden("Only admins of the tenant see knowledge gaps.")
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
        return redirect("console-gaps")
    return render(request, "handoffs/gaps.html", {"tenant": tenant, "gaps": gaps, "form": form})


class WidgetSecretRotateForm(forms.Form):
    overlap_hours = forms.IntegerField(
        min_value=0,
        max_value=WIDGET_SECRET_MAX_OVERLAP_S // 3600,
        initial=24,
        help_text="How long tokens signed with the old secret still verify.",
    )


@login_required
def widget_settings(request):
    """The tenant's widget secret for its admins, and its rotation with an overlap window."""
    tenant, membership = _console_tenant(request)
    if tenant is None or membership is None or membership.role != Membership.Role.ADMIN:
        return HttpResponseForbidden("Only admins of the tenant see the widget secret.")
    form = WidgetSecretRotateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        tenant_widget_secret_rotate(
            tenant=tenant,
            actor=Actor.for_user(request.user),
            overlap_seconds=form.cleaned_data["overlap_hours"] * 3600,
        )
        messages.success(request, "New widget secret made; update your site's backend.")
        return redirect("console-widget")
    tenant.refresh_from_db()
    previous_until = tenant.widget_secret_previous_until
    if not tenant.widget_secret_previous or not previous_until or previous_until <= timezone.now():
        previous_until = None
    response = render(
        request,
        "handoffs/widget.html",
        {
            "tenant": tenant,
            "membership": membership,
            "form": form,
            "previous_until": previous_until,
        },
    )
    response["Cache-Control"] = "no-store"
    return response
