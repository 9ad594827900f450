import factory

from inference.models import InferenceUsage, ModelWorker
from supportbot.tests.factories import TenantFactory


class ModelWorkerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ModelWorker

    name = factory.Sequence(lambda n: f"worker-{n}")
    base_url = factory.Sequence(lambda n: f"http://127.0.0.1:{19000 + n}")
    model_name = "smollm2-135m"
    role = ModelWorker.Role.PRIMARY
    source = ModelWorker.Source.EXTERNAL
    state = ModelWorker.State.READY


class InferenceUsageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = InferenceUsage

    tenant = factory.SubFactory(TenantFactory)
    worker = factory.SubFactory(ModelWorkerFactory)
    worker_name = factory.LazyAttribute(lambda o: o.worker.name if o.worker else "gone")
    model_name = "smollm2-135m"
    role = "primary"
    prompt_tokens = 80
    completion_tokens = 20
    ttft_ms = 300.0
    total_ms = 1200.0
    itl_ms = factory.LazyFunction(lambda: [40.0, 50.0, 60.0])
