#!/usr/bin/env python3
"""Offline validation of collbench's Kubernetes manifests (k8s/*.yaml), as strict as the API server.

Run by tests/k8s/validate.sh, which makes the virtual environment this needs (tests/k8s/requirements.txt).

Every document of every file is checked by:
- schema: kind MPIJob (kubeflow.org/v2beta1) against the openAPIV3Schema of the MPIJob CRD (--crd), any
  other kind against the strict JSON schemas of Kubernetes itself that kubernetes-validate bundles, for
  each Kubernetes version in --k8s-versions (read here directly: its validate() stops at the first
  error and only warns about a kind it has no schema for; here every error is listed and an unknown
  kind is one). "Strict" means unknown fields are errors, as with
  `kubectl apply` (field validation "Strict"). A CRD schema leaves objects open unless told otherwise
  (the API server prunes what it does not know, and strict field validation reports it), so every
  object in the CRD schema without properties-for-all (additionalProperties) or
  x-kubernetes-preserve-unknown-fields is closed here. The CRD's root `metadata` is a bare
  `type: object` (the API server checks it as ObjectMeta), so it is checked against Kubernetes'
  ObjectMeta; each MPIJob pod template is also checked against Kubernetes' PodTemplateSpec, because
  the operator turns it into real pods of the cluster's version. Lists marked x-kubernetes-list-type
  map/set must not repeat a key or an item (the API server refuses that in custom resources; in its own
  kinds it may only warn, e.g. a repeated env name, which is a mistake all the same); formats int32,
  int64 and byte (base64) are checked.
- pod rules the API server applies beyond the schema: every container has an image, volume mounts
  name a volume of the pod, port names are IANA service names, resource amounts are quantities.
- MPI Operator rules (its pkg/apis/kubeflow/validation, after its defaults): only Launcher and Worker,
  one Launcher, at least one Worker, restart policies, clean pod policy, launcherCreationPolicy,
  managedBy, worker host names <= 63.
- collbench rules: the launcher runs `collbench run`; an mpirun -np agrees with Worker replicas x
  slotsPerWorker; hostNetwork pods use dnsPolicy ClusterFirstWithHostNet; an Indexed Job agrees with
  its headless Service, COLLBENCH_WORLD_SIZE, COLLBENCH_ROOT and the token's Secret volume; no file holds
  a Secret (applying the manifests must never replace a real token: the Secret is made with kubectl create).

With --expect-fail, each file must fail, and every `# expect: TEXT` line in it must match (as a
substring) at least one reported error: the self-test that proves the checks can fail.
Exit status: 0 all valid (or all bad files failed as expected), 1 not so, 2 setup error.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import yaml
from jsonschema import FormatChecker, ValidationError, validators
from jsonschema.exceptions import best_match
from kubernetes_validate import utils as kv
from kubernetes_validate.version import __version__ as KV_VERSION
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

DEFS_URI = "https://kubernetes.io/api/_definitions.json"
OBJECT_META = "/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
POD_TEMPLATE = "/api/_definitions.json#/$defs/io.k8s.api.core.v1.PodTemplateSpec"
# Kubernetes' resource.Quantity syntax (the pattern the CRD uses; Kubernetes' own JSON schemas say only
# "string or number").
QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
EXPECT = re.compile(r"^#\s*expect:\s*(.+?)\s*$", re.MULTILINE)

Path_ = tuple  # a path into a document: keys and list indices


# ---------------------------------------------------------------- YAML with line numbers


class StrictLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key repeated in one mapping (PyYAML keeps the last silently; kubectl's
    strict decoding refuses it)."""


def _mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False):
    loader.flatten_mapping(node)
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key]})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _index_lines(node, path: Path_, lines: dict) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            _index_lines(value_node, path + (key,), lines)
            lines[path + (key,)] = key_node.start_mark.line + 1  # an error at a key points at the key
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, path + (i,), lines)


