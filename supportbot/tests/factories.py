import factory
from django.contrib.auth import get_user_model

from supportbot.models import ApiKey, Membership, Tenant
from supportbot.services import api_key_create


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"tenant-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.replace("-", " ").title())


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.com")
    password = factory.django.Password("pw-for-tests-1")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    tenant = factory.SubFactory(TenantFactory)
    user = factory.SubFactory(UserFactory)
    role = Membership.Role.AGENT


class ApiKeyFactory(factory.django.DjangoModelFactory):
    """A key made by the real service (hashed secret, audit row); `key.raw` is its full text."""

    class Meta:
        model = ApiKey

    tenant = factory.SubFactory(TenantFactory)
    name = factory.Sequence(lambda n: f"key {n}")

    @classmethod
    def _create(cls, model_class, *, tenant, name, **kwargs):
        key, raw = api_key_create(tenant=tenant, name=name, **kwargs)
        key.raw = raw
        return key
