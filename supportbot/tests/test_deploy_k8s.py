"""deploy/k8s: both overlays render, every object validates against the Kubernetes schema,
and the pieces fit together (selectors, discovery, GPUs, probes, budgets, metrics)."""

import copy
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from prometheus_client import REGISTRY

from chat import metrics as chat_metrics  # noqa: F401 - registers the chat metrics
from inference.discovery import parse_spec
from supportbot.tests.deploytools import DEPLOY
from supportbot.tests.kustomize import KustomizeError, build

K8S = DEPLOY / "k8s"
OVERLAYS = ["dev", "prod"]
VERSION = kubernetes_validate.latest_version()
CRDS = {("postgresql.cnpg.io/v1", "Cluster")}  # no schema ships with kubernetes-validate


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request) -> tuple[str, list[dict]]:
    return request.param, build(K8S / "overlays" / request.param)


def _by(resources: list[dict], kind: str, name: str | None = None) -> list[dict]:
    return [r for r in resources if r["kind"] == kind and name in (None, r["metadata"]["name"])]


def _one(resources: list[dict], kind: str, name: str) -> dict:
    found = _by(resources, kind, name)
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def _pod_templates(resources: list[dict]) -> list[dict]:
    return [
        r["spec"]["template"]
        for r in resources
        if r["kind"] in ("Deployment", "StatefulSet", "Job")
    ]


def _container(resource: dict) -> dict:
    return resource["spec"]["template"]["spec"]["containers"][0]


def test_every_object_validates_against_the_kubernetes_schema(overlay):
    name, resources = overlay
    assert resources
    for res in resources:
        if (res["apiVersion"], res["kind"]) in CRDS:
            continue
        kubernetes_validate.validate(res, VERSION, strict=True)


def test_the_validator_rejects_a_broken_manifest(overlay):
    _, resources = overlay
    broken = copy.deepcopy(_one(resources, "Deployment", "supportbot-web"))
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)
    unknown = copy.deepcopy(_one(resources, "Service", "vllm"))
    unknown["spec"]["clusterIPs"] = "None"
    unknown["spec"]["headless"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown, VERSION, strict=True)


def test_every_object_lands_in_the_overlay_namespace(overlay):
    name, resources = overlay
    spec = yaml.safe_load((K8S / "overlays" / name / "kustomization.yaml").read_text())
    assert {r["metadata"]["namespace"] for r in resources} == {spec["namespace"]}
    binding = _one(resources, "RoleBinding", "supportbot-discovery")
    assert binding["subjects"][0]["namespace"] == spec["namespace"]


def test_selectors_of_services_budgets_and_policies_match_pods(overlay):
    _, resources = overlay
    labels = [t["metadata"]["labels"] for t in _pod_templates(resources)]

    def matches(selector: dict) -> bool:
        wanted = selector.get("matchLabels", selector if "matchExpressions" not in selector else {})
        exprs = selector.get("matchExpressions", [])
        return any(
            all(pod.get(k) == v for k, v in wanted.items())
            and all(e["operator"] == "Exists" and e["key"] in pod for e in exprs)
            for pod in labels
        )

    for svc in _by(resources, "Service"):
        assert matches(svc["spec"]["selector"]), svc["metadata"]["name"]
    for pdb in _by(resources, "PodDisruptionBudget"):
        assert matches(pdb["spec"]["selector"]), pdb["metadata"]["name"]
    for dep in _by(resources, "Deployment"):
        assert matches(dep["spec"]["selector"]), dep["metadata"]["name"]
    for policy in _by(resources, "NetworkPolicy"):
        selector = policy["spec"]["podSelector"]
        if not selector or policy["metadata"]["name"] == "postgres-ingress":
            continue  # default deny; CloudNativePG labels its own pods
        if policy["metadata"]["name"] == "valkey-ingress" and not _by(resources, "StatefulSet"):
            continue  # prod: Redis is external
        assert matches(selector), policy["metadata"]["name"]