@dataclass
class Doc:
    file: str
    number: int  # 1-based among the file's non-empty documents
    data: object
    lines: dict  # path -> line

    def line(self, path: Path_) -> int:
        for end in range(len(path), -1, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return 0

    @property
    def label(self) -> str:
        d = self.data if isinstance(self.data, dict) else {}
        meta = d.get("metadata") if isinstance(d.get("metadata"), dict) else {}
        return f"{d.get('kind', '?')}/{meta.get('name', '?')}"


def load_docs(path: str) -> list[Doc]:
    text = Path(path).read_text()
    loader = StrictLoader(text)
    docs = []
    try:
        while loader.check_node():
            node = loader.get_node()
            data = loader.construct_document(node)
            if data is None:  # an empty document (a lone '---' or comments only)
                continue
            lines: dict = {}
            _index_lines(node, (), lines)
            docs.append(Doc(path, len(docs) + 1, data, lines))
    finally:
        loader.dispose()
    return docs


# ---------------------------------------------------------------- errors


@dataclass
class Problem:
    doc: Doc | None
    file: str
    path: Path_
    message: str
    sources: list = field(default_factory=list)

    def render(self) -> str:
        head = (
            f"{self.file}:{self.doc.line(self.path)}: doc {self.doc.number} {self.doc.label}" if self.doc else self.file
        )
        at = f" {dotted(self.path)}:" if self.path else ""
        src = f" [{', '.join(self.sources)}]" if self.sources else ""
        return f"{head}:{at} {self.message}{src}"


def ordered(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.doc.number if p.doc else 0, p.doc.line(p.path) if p.doc else 0))


def dotted(path: Path_) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


class Report:
    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._index: dict = {}

    def add(self, doc: Doc | None, path: Path_, message: str, source: str, file: str = "") -> None:
        key = (doc.file if doc else file, doc.number if doc else 0, tuple(path), message)
        if key in self._index:  # the same finding from several checks or versions: one line
            if source not in self._index[key].sources:
                self._index[key].sources.append(source)
            return
        p = Problem(doc, doc.file if doc else file, tuple(path), message, [source])
        self._index[key] = p
        self.problems.append(p)


# ---------------------------------------------------------------- schemas


def _list_type(validator, value, instance, schema):
    """x-kubernetes-list-type: a "set" repeats no item; a "map" repeats no key tuple
    (x-kubernetes-list-map-keys; a missing key counts as its default where the schema gives one)."""
    if not validator.is_type(instance, "array"):
        return
    seen: dict = {}
    if value == "set":
        for i, item in enumerate(instance):
            key = json.dumps(item, sort_keys=True)
            if key in seen:
                yield ValidationError(f"{item!r} repeats item [{seen[key]}] (x-kubernetes-list-type: set)", path=[i])
            seen.setdefault(key, i)
    elif value == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        props = mapping(items.get("properties"))
        for i, item in enumerate(instance):
            if not isinstance(item, dict) or not keys:
                continue
            values = tuple(item.get(k, mapping(props.get(k)).get("default")) for k in keys)
            key = json.dumps(values, sort_keys=True, default=str)  # values may be anything, even mappings
            if key in seen:
                shown = ", ".join(f"{k}={v!r}" for k, v in zip(keys, values))
                yield ValidationError(
                    f"entry with {shown} repeats entry [{seen[key]}] (x-kubernetes-list-type: map)", path=[i]
                )
            seen.setdefault(key, i)


K8sValidator = validators.extend(jsonschema.Draft202012Validator, {"x-kubernetes-list-type": _list_type})

FORMATS = FormatChecker(formats=())


@FORMATS.checks("int32")
def _int32(v) -> bool:
    return not isinstance(v, int) or isinstance(v, bool) or -(2**31) <= v < 2**31


@FORMATS.checks("int64")
def _int64(v) -> bool:
    return not isinstance(v, int) or isinstance(v, bool) or -(2**63) <= v < 2**63


@FORMATS.checks("byte", raises=(binascii.Error, ValueError))
def _byte(v) -> bool:
    if isinstance(v, str):
        base64.b64decode(v, validate=True)
    return True


@dataclass
class CrdStats:
    closed: int = 0
    open_paths: list = field(default_factory=list)  # x-kubernetes-preserve-unknown-fields


