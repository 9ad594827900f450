"""Output shapes the partner chat endpoints share (message, conversation, action card)."""

from rest_framework import serializers


class CitationSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    document_id = serializers.IntegerField()
    document_version = serializers.IntegerField()
    title = serializers.CharField()
    heading = serializers.CharField()
    quote = serializers.CharField()
    url = serializers.CharField()
    chunk_id = serializers.IntegerField()
    span = serializers.ListField(child=serializers.IntegerField())


class MessageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    conversation_id = serializers.IntegerField()
    role = serializers.CharField()
    kind = serializers.CharField()
    text = serializers.CharField()
    state = serializers.CharField()
    client_message_id = serializers.CharField(allow_null=True)
    reply_to = serializers.IntegerField(allow_null=True, source="reply_to_id")
    citations = CitationSerializer(many=True)
    created_at = serializers.DateTimeField()


class ConversationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    customer = serializers.SerializerMethodField()
    channel = serializers.CharField()
    owner = serializers.CharField()
    state = serializers.CharField()
    version = serializers.IntegerField()
    created_at = serializers.DateTimeField()

    def get_customer(self, obj) -> dict:
        return {
            "external_id": obj.customer.external_id,
            "name": obj.customer.name,
            "verified": obj.customer.verified,
        }


class ActionCardSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    version = serializers.IntegerField()
    tool = serializers.CharField()
    state = serializers.CharField()
    conversation_id = serializers.IntegerField()
    order_id = serializers.CharField(allow_null=True)
    amount = serializers.CharField(allow_null=True)
    currency = serializers.CharField(allow_null=True)
    needs_confirmation = serializers.BooleanField()
    expires_at = serializers.DateTimeField(allow_null=True)
    summary = serializers.CharField()
    next_step = serializers.CharField(allow_blank=True)
    text = serializers.CharField()
    provider_reference = serializers.CharField(allow_null=True)
