from django.contrib import admin

from handoffs.models import CannedResponse, Handoff, InternalNote, Team


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant"]
    list_filter = ["tenant"]
    filter_horizontal = ["members"]


@admin.register(CannedResponse)
class CannedResponseAdmin(admin.ModelAdmin):
    list_display = ["title", "tenant"]
    list_filter = ["tenant"]


@admin.register(Handoff)
class HandoffAdmin(admin.ModelAdmin):
    list_display = ["id", "tenant", "state", "reason", "priority", "assigned_to", "created_at"]
    list_filter = ["tenant", "state", "reason"]
    readonly_fields = ["version", "summary", "summary_source"]


@admin.register(InternalNote)
class InternalNoteAdmin(admin.ModelAdmin):
    list_display = ["conversation", "author", "created_at"]
