"""URLs of the request path: the partner chat REST + SSE API, the chat page and the widget."""

from django.urls import path

from chat import api, views

api_urlpatterns = [
    path("conversations", api.ConversationCreateApi.as_view(), name="conversations"),
    path(
        "conversations/<int:conversation_id>/messages",
        api.ConversationMessagesApi.as_view(),
        name="conversation-messages",
    ),
    path(
        "conversations/<int:conversation_id>/handoffs",
        api.HandoffCreateApi.as_view(),
        name="conversation-handoffs",
    ),
    path(
        "conversations/<int:conversation_id>/actions/<int:action_id>/confirm",
        api.ActionConfirmApi.as_view(),
        name="conversation-action-confirm",
    ),
    path(
        "conversations/<int:conversation_id>/actions/<int:action_id>/cancel",
        api.ActionCancelApi.as_view(),
        name="conversation-action-cancel",
    ),
    path("messages/<int:message_id>/feedback", api.FeedbackCreateApi.as_view(), name="feedback"),
]

page_urlpatterns = [
    path("chat/<slug:tenant_slug>/", views.chat_page, name="chat"),
    path("widget.js", views.widget_js, name="widget-js"),
]