def strictify(node, stats: CrdStats, path: str = ""):
    """A structural CRD schema as the API server reads it with strict field validation, in JSON Schema:
    objects without additionalProperties or x-kubernetes-preserve-unknown-fields take no unknown fields."""
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k != "description"}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: strictify(v, stats, f"{path}.{k}") for k, v in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = strictify(out["items"], stats, f"{path}[]")
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = strictify(out["additionalProperties"], stats, f"{path}.*")
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(out.get(key), list):
            out[key] = [strictify(s, stats, path) for s in out[key]]
    if out.get("type") == "object":
        if out.get("x-kubernetes-preserve-unknown-fields"):
            stats.open_paths.append(path or "(root)")
        elif "additionalProperties" not in out:
            if out.get("x-kubernetes-embedded-resource"):
                out.setdefault("properties", {})
                out["properties"].setdefault("apiVersion", {"type": "string"})
                out["properties"].setdefault("kind", {"type": "string"})
                out["properties"].setdefault("metadata", {"$ref": OBJECT_META})
            out["additionalProperties"] = False
            stats.closed += 1
    return out


def load_crds(path: str) -> tuple[dict, CrdStats]:
    """{(apiVersion, kind): strict schema} for every served version of every CRD in the file."""
    stats = CrdStats()
    out = {}
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if isinstance(d, dict)]
    for crd in docs:
        if crd.get("kind") != "CustomResourceDefinition":
            continue
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if not version.get("served", False):
                continue
            schema = strictify(version["schema"]["openAPIV3Schema"], stats)
            # The API server checks a custom resource's metadata as ObjectMeta; the CRD says only "object".
            schema.setdefault("properties", {})["metadata"] = {"$ref": OBJECT_META}
            schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata"})
            schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
            schema["$id"] = f"https://kubernetes.io/api/crd/{crd['metadata']['name']}/{version['name']}"
            out[(f"{group}/{version['name']}", kind)] = schema
    if not out:
        raise setup_error(f"no served CustomResourceDefinition version in {path}")
    return out, stats


class NoSchema(Exception):
    pass


def setup_error(message: str) -> SystemExit:
    print(f"setup: {message}", file=sys.stderr)
    return SystemExit(2)


class Schemas:
    def __init__(self, crds: dict, versions: list[str]) -> None:
        self.crds = crds
        bundled = sorted(set(kv.all_versions()), key=lambda b: tuple(int(x) for x in b.split(".")))
        self.versions = []  # (short "1.29", schema folder "v1.29.0-local-strict")
        for v in versions:
            full = [b for b in bundled if kv.major_minor(b) == v]
            if not full:
                raise setup_error(
                    f"kubernetes-validate {KV_VERSION} bundles no Kubernetes {v} "
                    f"(it has {', '.join(kv.major_minor(b) for b in bundled)})"
                )
            self.versions.append((v, f"v{full[-1]}-local-strict"))
        self._registries: dict = {}
        self._validators: dict = {}

    def _contents(self, folder: str, name: str, version: str):
        return kv.schema_contents(f"kubernetes-json-schema/{folder}/{name}", version)

    def registry(self, version: str, folder: str) -> Registry:
        if folder not in self._registries:
            defs = self._contents(folder, "_definitions.json", version)
            self._registries[folder] = Registry().with_resource(DEFS_URI, Resource.from_contents(defs))
        return self._registries[folder]

    def _make(self, schema: dict, version: str, folder: str):
        registry = self.registry(version, folder)
        registry = registry.with_resource(schema["$id"], Resource(schema, specification=DRAFT202012))
        return K8sValidator(schema, registry=registry, format_checker=FORMATS)

    def for_doc(self, api_version: str, kind: str, version: str, folder: str):
        key = ("doc", api_version, kind, folder)
        if key not in self._validators:
            if (api_version, kind) in self.crds:
                self._validators[key] = self._make(self.crds[(api_version, kind)], version, folder)
            else:
                group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
                try:
                    schema = self._contents(folder, f"{kind.lower()}-{group_version}.json", version)
                except FileNotFoundError:
                    raise NoSchema(
                        f"no schema for kind {kind!r} apiVersion {api_version!r}, neither Kubernetes' nor the "
                        f"CRD's (a misspelt kind or apiVersion?)"
                    ) from None
                self._validators[key] = self._make(schema, version, folder)
        return self._validators[key]

    def for_ref(self, ref: str, version: str, folder: str):
        key = ("ref", ref, folder)
        if key not in self._validators:
            schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": ref}
            schema["$id"] = f"https://kubernetes.io/api/ref/{ref.rsplit('/', 1)[-1]}"
            self._validators[key] = self._make(schema, version, folder)
        return self._validators[key]


