"""Kubernetes: one Job manifest per (node, matrix), generated behind the scheduler interface.

Untested against a cluster here: no Kubernetes runs on this machine. What is tested is the manifest
itself (valid YAML, the Job fields a cluster requires, checked offline by :func:`check_manifest`) and
the bad input refused before anything is written.

Each manifest is one YAML file of two documents:

* a ConfigMap holding the matrix (its includes merged) and the model registry, so the Job runs
  exactly what was validated here;
* a ``batch/v1`` Job pinned to its node by node affinity on ``metadata.name`` (the node's exact
  name, through the scheduler, unlike ``nodeName``), with exclusive use of the node: a required pod
  anti-affinity against every other almanac pod on the same ``kubernetes.io/hostname``, and, when
  ``--cpu``/``--memory``/``--gpus`` give the node's allocatable amounts, resources with requests equal
  to limits (the Guaranteed QoS class: no other pod can be given those cores or GPUs). No retries
  (``backoffLimit: 0``: a failed measurement is an artifact, not a reason to measure twice), the
  time limit as ``activeDeadlineSeconds``.

The container runs the same agent as SSH and Slurm (``python -m runtime.remote.agent run``) in the
project's image, with ``ALMANAC_DATA`` on a PersistentVolumeClaim (``--pvc``, the shared folder of the
Slurm path: ``nodes/<node>/data``) so the artifacts outlive the pod, the node's name as the host's
*name* (a label, never its id: the host is fingerprinted inside the pod as always), and the agent's
progress lines in the pod log.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core import artifacts
from core.errors import UserError
from core.paths import relpath
from runtime.execution import matrix as matrix_mod
from runtime.models import registry as models
from runtime.remote.controller import HostOutcome, ProgressFn

# RFC 1123 (Kubernetes' apimachinery validation): a label (namespaces, container and volume names) and a
# subdomain (node, Job and ConfigMap names)
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")  # sbatch --time's forms
CONFIGMAP_MAX_BYTES = 1024 * 1024
EXCLUSIVE_LABEL = "almanac.io/exclusive"
MATRIX_MOUNT = "/almanac-input"
OUT_MOUNT = "/almanac-out"


class KubernetesError(UserError):
    """Bad input for a Kubernetes Job: a node, a namespace, an image, a time limit, a resource."""


@dataclass
class K8sOptions:
    nodes: list[str] = field(default_factory=list)
    namespace: str = "default"
    image: str = ""
    python: str = ""  # the project's Python in the image (default: python)
    workdir: str = "/almanac"  # the project inside the image
    time_limit: str = "60"  # minutes, or [D-]HH:MM:SS (as Slurm's)
    cpu: str = ""  # the node's allocatable CPU: requests = limits
    memory: str = ""
    gpus: int = 0  # nvidia.com/gpu, requests = limits
    pvc: str = "almanac-data"
    known_nodes: list[str] | None = (
        None  # the cluster's nodes (kubectl, or --known-nodes FILE)
    )
    force: bool = False
    retry_failed: bool = False


def seconds(limit: str) -> int:
    """A time limit in seconds: minutes (``60``), ``MM:SS``, ``HH:MM:SS`` or ``D-HH[:MM[:SS]]``."""
    m = TIME.match(str(limit).strip())
    if not m:
        raise KubernetesError(
            f"{limit!r} is not a time limit (minutes, or [D-]HH:MM:SS)",
            field="time_limit",
        )
    d, a, b, c = (int(x) if x else None for x in m.groups())
    if d is None and b is None:
        total = (a or 0) * 60
    elif d is None and c is None:
        total = (a or 0) * 60 + (b or 0)  # MM:SS
    elif d is None:
        total = (a or 0) * 3600 + (b or 0) * 60 + (c or 0)
    else:
        total = d * 86400 + (a or 0) * 3600 + (b or 0) * 60 + (c or 0)
    if total <= 0:
        raise KubernetesError(f"{limit!r} is not a positive time", field="time_limit")
    return total


def cluster_nodes() -> list[str] | None:
    """The cluster's node names from kubectl, or None where kubectl is missing or does not answer."""
    if shutil.which("kubectl") is None:
        return None
    try:
        res = subprocess.run(
            ["kubectl", "get", "nodes", "-o", "name"],
            check=False,
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode != 0:
        return None
    return parse_node_list(res.stdout)


def parse_node_list(text: str) -> list[str]:
    """Node names from ``kubectl get nodes -o name`` (``node/<name>``) or one name a line."""
    return [
        ln.strip().removeprefix("node/")
        for ln in text.splitlines()
        if ln.strip() and not ln.startswith("#")
    ]


def read_node_file(path: str) -> list[str]:
    """``--known-nodes FILE``: the cluster's nodes as ``kubectl get nodes -o name`` printed them."""
    from core import safefile

    raw = safefile.read_bytes(
        path, max_bytes=4 * 1024 * 1024, what="node list", error=KubernetesError
    )
    try:
        return parse_node_list(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise KubernetesError("is not UTF-8 text", file=relpath(path)) from None


def check_options(opts: K8sOptions) -> None:
    """Every option, before anything is written: one KubernetesError line naming what is wrong."""
    if not DNS1123_LABEL.match(opts.namespace) or len(opts.namespace) > 63:
        raise KubernetesError(
            f"{opts.namespace!r} is not a namespace name (RFC 1123 label: lower-case letters, digits "
            "and '-', starting and ending with a letter or digit, at most 63 characters)",
            field="namespace",
        )
    if not opts.nodes:
        raise KubernetesError(
            "name the nodes to run on (--node NAME, repeatable)", field="node"
        )
    for n in opts.nodes:
        if not DNS1123_SUBDOMAIN.match(n) or len(n) > 253:
            raise KubernetesError(
                f"{n!r} is not a node name (RFC 1123 subdomain)", field="node"
            )
    if opts.known_nodes is not None:
        unknown = [n for n in opts.nodes if n not in opts.known_nodes]
        if unknown:
            shown = ", ".join(opts.known_nodes[:20]) or "none"
            raise KubernetesError(
                f"node {unknown[0]!r} is not a node of the cluster (nodes: {shown})",
                field="node",
            )
    if not opts.image or any(c.isspace() for c in opts.image):
        raise KubernetesError(
            "the container image with the project installed is required (--image REF)",
            field="image",
        )
    if not DNS1123_SUBDOMAIN.match(opts.pvc):
        raise KubernetesError(
            f"{opts.pvc!r} is not a PersistentVolumeClaim name (RFC 1123 subdomain)",
            field="pvc",
        )
    for name, value in (("cpu", opts.cpu), ("memory", opts.memory)):
        if value and not QUANTITY.match(value):
            raise KubernetesError(
                f"{value!r} is not a Kubernetes quantity (e.g. 16, 500m, 64Gi)",
                field=name,
            )
    if not isinstance(opts.gpus, int) or opts.gpus < 0:
        raise KubernetesError(
            f"{opts.gpus!r} is not a GPU count (0 or more)", field="gpus"
        )
    seconds(opts.time_limit)


def _name(*parts: str, limit: int = 63) -> str:
    """A DNS-1123 name from free text, cut to ``limit`` with a digest of the whole so two never collide."""
    text = "-".join(parts)
    base = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "x"
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{base[: limit - 9].rstrip('-')}-{digest}"


def _label(text: str) -> str:
    v = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:63].strip("-_.")
    return v if LABEL_VALUE.match(v) else ""


def manifest(
    matrix: matrix_mod.Matrix, node: str, opts: K8sOptions
) -> list[dict[str, Any]]:
    """The ConfigMap and the Job that run ``matrix`` on ``node`` (two documents of one file)."""
    raw = dict(matrix_mod._read_with_includes(matrix.path))
    raw.pop("include", None)
    data = {
        "matrix.yaml": yaml.safe_dump(raw, sort_keys=True, allow_unicode=True),
        "models.yaml": models.registry_path().read_text(encoding="utf-8"),
    }
    job = _name("almanac", matrix.name, node)
    labels = {
        "app.kubernetes.io/name": "inference-almanac",
        "almanac.io/matrix": _label(matrix.name),
        "almanac.io/node": _label(node),
    }
    python = opts.python or "python"
    data_dir = f"{OUT_MOUNT}/nodes/{node}/data"
    source = json.dumps(
        {
            "kubernetes": {
                "job": job,
                "namespace": opts.namespace,
                "node": node,
                "image": opts.image,
            }
        },
        sort_keys=True,
    )
    args = " --force" if opts.force else ""
    args += " --retry-failed" if opts.retry_failed else ""
    script = (
        'set -eu; mkdir -p "$ALMANAC_DATA/runs" "$ALMANAC_DATA/matrices"; '
        f'cp {MATRIX_MOUNT}/models.yaml "$ALMANAC_DATA/models.yaml"; '
        # a fixed file name: the matrix's own name is free text and never reaches the shell
        f'cp {MATRIX_MOUNT}/matrix.yaml "$ALMANAC_DATA/matrices/k8s-job.yaml"; '
        'exec "$ALMANAC_PYTHON" -m runtime.remote.agent run '
        f'--matrix "$ALMANAC_DATA/matrices/k8s-job.yaml"{args}'
    )
    resources: dict[str, Any] = {}
    amounts = {
        k: v
        for k, v in (
            ("cpu", opts.cpu),
            ("memory", opts.memory),
            ("nvidia.com/gpu", str(opts.gpus) if opts.gpus else ""),
        )
        if v
    }
    if (
        amounts
    ):  # requests = limits: the Guaranteed QoS class, the node's amounts all this pod's
        resources = {"requests": dict(amounts), "limits": dict(amounts)}
    container: dict[str, Any] = {
        "name": "almanac",
        "image": opts.image,
        "workingDir": opts.workdir,
        "command": ["/bin/sh", "-c", script],
        "env": [
            {"name": "ALMANAC_DATA", "value": data_dir},
            {"name": "ALMANAC_PYTHON", "value": python},
            {
                "name": "ALMANAC_HOST_NAME",
                "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
            },
            {"name": "ALMANAC_SOURCE", "value": source},
            {"name": "PYTHONPATH", "value": opts.workdir},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ],
        "volumeMounts": [
            {"name": "input", "mountPath": MATRIX_MOUNT, "readOnly": True},
            {"name": "out", "mountPath": OUT_MOUNT},
        ],
    }
    if resources:
        container["resources"] = resources
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": job, "namespace": opts.namespace, "labels": labels},
            "data": data,
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": job, "namespace": opts.namespace, "labels": labels},
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": seconds(opts.time_limit),
                "ttlSecondsAfterFinished": 7 * 86400,
                "template": {
                    "metadata": {"labels": {**labels, EXCLUSIVE_LABEL: "true"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [
                                        {
                                            "matchFields": [
                                                {
                                                    "key": "metadata.name",
                                                    "operator": "In",
                                                    "values": [node],
                                                }
                                            ]
                                        }
                                    ]
                                }
                            },
                            "podAntiAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": [
                                    {
                                        "labelSelector": {
                                            "matchLabels": {EXCLUSIVE_LABEL: "true"}
                                        },
                                        "topologyKey": "kubernetes.io/hostname",
                                        "namespaceSelector": {},
                                    }
                                ]
                            },
                        },
                        "containers": [container],
                        "volumes": [
                            {"name": "input", "configMap": {"name": job}},
                            {
                                "name": "out",
                                "persistentVolumeClaim": {"claimName": opts.pvc},
                            },
                        ],
                    },
                },
            },
        },
    ]


