"""Model fields encrypted at rest with the row's tenant data key (supportbot/encryption.py).

The model must have a `tenant` foreign key: `pre_save` seals the value with that tenant's
active key, reads open it again, so code above the model layer sees plaintext. The column
holds `sb1:…` text only, so it can never be searched in SQL: every lookup but `isnull` (and
`= ""` on text, the one value stored as it is) is refused. `QuerySet.update` skips
`pre_save`; pass values through `encryption.seal_fields`.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import FieldError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models.lookups import Exact

from supportbot import encryption


class _EmptyExact(Exact):
    """`field=""` only: the empty string is the one value stored as it is."""

    def get_prep_lookup(self):
        if self.rhs != "":
            raise FieldError(
                f'{self.lhs.output_field.context} is encrypted at rest: only `=""` is allowed.'
            )
        return self.rhs


class _Encrypted:
    """Shared behaviour of the encrypted fields (mixed into a TextField)."""

    def get_internal_type(self) -> str:
        return "TextField"

    @property
    def context(self) -> str:
        return f"{self.model._meta.db_table}.{self.column}"

    def _encode(self, value: Any) -> str:
        return value

    def _decode(self, text: str) -> Any:
        return text

    def _is_blank(self, value: Any) -> bool:
        return value is None or value == ""

    def seal_for(self, tenant_id: int, value: Any) -> Any:
        """`value` as stored for `tenant_id` (sealed unless None or empty)."""
        if isinstance(value, encryption.Sealed) or self._is_blank(value):
            return value
        return encryption.seal(
            tenant_id=tenant_id, plaintext=self._encode(value), context=self.context
        )

    def pre_save(self, model_instance, add):
        value = getattr(model_instance, self.attname)
        return self.seal_for(model_instance.tenant_id, value)

    def get_prep_value(self, value):
        if isinstance(value, encryption.Sealed) or self._is_blank(value):
            return None if value is None else str(value)
        raise ValueError(
            f"{self.context} is encrypted: save the instance or seal the value with "
            "encryption.seal_fields before QuerySet.update."
        )

    def from_db_value(self, value, expression, connection):
        if value is None:
            return None
        return self._decode(encryption.unseal(value, context=self.context))

    def get_lookup(self, lookup_name):
        if lookup_name == "isnull":
            return super().get_lookup(lookup_name)
        if lookup_name == "exact" and not isinstance(self, EncryptedJSONField):
            return _EmptyExact
        raise FieldError(f"{self.context} is encrypted at rest and cannot be searched.")

    def get_transform(self, lookup_name):
        raise FieldError(f"{self.context} is encrypted at rest and cannot be searched.")


class EncryptedTextField(_Encrypted, models.TextField):
    """Text encrypted at rest; the empty string is stored as it is."""


class EncryptedJSONField(_Encrypted, models.TextField):
    """A JSON value encrypted at rest (stored as sealed text, never as jsonb)."""

    def _encode(self, value: Any) -> str:
        return json.dumps(value, cls=DjangoJSONEncoder, separators=(",", ":"))

    def _decode(self, text: str) -> Any:
        if text == "":
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text

    def _is_blank(self, value: Any) -> bool:
        return value is None

    def to_python(self, value):
        return value

    def value_to_string(self, obj) -> str:
        return json.dumps(self.value_from_object(obj), cls=DjangoJSONEncoder)

    def formfield(self, **kwargs):
        return super(models.TextField, self).formfield(
            **{"form_class": forms.JSONField, "encoder": DjangoJSONEncoder, **kwargs}
        )