def schema_errors(validator, instance) -> list[tuple[Path_, str]]:
    out = []
    for e in validator.iter_errors(instance):
        path = tuple(e.absolute_path)
        message = e.message
        if e.validator == "additionalProperties" and isinstance(e.instance, dict):
            # Point at each unknown field itself.
            known = set((e.schema.get("properties") or {}).keys())
            for extra in sorted(set(e.instance) - known, key=str):
                out.append((path + (extra,), f"unknown field {extra!r}"))
            continue
        if e.validator == "pattern" and e.validator_value == QUANTITY.pattern:
            message = f"{e.instance!r} is not a quantity (like 500m, 4, 2Gi)"
        if e.context:  # anyOf/oneOf: say why the closest branch failed
            inner = best_match(e.context)
            message = (
                f"{message} ({dotted(tuple(inner.relative_path)) + ': ' if inner.relative_path else ''}{inner.message})"
            )
        out.append((path, message))
    return out


# ---------------------------------------------------------------- rules beyond the schema


def dig(obj, *keys, default=None):
    """obj[k1][k2]..., or `default` where a step is missing or not a mapping (broken input must give
    errors, not a traceback)."""
    for k in keys:
        if not isinstance(obj, dict) or not isinstance(k, (str, int)) or obj.get(k) is None:
            return default
        obj = obj[k]
    return obj


def mapping(obj) -> dict:
    return obj if isinstance(obj, dict) else {}


def seq(obj) -> list:
    return obj if isinstance(obj, list) else []


def iana_svc_name(name: str) -> bool:
    return (
        len(name) <= 15
        and re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", name) is not None
        and "--" not in name
        and re.search(r"[a-z]", name) is not None
    )


def pod_rules(spec, path: Path_) -> list[tuple[Path_, str, str]]:
    """What the API server refuses in a pod spec although the schema allows it ("pod rules"), and what
    collbench's pods need ("collbench")."""
    out: list = []
    if not isinstance(spec, dict):
        return out
    volumes = [v for v in seq(spec.get("volumes")) if isinstance(v, dict)]
    names = [v.get("name") for v in volumes]
    if not spec.get("containers"):
        out.append((path + ("containers",), "a pod needs at least one container", "pod rules"))
    if spec.get("hostNetwork") and spec.get("dnsPolicy") != "ClusterFirstWithHostNet":
        why = "hostNetwork: true needs dnsPolicy: ClusterFirstWithHostNet to resolve the job's Service names"
        out.append((path + ("dnsPolicy",), why, "collbench"))
    for group in ("initContainers", "containers"):
        for i, c in enumerate(seq(spec.get(group))):
            if not isinstance(c, dict):
                continue
            p = path + (group, i)
            if not c.get("image"):
                out.append((p + ("image",), "required: every container needs an image", "pod rules"))
            for j, m in enumerate(seq(c.get("volumeMounts"))):
                if isinstance(m, dict) and m.get("name") not in names:
                    why = f"no volume named {m.get('name')!r} in this pod (volumes: {names})"
                    out.append((p + ("volumeMounts", j, "name"), why, "pod rules"))
            for j, port in enumerate(seq(c.get("ports"))):
                name = port.get("name") if isinstance(port, dict) else None
                if isinstance(name, str) and not iana_svc_name(name):
                    why = f"{name!r} is not an IANA service name (<= 15 of a-z 0-9 -)"
                    out.append((p + ("ports", j, "name"), why, "pod rules"))
            resources = c.get("resources") if isinstance(c.get("resources"), dict) else {}
            for section in ("limits", "requests"):
                for k, v in mapping(resources.get(section)).items():
                    if isinstance(v, bool) or not QUANTITY.match(str(v)):
                        why = f"{v!r} is not a quantity (like 500m, 4, 2Gi)"
                        out.append((p + ("resources", section, k), why, "pod rules"))
    for i, v in enumerate(volumes):
        limit = dig(v, "emptyDir", "sizeLimit")
        if limit is not None and (isinstance(limit, bool) or not QUANTITY.match(str(limit))):
            why = f"{limit!r} is not a quantity (like 500m, 4, 2Gi)"
            out.append((path + ("volumes", i, "emptyDir", "sizeLimit"), why, "pod rules"))
    return out