# -- the offline check: what the API server would refuse in these fields ---------------------------
def _need(doc: Any, path: str, problems: list[str]) -> Any:
    cur = doc
    for key in path.split("."):
        if not isinstance(cur, dict) or key not in cur:
            problems.append(f"{path}: required")
            return None
        cur = cur[key]
    return cur


def _labels_ok(labels: Any, where: str, problems: list[str]) -> None:
    if labels is None:
        return
    if not isinstance(labels, dict):
        problems.append(f"{where}: not a mapping")
        return
    for k, v in labels.items():
        prefix, _, name = str(k).rpartition("/")
        if (prefix and not DNS1123_SUBDOMAIN.match(prefix)) or not re.match(
            r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", name
        ):
            problems.append(f"{where}.{k}: not a label key")
        if not isinstance(v, str) or len(v) > 63 or not LABEL_VALUE.match(v):
            problems.append(f"{where}.{k}: {v!r} is not a label value")


def _meta(doc: dict[str, Any], problems: list[str]) -> None:
    name = _need(doc, "metadata.name", problems)
    if name is not None and (
        not isinstance(name, str) or not DNS1123_SUBDOMAIN.match(name) or len(name) > 63
    ):
        problems.append(f"metadata.name: {name!r} is not a DNS-1123 name of ≤ 63")
    ns = (doc.get("metadata") or {}).get("namespace")
    if ns is not None and (not isinstance(ns, str) or not DNS1123_LABEL.match(ns)):
        problems.append(f"metadata.namespace: {ns!r} is not an RFC 1123 label")
    _labels_ok((doc.get("metadata") or {}).get("labels"), "metadata.labels", problems)


