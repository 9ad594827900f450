from django.contrib import admin

from conversations.models import Conversation, Customer, Feedback, Message


@admin.register(Customer)
class CustomerAdmin(admin.ModelAdmin):
    list_display = ["id", "tenant", "external_id", "verified", "name", "created_at"]
    list_filter = ["tenant", "verified"]


class MessageInline(admin.TabularInline):
    model = Message
    fields = ["role", "kind", "state", "text", "model", "ttft_ms"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["id", "tenant", "customer", "channel", "owner", "state", "created_at"]
    list_filter = ["tenant", "owner", "state", "channel"]
    inlines = [MessageInline]


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    list_display = ["message", "rating", "created_at"]
    list_filter = ["tenant", "rating"]