def test_web_and_worker_discover_the_headless_vllm_service(overlay):
    _, resources = overlay
    vllm_svc = _one(resources, "Service", "vllm")
    assert vllm_svc["spec"]["clusterIP"] == "None"
    port_names = {p["name"] for p in vllm_svc["spec"]["ports"]}
    namespace = vllm_svc["metadata"]["namespace"]
    served = _container(_one(resources, "Deployment", "vllm"))
    for name in ("supportbot-web", "supportbot-worker"):
        dep = _one(resources, "Deployment", name)
        env = {e["name"]: e for e in _container(dep)["env"]}
        assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
        value = env["INFERENCE_DISCOVERY"]["value"].replace("$(POD_NAMESPACE)", namespace)
        spec = parse_spec(value)
        assert (spec.kind, spec.namespace, spec.host) == ("k8s-endpointslices", namespace, "vllm")
        assert spec.port in port_names
        args = " ".join(served.get("args", []))
        assert spec.model in args or not args  # the CPU image serves smollm2-135m itself
        assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "supportbot"
    role = _one(resources, "Role", "supportbot-discovery")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs <= {"get", "list", "watch"}


def test_vllm_has_gpus_in_prod_a_warm_minimum_and_readiness_after_warm_up(overlay):
    name, resources = overlay
    dep = _one(resources, "Deployment", "vllm")
    container = _container(dep)
    gpus = container["resources"].get("requests", {}).get("nvidia.com/gpu")
    assert (gpus == "1") == (name == "prod")
    assert dep["spec"]["replicas"] >= 1
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    startup = " ".join(container["startupProbe"]["exec"]["command"])
    assert "/v1/completions" in startup
    assert "max_tokens" in startup
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    grace = dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert container["lifecycle"]["preStop"]["sleep"]["seconds"] < grace
    assert _one(resources, "PodDisruptionBudget", "vllm")["spec"]["maxUnavailable"] == 1
    if name == "prod":
        assert dep["spec"]["replicas"] >= 2


def test_web_hpa_scales_on_cpu_and_on_the_exported_in_flight_metric(overlay):
    _, resources = overlay
    hpa = _one(resources, "HorizontalPodAutoscaler", "supportbot-web")
    kinds = {m["type"]: m for m in hpa["spec"]["metrics"]}
    assert kinds["Resource"]["resource"]["name"] == "cpu"
    metric = kinds["Pods"]["pods"]["metric"]["name"]
    assert REGISTRY.get_sample_value(metric) is not None, f"{metric} is not exported"
    adapter = yaml.safe_load((DEPLOY / "prometheus" / "adapter-rules.yaml").read_text())
    assert metric in adapter["rules"]["custom"][0]["seriesQuery"]
    assert hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]


def test_app_pods_run_as_non_root_with_config_and_secrets_from_references(overlay):
    _, resources = overlay
    configmaps = {r["metadata"]["name"] for r in _by(resources, "ConfigMap")}
    for res in resources:
        if res["kind"] not in ("Deployment", "Job") or res["metadata"]["name"] == "vllm":
            continue
        pod = res["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        container = pod["containers"][0]
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        refs = container["envFrom"]
        assert {r["configMapRef"]["name"] for r in refs if "configMapRef" in r} <= configmaps
        assert {r["secretRef"]["name"] for r in refs if "secretRef" in r} == {"supportbot-secrets"}
    for cm in _by(resources, "ConfigMap"):
        for key in cm["data"]:
            assert not any(word in key for word in ("SECRET", "PASSWORD", "TOKEN")), key


def test_prod_runs_postgres_through_cloudnativepg_with_replicas():
    resources = build(K8S / "overlays" / "prod")
    cluster = _one(resources, "Cluster", "supportbot-pg")
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1"
    assert cluster["spec"]["instances"] >= 3
    sql = " ".join(cluster["spec"]["bootstrap"]["initdb"]["postInitApplicationSQL"])
    assert "vector" in sql
    assert "pg_trgm" in sql
    for name in ("supportbot-web", "supportbot-worker"):
        env = {e["name"]: e for e in _container(_one(resources, "Deployment", name))["env"]}
        assert env["DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "supportbot-pg-app"


def test_migration_job_runs_the_migrate_entry_point(overlay):
    _, resources = overlay
    job = _one(resources, "Job", "supportbot-migrate")
    assert _container(job)["args"] == ["migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] in ("OnFailure", "Never")


def test_renderer_refuses_what_it_does_not_understand(tmp_path: Path):
    (tmp_path / "kustomization.yaml").write_text(
        "resources: []\nconfigMapGenerator:\n  - name: x\n"
    )
    with pytest.raises(KustomizeError, match="unsupported"):
        build(tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        "resources: []\npatches:\n  - target: {kind: Deployment, name: nope}\n    patch: '[]'\n"
    )
    with pytest.raises(KustomizeError, match="matches nothing"):
        build(tmp_path)