def script_of(container) -> str:
    if not isinstance(container, dict):
        return ""
    return " ".join(str(x) for x in seq(container.get("command")) + seq(container.get("args")))


def mpijob_rules(d: dict) -> list[tuple[Path_, str, str]]:
    """The MPI Operator's own validation (after its defaults), then collbench's expectations."""
    op, cb = "mpi-operator", "collbench"
    out: list = []
    spec = d.get("spec") if isinstance(d.get("spec"), dict) else {}
    specs = spec.get("mpiReplicaSpecs") if isinstance(spec.get("mpiReplicaSpecs"), dict) else {}
    base = ("spec", "mpiReplicaSpecs")
    for k in specs:
        if k not in ("Launcher", "Worker"):
            out.append((base + (k,), "the operator knows only the replica types Launcher and Worker", op))
    for k, rs in specs.items():
        if not isinstance(rs, dict):
            continue
        rp = rs.get("restartPolicy")
        if rp is not None and rp not in ("Never", "OnFailure"):
            out.append((base + (k, "restartPolicy"), f"{rp!r}: the operator accepts Never or OnFailure", op))
        pod = dig(rs, "template", "spec")
        if not (isinstance(pod, dict) and pod.get("containers")):
            out.append((base + (k, "template", "spec", "containers"), "must define at least one container", op))
    launcher, worker = specs.get("Launcher"), specs.get("Worker")
    if not isinstance(launcher, dict):
        out.append((base, "must have a Launcher replica spec", op))
    elif launcher.get("replicas", 1) != 1:
        out.append((base + ("Launcher", "replicas"), "must be 1", op))
    workers = worker.get("replicas", 0) if isinstance(worker, dict) else 0
    if isinstance(worker, dict) and (not isinstance(workers, int) or workers < 1):
        out.append((base + ("Worker", "replicas"), "must be 1 or more", op))
    if not isinstance(worker, dict):
        out.append((base, "collbench's ranks run on the workers: a Worker replica spec is needed", cb))
    policy = dig(spec, "runPolicy", "cleanPodPolicy")
    if policy is not None and policy not in ("None", "Running", "All"):
        out.append((("spec", "runPolicy", "cleanPodPolicy"), f"{policy!r}: one of None, Running, All", op))
    for k in ("activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished"):
        v = dig(spec, "runPolicy", k)
        if isinstance(v, int) and v < 0:
            out.append((("spec", "runPolicy", k), "must not be negative", op))
    lcp = spec.get("launcherCreationPolicy")
    if lcp is not None and lcp not in ("AtStartup", "WaitForWorkersReady"):
        out.append((("spec", "launcherCreationPolicy"), f"{lcp!r}: one of AtStartup, WaitForWorkersReady", op))
    managed = dig(spec, "runPolicy", "managedBy")
    if managed not in (None, "", "kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue"):
        out.append((("spec", "runPolicy", "managedBy"), f"{managed!r}: the operator would ignore this job", op))
    slots = spec.get("slotsPerWorker", 1)
    if isinstance(slots, int) and slots < 0:
        out.append((("spec", "slotsPerWorker"), "must not be negative", op))
    name = str(dig(d, "metadata", "name", default=""))
    host = f"{name}-worker-{max(workers if isinstance(workers, int) else 1, 1) - 1}"
    if name and (len(host) > 63 or not DNS_LABEL.match(host)):
        out.append((("metadata", "name"), f"worker host name {host!r} is not a DNS label (<= 63 of a-z 0-9 -)", op))

    # collbench: the launcher runs collbench, and an explicit rank count agrees with the job.
    if isinstance(launcher, dict):
        containers = dig(launcher, "template", "spec", "containers", default=[])
        containers = containers if isinstance(containers, list) else []
        script = script_of(containers[0]) if containers else ""
        p = base + ("Launcher", "template", "spec", "containers", 0)
        if "collbench run" not in script:
            out.append((p, "the launcher's first container does not run `collbench run`", cb))
        for m in re.finditer(r"\bmpirun\b(.*?)(?=\bcollbench\b|\bmpirun\b|$)", script, re.S):
            np = re.search(r"(?:^|\s)(?:-np|--np|-n|--n|-c)\s+(\S+)", m.group(1))
            if np and np.group(1).isdigit() and isinstance(workers, int) and isinstance(slots, int):
                if int(np.group(1)) != workers * slots:
                    out.append((p, f"mpirun -np {np.group(1)} but the job has {workers} workers x {slots} slots", cb))
    return out


