"""Render a Kustomize overlay in Python (the subset deploy/k8s uses), for the manifest tests.

No kustomize binary installs from the registries reachable here, so the tests render the
overlays themselves: `resources` (files and directories), `namespace`, `labels` (metadata
only), `images`, `replicas` and `patches` with JSON 6902 operations (inline or from a file)
on a `target`. Anything else in a kustomization is an error, so a field this renderer
ignores can never pass unnoticed.
"""

from __future__ import annotations

from pathlib import Path

import jsonpatch
import yaml

KNOWN_FIELDS = {
    "apiVersion",
    "kind",
    "resources",
    "namespace",
    "labels",
    "images",
    "replicas",
    "patches",
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}


class KustomizeError(Exception):
    """The kustomization uses something this renderer (and so the tests) do not know."""


def load_documents(path: Path) -> list[dict]:
    with path.open() as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc]


def build(directory: Path) -> list[dict]:
    """The rendered resources of the kustomization in `directory`."""
    kfile = directory / "kustomization.yaml"
    spec = yaml.safe_load(kfile.read_text())
    unknown = set(spec) - KNOWN_FIELDS
    if unknown:
        raise KustomizeError(f"{kfile}: unsupported fields {sorted(unknown)}")
    resources: list[dict] = []
    for entry in spec.get("resources", []):
        path = (directory / entry).resolve()
        if path.is_dir():
            resources.extend(build(path))
        else:
            resources.extend(load_documents(path))
    _check_unique(resources, kfile)
    for patch in spec.get("patches", []):
        _apply_patch(resources, patch, directory)
    for label in spec.get("labels", []):
        if set(label) - {"pairs"}:
            raise KustomizeError(f"{kfile}: only labels.pairs (metadata labels) is supported")
        for res in resources:
            res.setdefault("metadata", {}).setdefault("labels", {}).update(label["pairs"])
    if "namespace" in spec:
        _set_namespace(resources, spec["namespace"])
    for image in spec.get("images", []):
        _set_image(resources, image)
    for replica in spec.get("replicas", []):
        matches = [
            r
            for r in resources
            if r["metadata"]["name"] == replica["name"] and "replicas" in r.get("spec", {})
        ]
        if not matches:
            raise KustomizeError(f"{kfile}: replicas for unknown {replica['name']}")
        for res in matches:
            res["spec"]["replicas"] = replica["count"]
    return resources


def _check_unique(resources: list[dict], kfile: Path) -> None:
    seen = set()
    for res in resources:
        key = (res.get("kind"), res.get("metadata", {}).get("name"))
        if key in seen:
            raise KustomizeError(f"{kfile}: {key} defined twice")
        seen.add(key)


def _apply_patch(resources: list[dict], patch: dict, directory: Path) -> None:
    target = patch.get("target") or {}
    if set(target) - {"kind", "name"} or not target:
        raise KustomizeError(f"patch target {target!r}: only kind and name are supported")
    text = patch["patch"] if "patch" in patch else (directory / patch["path"]).read_text()
    ops = yaml.safe_load(text)
    if not isinstance(ops, list):
        raise KustomizeError("only JSON 6902 patches (a list of operations) are supported")
    matched = False
    for i, res in enumerate(resources):
        if _matches(res, target):
            resources[i] = jsonpatch.apply_patch(res, ops)
            matched = True
    if not matched:
        raise KustomizeError(f"patch target {target!r} matches nothing")


def _matches(res: dict, target: dict) -> bool:
    found = {"kind": res.get("kind"), "name": res.get("metadata", {}).get("name")}
    return all(found[key] == value for key, value in target.items())


def _set_namespace(resources: list[dict], namespace: str) -> None:
    for res in resources:
        if res["kind"] in CLUSTER_SCOPED:
            continue
        res["metadata"]["namespace"] = namespace
        if res["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for subject in res.get("subjects", []):
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = namespace


def _containers(res: dict) -> list[dict]:
    pod = res.get("spec", {})
    if res["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        pod = pod.get("template", {}).get("spec", {})
    elif res["kind"] == "CronJob":
        pod = pod.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec", {})
    else:
        return []
    return pod.get("containers", []) + pod.get("initContainers", [])


def _set_image(resources: list[dict], image: dict) -> None:
    for res in resources:
        for container in _containers(res):
            name = container["image"].split("@")[0].rsplit(":", 1)[0]
            if "/" in container["image"].rsplit(":", 1)[-1]:
                name = container["image"].split("@")[0]  # a registry port, no tag
            if name != image["name"]:
                continue
            new = image.get("newName", name)
            tag = image.get("newTag")
            if tag is None:
                tag = container["image"][len(name) + 1 :] if container["image"] != name else ""
            container["image"] = f"{new}:{tag}" if tag else new