def check_job(doc: Any) -> list[str]:
    """What the API server would refuse in a Job (the fields it requires and those we set), one line
    each; [] when none. A structural check of the batch/v1 schema, not a cluster's admission."""
    problems: list[str] = []
    if not isinstance(doc, dict):
        return ["not a mapping"]
    if doc.get("apiVersion") != "batch/v1":
        problems.append(f"apiVersion: {doc.get('apiVersion')!r}, not 'batch/v1'")
    if doc.get("kind") != "Job":
        problems.append(f"kind: {doc.get('kind')!r}, not 'Job'")
    _meta(doc, problems)
    spec = _need(doc, "spec", problems)
    if not isinstance(spec, dict):
        return problems
    for key in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        v = spec.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            problems.append(f"spec.{key}: {v!r} is not a whole number ≥ 0")
    if spec.get("activeDeadlineSeconds") == 0:
        problems.append("spec.activeDeadlineSeconds: must be > 0")
    pod = _need(doc, "spec.template.spec", problems)
    if not isinstance(pod, dict):
        return problems
    _labels_ok(
        ((spec.get("template") or {}).get("metadata") or {}).get("labels"),
        "spec.template.metadata.labels",
        problems,
    )
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        problems.append(
            f"spec.template.spec.restartPolicy: {pod.get('restartPolicy')!r}; a Job's is Never or OnFailure"
        )
    volumes = pod.get("volumes") or []
    vnames = [v.get("name") for v in volumes if isinstance(v, dict)]
    for i, v in enumerate(volumes):
        if not isinstance(v, dict) or not DNS1123_LABEL.match(str(v.get("name"))):
            problems.append(
                f"spec.template.spec.volumes[{i}].name: not an RFC 1123 label"
            )
    if len(set(vnames)) != len(vnames):
        problems.append("spec.template.spec.volumes: two volumes share a name")
    containers = pod.get("containers")
    if not isinstance(containers, list) or not containers:
        problems.append("spec.template.spec.containers: required, at least one")
        containers = []
    for i, c in enumerate(containers):
        where = f"spec.template.spec.containers[{i}]"
        if not isinstance(c, dict):
            problems.append(f"{where}: not a mapping")
            continue
        if not DNS1123_LABEL.match(str(c.get("name"))):
            problems.append(f"{where}.name: {c.get('name')!r} is not an RFC 1123 label")
        if not c.get("image") or not isinstance(c.get("image"), str):
            problems.append(f"{where}.image: required")
        for j, e in enumerate(c.get("env") or []):
            if not isinstance(e, dict) or not ENV_NAME.match(str(e.get("name"))):
                problems.append(f"{where}.env[{j}].name: not a variable name")
            elif ("value" in e) == ("valueFrom" in e):
                problems.append(f"{where}.env[{j}]: one of value or valueFrom")
            elif "value" in e and not isinstance(e["value"], str):
                problems.append(f"{where}.env[{j}].value: not a string")
        for j, m in enumerate(c.get("volumeMounts") or []):
            if not isinstance(m, dict) or m.get("name") not in vnames:
                problems.append(
                    f"{where}.volumeMounts[{j}].name: no volume of that name"
                )
            elif not str(m.get("mountPath", "")).startswith("/"):
                problems.append(
                    f"{where}.volumeMounts[{j}].mountPath: not an absolute path"
                )
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            for k, v in (res.get(part) or {}).items():
                if not isinstance(v, str) or not QUANTITY.match(v):
                    problems.append(
                        f"{where}.resources.{part}.{k}: {v!r} is not a quantity"
                    )
        if res and res.get("requests") != res.get("limits"):
            problems.append(
                f"{where}.resources: requests differ from limits (no exclusive use of the node)"
            )
    return problems