def indexed_job_rules(job: dict, docs: list[Doc]) -> list[tuple[Path_, str]]:
    """A collbench Indexed Job agrees with itself and with the Service of its file, and reads its token
    from a Secret volume."""
    out: list = []
    spec = job.get("spec") if isinstance(job.get("spec"), dict) else {}
    pod = mapping(dig(spec, "template", "spec"))
    labels = mapping(dig(spec, "template", "metadata", "labels"))
    containers = [c if isinstance(c, dict) else {} for c in seq(dig(pod, "containers"))]
    i, c = next(
        (
            (i, c)
            for i, c in enumerate(containers)
            if any(isinstance(e, dict) and str(e.get("name", "")).startswith("COLLBENCH_") for e in seq(c.get("env")))
        ),
        (None, None),
    )
    if c is None:
        return out  # not a collbench Job
    cp: Path_ = ("spec", "template", "spec", "containers", i)
    env = {
        e["name"]: (j, e.get("value"))
        for j, e in enumerate(seq(c.get("env")))
        if isinstance(e, dict) and isinstance(e.get("name"), str)
    }
    name = str(dig(job, "metadata", "name", default=""))
    others = [d.data for d in docs if isinstance(d.data, dict)]

    if spec.get("completionMode") != "Indexed":
        out.append((("spec", "completionMode"), "must be Indexed: the completion index is the rank"))
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    if completions != parallelism:
        out.append(
            (("spec", "parallelism"), f"{parallelism!r} != completions {completions!r}: all ranks must run at once")
        )
    if "COLLBENCH_WORLD_SIZE" not in env:
        out.append((cp + ("env",), "COLLBENCH_WORLD_SIZE is not set (the number of ranks, = completions)"))
    elif str(env["COLLBENCH_WORLD_SIZE"][1]) != str(completions):
        j = env["COLLBENCH_WORLD_SIZE"][0]
        out.append(
            (
                cp + ("env", j, "value"),
                f"COLLBENCH_WORLD_SIZE {env['COLLBENCH_WORLD_SIZE'][1]!r} != completions {completions}",
            )
        )

    sub = pod.get("subdomain")
    services = [o for o in others if o.get("kind") == "Service" and dig(o, "metadata", "name") == sub]
    if not sub:
        out.append(
            (
                ("spec", "template", "spec"),
                "no subdomain: rank 0 has no DNS name (set it to the headless Service's name)",
            )
        )
    elif not services:
        out.append((("spec", "template", "spec", "subdomain"), f"no Service named {sub!r} in this file"))
    else:
        svc = mapping(services[0].get("spec"))
        if svc.get("clusterIP") != "None":
            out.append(
                (("spec", "template", "spec", "subdomain"), f"Service {sub!r} must be headless (clusterIP: None)")
            )
        selector = mapping(svc.get("selector"))
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            out.append(
                (
                    ("spec", "template", "metadata", "labels"),
                    f"Service {sub!r}'s selector {selector} does not select these pods",
                )
            )
        if not svc.get("publishNotReadyAddresses"):
            out.append(
                (
                    ("spec", "template", "spec", "subdomain"),
                    f"Service {sub!r} needs publishNotReadyAddresses: true (ranks resolve rank 0 while starting)",
                )
            )

    if "COLLBENCH_ROOT" in env:
        j, root = env["COLLBENCH_ROOT"]
        host, _, port = str(root).rpartition(":")
        want = f"{name}-0.{sub}"
        ports = [p.get("containerPort") for p in seq(c.get("ports")) if isinstance(p, dict)]
        if not (host == want or host.startswith(want + ".")):
            out.append((cp + ("env", j, "value"), f"COLLBENCH_ROOT host {host!r} is not rank 0's name {want!r}"))
        if not port.isdigit() or int(port) not in ports:
            out.append(
                (
                    cp + ("env", j, "value"),
                    f"COLLBENCH_ROOT port {port!r} is not a containerPort of this container {ports}",
                )
            )
    elif "MASTER_ADDR" not in env:
        out.append((cp + ("env",), "neither COLLBENCH_ROOT nor MASTER_ADDR is set: ranks cannot find rank 0"))

    if "COLLBENCH_JOB_TOKEN_FILE" in env:
        j, token_path = env["COLLBENCH_JOB_TOKEN_FILE"]
        volumes = {
            v["name"]: v for v in seq(pod.get("volumes")) if isinstance(v, dict) and isinstance(v.get("name"), str)
        }
        mounts = [m for m in seq(c.get("volumeMounts")) if isinstance(m, dict) and isinstance(m.get("mountPath"), str)]
        hit = [m for m in mounts if str(token_path).startswith(m["mountPath"].rstrip("/") + "/")]
        where = cp + ("env", j, "value")
        if not hit:
            out.append((where, f"{token_path!r} is under no volume mount of this container"))
        else:
            m = max(hit, key=lambda m: len(m["mountPath"]))
            secret = dig(volumes, m.get("name"), "secret")
            key = str(token_path)[len(m["mountPath"].rstrip("/")) + 1 :]
            if not isinstance(secret, dict):
                out.append((where, f"{token_path!r} is not in a Secret volume"))
            elif not isinstance(secret.get("secretName"), str) or not secret.get("secretName"):
                out.append((where, f"the Secret volume of {token_path!r} names no secretName"))
            else:
                # The Secret is made outside the manifests (kubectl create secret): see no_secret_rule.
                items = [i for i in seq(secret.get("items")) if isinstance(i, dict)]
                if items and not any(i.get("path") == key for i in items):
                    out.append((where, f"the Secret volume's items do not put a file at {key!r}"))
    return out


