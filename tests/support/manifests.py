"""The Kubernetes manifests (deploy/kubernetes), offline: rendered and
validated with no cluster.

- :func:`render` is kustomize for the little the manifests use (resources,
  files or folders; ``labels`` without selectors; ``images``' tags): kubectl's
  kustomize is not in every apt source (Debian's kubectl 1.20 is too old for
  ``labels``), so CI renders without it. Any other key is refused, naming it.
  Where kubectl is, :func:`kubectl_render` renders the same folders and a test
  holds the two equal.
- :func:`validate` checks one object: a built-in kind against the Kubernetes
  API's schemas (``kubernetes-validate``, strict); a custom resource against
  its CRD's own schema vendored in deploy/kubernetes/schemas (unknown fields
  refused, as ``kubectl apply``'s server-side field validation refuses them),
  its metadata as an ObjectMeta, and a pod template inside it as a Pod.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

__all__ = [
    "FOLDER",
    "KUBERNETES",
    "SCHEMAS",
    "ManifestError",
    "crd_schema",
    "kubectl_render",
    "render",
    "validate",
]

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "deploy" / "kubernetes"
SCHEMAS = FOLDER / "schemas"
#: The Kubernetes API version the built-in kinds are checked against.
KUBERNETES = "1.31"

Doc = dict[str, Any]


class ManifestError(Exception):
    """A manifest that does not render or does not fit its schema."""


# -- rendering --------------------------------------------------------------------------

#: The kustomization keys :func:`render` carries out; any other is refused.
KNOWN = frozenset({"apiVersion", "kind", "labels", "resources", "images"})


def _load(path: Path) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _image_name(image: str) -> str:
    """An image reference without its tag or digest."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def _set_images(node: Any, images: list[Doc]) -> None:
    """kustomize's images: every ``containers`` and ``initContainers`` list,
    wherever it is in the object (a CRD's pod template too)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                for container in value:
                    for image in images:
                        if _image_name(container.get("image", "")) == image["name"]:
                            name = image.get("newName", image["name"])
                            container["image"] = f"{name}:{image['newTag']}"
            _set_images(value, images)
    elif isinstance(node, list):
        for item in node:
            _set_images(item, images)


def render(folder: Path) -> list[Doc]:
    """The objects ``kubectl kustomize folder`` gives, for the keys in
    :data:`KNOWN` (:class:`ManifestError` naming any other)."""
    path = folder / "kustomization.yaml"
    if not path.is_file():
        raise ManifestError(f"{folder} has no kustomization.yaml")
    kustomization = yaml.safe_load(path.read_text())
    unknown = sorted(set(kustomization) - KNOWN)
    if unknown:
        raise ManifestError(
            f"{path}: the offline renderer does not carry out {', '.join(unknown)}; "
            "teach tests/support/manifests.py or use only " + ", ".join(sorted(KNOWN))
        )
    docs: list[Doc] = []
    for resource in kustomization.get("resources", []):
        where = (folder / resource).resolve()
        docs.extend(render(where) if where.is_dir() else _load(where))
    for label in kustomization.get("labels", []):
        if label.get("includeSelectors") or label.get("includeTemplates"):
            raise ManifestError(f"{path}: labels into selectors or templates are not rendered")
        for doc in docs:
            doc.setdefault("metadata", {}).setdefault("labels", {}).update(label["pairs"])
    images = kustomization.get("images", [])
    for image in images:
        if set(image) - {"name", "newName", "newTag"} or "newTag" not in image:
            raise ManifestError(f"{path}: an image is given by name, newTag and newName only")
    for doc in docs:
        _set_images(doc, images)
    return docs


def kubectl_render(folder: Path) -> list[Doc] | None:
    """``kubectl kustomize folder``'s objects, or None without kubectl."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    done = subprocess.run(
        [kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise ManifestError(f"kubectl kustomize {folder}: {done.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


# -- validating -------------------------------------------------------------------------


def _strict(node: Any) -> Any:
    """A CRD schema that refuses unknown fields: every object that lists its
    properties and neither allows others nor keeps unknown fields."""
    if isinstance(node, dict):
        out = {key: _strict(value) for key, value in node.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strict(item) for item in node]
    return node


def crd_schema(api_version: str, kind: str) -> Doc:
    """The vendored schema of a custom resource (:class:`ManifestError` when
    none is vendored)."""
    group, _, version = api_version.rpartition("/")
    path = SCHEMAS / group / f"{kind.lower()}_{version}.json"
    if not group or not path.is_file():
        raise ManifestError(
            f"no schema for {kind} {api_version}: vendor its CRD's with "
            "scripts/crd-schemas.py (deploy/kubernetes/schemas/SOURCES.md)"
        )
    schema: Doc = _strict(json.loads(path.read_text()))
    return schema


def _builtin(doc: Doc, within: Doc, prefix: str) -> None:
    """``doc`` (a part of ``within`` at ``prefix``, dressed as a built-in
    kind) against the API's schemas; errors name ``within``'s field."""
    try:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = "/".join([*([prefix] if prefix else []), *(str(p) for p in exc.path)])
        raise ManifestError(f"{within['kind']} {_name(within)}: {where}: {exc.message}") from None


def _name(doc: Doc) -> str:
    meta = doc.get("metadata") or {}
    return str(meta.get("name") or meta.get("generateName") or "?")


def _pod_templates(node: Any) -> list[Doc]:
    """The ``podTemplate`` objects anywhere in a custom resource."""
    found: list[Doc] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "podTemplate" and isinstance(value, dict):
                found.append(value)
            found.extend(_pod_templates(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_pod_templates(item))
    return found


def validate(doc: Doc) -> None:
    """:class:`ManifestError` saying where ``doc`` does not fit its schema."""
    try:
        kubernetes_validate.validate(copy.deepcopy(doc), KUBERNETES, strict=True)
        return
    except kubernetes_validate.SchemaNotFoundError:
        pass  # a custom resource
    except kubernetes_validate.ValidationError as exc:
        where = "/".join(str(p) for p in exc.path)
        raise ManifestError(f"{doc.get('kind')} {_name(doc)}: {where}: {exc.message}") from None
    schema = crd_schema(str(doc.get("apiVersion", "")), str(doc.get("kind", "")))
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        said = "; ".join(f"{'/'.join(str(p) for p in e.path)}: {e.message}" for e in errors[:5])
        raise ManifestError(f"{doc['kind']} {_name(doc)}: {said}")
    # What the CRD leaves open, the API server checks as its own kinds.
    meta = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc.get("metadata", {})}
    _builtin(meta, doc, "")
    for template in _pod_templates(doc.get("spec")):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "template", **template.get("metadata", {})},
            "spec": template["spec"],
        }
        _builtin(pod, doc, "podTemplate")