def check_configmap(doc: Any) -> list[str]:
    problems: list[str] = []
    if not isinstance(doc, dict):
        return ["not a mapping"]
    if doc.get("apiVersion") != "v1" or doc.get("kind") != "ConfigMap":
        problems.append("apiVersion/kind: not v1 ConfigMap")
    _meta(doc, problems)
    data = doc.get("data") or {}
    size = 0
    for k, v in data.items():
        if not CONFIGMAP_KEY.match(str(k)) or len(str(k)) > 253:
            problems.append(f"data.{k}: not a ConfigMap key")
        if not isinstance(v, str):
            problems.append(f"data.{k}: not a string")
        else:
            size += len(v.encode())
    if size > CONFIGMAP_MAX_BYTES:
        problems.append(f"data: {size} bytes, more than a ConfigMap's 1 MiB")
    return problems


def check_manifest(text: str) -> list[str]:
    """Every document of a manifest file checked offline (a ConfigMap and the Job whose volume names it)."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        return [f"not YAML: {' '.join(str(exc).split())}"]
    problems: list[str] = []
    maps = set()
    for i, d in enumerate(docs):
        kind = d.get("kind") if isinstance(d, dict) else None
        check = check_job if kind == "Job" else check_configmap
        problems += [f"document {i + 1} ({kind}): {p}" for p in check(d)]
        if kind == "ConfigMap":
            maps.add((d.get("metadata") or {}).get("name"))
    for i, d in enumerate(docs):
        if isinstance(d, dict) and d.get("kind") == "Job":
            vols = (
                ((d.get("spec") or {}).get("template") or {}).get("spec") or {}
            ).get("volumes") or []
            for v in vols:
                cm = (
                    (v.get("configMap") or {}).get("name")
                    if isinstance(v, dict)
                    else None
                )
                if cm is not None and cm not in maps:
                    problems.append(
                        f"document {i + 1} (Job): volume {v.get('name')!r} names ConfigMap {cm!r}, "
                        "not in this file"
                    )
    if not any(isinstance(d, dict) and d.get("kind") == "Job" for d in docs):
        problems.append("no Job in the file")
    return problems


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the matrix, the registry, the script) as literal blocks: readable manifests."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def emit(matrix: str, opts: K8sOptions, out_dir: Path | str) -> list[Path]:
    """Write one manifest per node into ``out_dir`` (each checked before it is written; atomic)."""
    check_options(opts)
    m = matrix_mod.load(matrix)
    models.load_registry()
    out = Path(out_dir)
    paths = []
    texts = []
    for node in dict.fromkeys(opts.nodes):
        docs = manifest(m, node, opts)
        text = (
            f"# Inference Almanac: matrix {' '.join(m.name.split())} on node {node} "
            "(runtime.remote.kubernetes).\n"
            "# Untested against a cluster here; apply with: kubectl apply -f <this file>\n"
            + yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
        )
        problems = check_manifest(text)
        if problems:  # a bug: what we generate must pass our own check
            raise AssertionError(f"{node}: {problems[0]}")
        texts.append((out / f"{docs[1]['metadata']['name']}.yaml", text))
    for path, text in texts:  # every manifest checked before any is written
        artifacts.atomic_write_text(path, text)
        paths.append(path)
    return paths


class K8sScheduler:
    """Kubernetes nodes, one Job each (runtime.remote.schedulers: the ``k8s`` scheduler). Generate only:
    ``run`` writes the manifests and reports each node as ``emitted`` (nothing is submitted here)."""

    name = "k8s"

    def __init__(self, opts: K8sOptions, out_dir: Path | str = "k8s-jobs"):
        self.opts = opts
        self.out_dir = Path(out_dir)

    def targets(self) -> list[str]:
        check_options(self.opts)
        return list(dict.fromkeys(self.opts.nodes))

    def run(
        self,
        matrix: str,
        *,
        force: bool = False,
        retry_failed: bool = False,
        progress: ProgressFn | None = None,
    ) -> list[HostOutcome]:
        self.opts.force, self.opts.retry_failed = force, retry_failed
        paths = emit(matrix, self.opts, self.out_dir)
        out = []
        for node, path in zip(self.targets(), paths):
            o = HostOutcome(node, status="emitted", log=path)
            o.message = f"Job manifest {relpath(path)}"
            if progress is not None:
                progress(node, "finished", {"status": "emitted", "message": o.message})
            out.append(o)
        return out


def emit_manifests(matrix: str, opts: K8sOptions, out_dir: str) -> list[str]:
    """``invoke bench --scheduler k8s``: the manifests through the scheduler interface, one line each."""
    from runtime.remote.schedulers import scheduler_class

    if opts.known_nodes is None:
        opts.known_nodes = cluster_nodes()
    sched = scheduler_class("k8s")(opts, out_dir)
    sched.targets()
    lines = [
        f"{o.host}: {o.message}"
        for o in sched.run(matrix, force=opts.force, retry_failed=opts.retry_failed)
    ]
    if opts.known_nodes is None:
        lines.append(
            "nodes not checked against a cluster (no kubectl answered; --known-nodes FILE checks them)"
        )
    lines.append(
        "untested against a cluster here: apply with `kubectl apply -f` each file; artifacts land on the "
        f"PersistentVolumeClaim {opts.pvc} under nodes/<node>/data/runs"
    )
    return lines