# ---------------------------------------------------------------- driver


def validate_file(path: str, schemas: Schemas, report: Report) -> list[Doc]:
    """Checks one file into `report`; returns its documents."""
    try:
        docs = load_docs(path)
    except OSError as e:
        report.add(None, (), f"cannot be read: {e}", "file", file=path)
        return []
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{path}:{mark.line + 1}" if mark else path
        what = "; ".join(str(x) for x in (e.context, e.problem) if x)
        report.add(None, (), f"not valid YAML: {what}", "yaml", file=where)
        return []
    except yaml.YAMLError as e:
        report.add(None, (), f"not valid YAML: {e}", "yaml", file=path)
        return []
    if not docs:
        report.add(None, (), "holds no document", "yaml", file=path)
    for doc in docs:
        d = doc.data
        if not isinstance(d, dict):
            report.add(doc, (), "a document must be a mapping (a Kubernetes object)", "yaml")
            continue
        api_version, kind = d.get("apiVersion"), d.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            report.add(doc, (), "apiVersion and kind are required strings", "schema")
            continue
        meta = d.get("metadata") if isinstance(d.get("metadata"), dict) else {}
        if not meta.get("name"):
            report.add(doc, ("metadata",), "metadata.name is required (kubectl apply needs it)", "schema")
        for version, folder in schemas.versions:
            tag = f"k8s {version}"
            try:
                validator = schemas.for_doc(api_version, kind, version, folder)
            except NoSchema as e:
                report.add(doc, ("kind",), str(e), tag)
                continue
            crd = (api_version, kind) in schemas.crds
            for p, msg in schema_errors(validator, d):
                # A custom resource's schema is the CRD's, but for its metadata (Kubernetes' ObjectMeta).
                source = tag if not crd else (f"CRD + {tag} ObjectMeta" if p[:1] == ("metadata",) else "CRD")
                report.add(doc, p, msg, source)
            if kind == "MPIJob":
                for rtype, rs in mapping(dig(d, "spec", "mpiReplicaSpecs")).items():
                    if isinstance(rs, dict) and "template" in rs:
                        pt = schemas.for_ref(POD_TEMPLATE, version, folder)
                        for p, msg in schema_errors(pt, rs["template"]):
                            p2 = ("spec", "mpiReplicaSpecs", rtype, "template") + p
                            report.add(doc, p2, msg, f"{tag} PodTemplateSpec")
        # Rules beyond the schema.
        if kind == "Secret":
            report.add(
                doc,
                ("kind",),
                f"Secret {meta.get('name')!r} in the manifests: applying them would replace the real one (a job "
                "token); make it with kubectl create secret and only reference it",
                "collbench",
            )
        if kind == "MPIJob":
            for rtype, rs in mapping(dig(d, "spec", "mpiReplicaSpecs")).items():
                pod = dig(rs, "template", "spec")
                for p, msg, source in pod_rules(pod, ("spec", "mpiReplicaSpecs", rtype, "template", "spec")):
                    report.add(doc, p, msg, source)
            for p, msg, source in mpijob_rules(d):
                report.add(doc, p, msg, source)
        elif kind in ("Job", "Pod", "Deployment", "StatefulSet", "DaemonSet"):
            spec = d.get("spec") if isinstance(d.get("spec"), dict) else {}
            pod = spec if kind == "Pod" else dig(spec, "template", "spec")
            prefix = ("spec",) if kind == "Pod" else ("spec", "template", "spec")
            for p, msg, source in pod_rules(pod, prefix):
                report.add(doc, p, msg, source)
            if kind == "Job":
                rp = dig(pod, "restartPolicy")
                if rp not in ("Never", "OnFailure"):
                    report.add(
                        doc, prefix + ("restartPolicy",), f"{rp!r}: a Job's pods need Never or OnFailure", "pod rules"
                    )
                for p, msg in indexed_job_rules(d, docs):
                    report.add(doc, p, msg, "collbench")
    return docs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--crd", required=True, help="YAML file with the MPIJob CustomResourceDefinition")
    ap.add_argument(
        "--k8s-versions", default="1.29,1.37", help="Kubernetes versions to check against (default %(default)s)"
    )
    ap.add_argument(
        "--expect-fail", action="store_true", help="self-test: every file must fail, as its '# expect:' lines say"
    )
    args = ap.parse_args()

    start = time.monotonic()
    try:
        crds, stats = load_crds(args.crd)
    except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
        raise setup_error(f"cannot read the CRD from {args.crd}: {e}") from None
    schemas = Schemas(crds, [v.strip() for v in args.k8s_versions.split(",") if v.strip()])
    versions = ", ".join(v for v, _ in schemas.versions)
    if not args.expect_fail:
        print(
            f"schemas: {', '.join(f'{k} {a}' for a, k in crds)} from {args.crd} ({stats.closed} objects closed to "
            f"unknown fields; open by x-kubernetes-preserve-unknown-fields: {', '.join(stats.open_paths) or 'none'}); "
            f"Kubernetes {versions} (kubernetes-validate {KV_VERSION}, strict)"
        )

    failed = False
    ndocs = 0
    for path in args.files:
        report = Report()
        docs = validate_file(path, schemas, report)
        ndocs += len(docs)
        if not args.expect_fail:
            if report.problems:
                failed = True
                for p in ordered(report.problems):
                    print(f"FAIL {p.render()}")
            else:
                print(f"ok   {path}: {', '.join(d.label for d in docs)}")
            continue
        # Self-test: this file must fail, for each of the reasons it names.
        expected = EXPECT.findall(Path(path).read_text())
        lines = [p.render() for p in ordered(report.problems)]
        missing = [e for e in expected if not any(e in line for line in lines)]
        if not expected:
            failed = True
            print(f"FAIL {path}: a self-test file needs '# expect: TEXT' lines naming the errors it must cause")
        elif not report.problems:
            failed = True
            print(f"FAIL {path}: passed validation, but it is broken on purpose: the checks are too weak")
        elif missing:
            failed = True
            print(f"FAIL {path}: failed, but without the expected error(s): {missing}; it reported:")
        else:
            print(f"ok   {path}: fails as it must ({len(lines)} errors, {len(expected)} expected ones among them)")
        for line in lines:
            print(f"       {line}")

    took = time.monotonic() - start
    what = "self-test files" if args.expect_fail else "files"
    verdict = "FAILED" if failed else "passed"
    print(f"{verdict}: {len(args.files)} {what}, {ndocs} documents, Kubernetes {versions}, {took:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
