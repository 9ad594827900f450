from django.contrib import admin

from actions.models import ActionRequest, ProviderConfig


@admin.register(ProviderConfig)
class ProviderConfigAdmin(admin.ModelAdmin):
    list_display = ("tenant", "base_url", "timeout_seconds", "enabled", "updated_at")
    readonly_fields = ("credentials_encrypted",)


@admin.register(ActionRequest)
class ActionRequestAdmin(admin.ModelAdmin):
    """Read-only: the ledger changes only through services (approve in the console)."""

    list_display = ("id", "tenant", "tool", "state", "risk", "proposed_by", "created_at")
    list_filter = ("state", "tool", "tenant")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
