from django.contrib import admin

from supportbot.models import ApiKey, AuditEvent, Membership, Tenant
from supportbot.services import Actor, tenant_settings_record


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "refund_auto_limit", "handoff_capacity", "is_active"]
    search_fields = ["slug", "name"]

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if change and form.changed_data:
            tenant_settings_record(
                tenant=obj,
                changed={f: form.cleaned_data.get(f) for f in form.changed_data},
                actor=Actor.for_user(request.user),
            )


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role"]
    list_filter = ["tenant", "role"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["tenant"]
    fields = [
        "name",
        "tenant",
        "may_search_agent_documents",
        "search_segments",
        "prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    readonly_fields = ["prefix", "secret_hash", "created_at", "last_used_at", "revoked_at"]

    def has_add_permission(self, request):  # keys are created with create_api_key (shown once)
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "tenant", "actor_label", "action", "target_type", "target_id"]
    list_filter = ["tenant", "action"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False
