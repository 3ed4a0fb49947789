"""The Kubernetes Job template (runtime.remote.kubernetes) behind the scheduler interface: one manifest
per (node, matrix), valid YAML whose Job passes the offline structural check of batch/v1 fields, pinned
to its node with exclusive use, running the same agent as SSH and Slurm; bad input (an unknown node, a
namespace that is not an RFC 1123 label, no image, a bad time limit) one line with nothing written.

No cluster runs here: Kubernetes itself is not exercised (untested against a cluster, as the docs say)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.execution import matrix as matrix_mod
from runtime.remote import kubernetes as k8s
from runtime.remote.schedulers import scheduler_class
from tests.conftest import write_matrix

ROOT = Path(__file__).resolve().parents[1]

MATRIX = """schema_version: 1
name: {name}
backend: llama_cpp
models: [gemma3-270m-q4_k_m]
precision: null
tests: [pp64, tg16]
"""


def _opts(**kw) -> k8s.K8sOptions:
    base: dict[str, Any] = dict(
        nodes=["gpu-node-1", "cpu-2"],
        namespace="bench",
        image="ghcr.io/example/almanac:0.2.0",
        cpu="16",
        memory="60Gi",
        gpus=1,
        time_limit="90",
        known_nodes=["gpu-node-1", "cpu-2", "cpu-3"],
    )
    base.update(kw)
    return k8s.K8sOptions(**base)


def test_one_valid_job_per_node_through_the_scheduler_interface(data_env, tmp_path):
    write_matrix(data_env, "kj", MATRIX.format(name="kj"))
    sched = scheduler_class("k8s")(_opts(), tmp_path / "out")
    assert sched.targets() == ["gpu-node-1", "cpu-2"]
    outcomes = sched.run("kj", force=True, retry_failed=False)
    assert [o.host for o in outcomes] == ["gpu-node-1", "cpu-2"]
    assert all(o.status == "emitted" and o.log.is_file() for o in outcomes)
    for o, node in zip(outcomes, ["gpu-node-1", "cpu-2"]):
        text = o.log.read_text()
        assert k8s.check_manifest(text) == []
        cm, job = list(yaml.safe_load_all(text))
        assert (cm["kind"], job["apiVersion"], job["kind"]) == (
            "ConfigMap",
            "batch/v1",
            "Job",
        )
        assert (
            job["metadata"]["namespace"] == "bench"
            and len(job["metadata"]["name"]) <= 63
        )
        spec = job["spec"]
        assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 90 * 60
        pod = spec["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        term = pod["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"][0]["matchFields"][0]
        assert term == {"key": "metadata.name", "operator": "In", "values": [node]}
        anti = pod["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ][0]
        assert anti["topologyKey"] == "kubernetes.io/hostname"
        assert spec["template"]["metadata"]["labels"][k8s.EXCLUSIVE_LABEL] == "true"
        (c,) = pod["containers"]
        want = {"cpu": "16", "memory": "60Gi", "nvidia.com/gpu": "1"}
        assert c["resources"] == {"requests": want, "limits": want}
        script = c["command"][-1]
        assert "-m runtime.remote.agent run" in script and script.endswith("--force")
        env = {e["name"]: e for e in c["env"]}
        assert env["ALMANAC_DATA"]["value"] == f"/almanac-out/nodes/{node}/data"
        assert (
            env["ALMANAC_HOST_NAME"]["valueFrom"]["fieldRef"]["fieldPath"]
            == "spec.nodeName"
        )
        assert '"kubernetes"' in env["ALMANAC_SOURCE"]["value"]
        # the ConfigMap carries the matrix as validated here (includes merged) and the registry
        shipped = yaml.safe_load(cm["data"]["matrix.yaml"])
        assert matrix_mod.MatrixFile.model_validate(shipped).tests == ["pp64", "tg16"]
        assert "gemma3-270m-q4_k_m" in cm["data"]["models.yaml"]
        vols = {v["name"]: v for v in pod["volumes"]}
        assert vols["input"]["configMap"]["name"] == cm["metadata"]["name"]
        assert vols["out"]["persistentVolumeClaim"]["claimName"] == "almanac-data"


def test_without_amounts_exclusivity_is_the_anti_affinity_alone(data_env, tmp_path):
    write_matrix(data_env, "kj", MATRIX.format(name="kj"))
    (path,) = k8s.emit(
        "kj", _opts(nodes=["cpu-3"], cpu="", memory="", gpus=0), tmp_path
    )
    job = list(yaml.safe_load_all(path.read_text()))[1]
    assert "resources" not in job["spec"]["template"]["spec"]["containers"][0]
    assert k8s.check_manifest(path.read_text()) == []


def test_a_hostile_matrix_name_never_reaches_the_shell_or_the_yaml(data_env, tmp_path):
    write_matrix(
        data_env, "evil", MATRIX.format(name='"x $(touch /tmp/pwned)\\nkind: Pod"')
    )
    (path,) = k8s.emit("evil", _opts(nodes=["cpu-2"]), tmp_path)
    text = path.read_text()
    assert k8s.check_manifest(text) == []
    docs = list(yaml.safe_load_all(text))
    assert [d["kind"] for d in docs] == ["ConfigMap", "Job"]
    script = docs[1]["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "pwned" not in script and "k8s-job.yaml" in script
    assert yaml.safe_load(docs[0]["data"]["matrix.yaml"])["name"].startswith(
        "x $(touch"
    )


def test_the_offline_check_finds_what_a_cluster_would_refuse(data_env, tmp_path):
    write_matrix(data_env, "kj", MATRIX.format(name="kj"))
    (path,) = k8s.emit("kj", _opts(nodes=["cpu-2"]), tmp_path)
    cm, job = list(yaml.safe_load_all(path.read_text()))

    def broken(edit) -> list[str]:
        j = copy.deepcopy(job)
        edit(j)
        return k8s.check_job(j)

    pod = lambda j: j["spec"]["template"]["spec"]  # noqa: E731
    assert broken(lambda j: j.update(apiVersion="batch/v2")) == [
        "apiVersion: 'batch/v2', not 'batch/v1'"
    ]
    assert broken(lambda j: j["metadata"].pop("name")) == ["metadata.name: required"]
    assert (
        "not a DNS-1123 name"
        in broken(lambda j: j["metadata"].update(name="Bad_Name"))[0]
    )
    assert "restartPolicy" in broken(lambda j: pod(j).update(restartPolicy="Always"))[0]
    assert broken(lambda j: pod(j).update(containers=[])) == [
        "spec.template.spec.containers: required, at least one"
    ]
    assert (
        "requests differ from limits"
        in broken(
            lambda j: pod(j)["containers"][0]["resources"]["limits"].update(cpu="8")
        )[0]
    )
    assert "no volume of that name" in broken(lambda j: pod(j).update(volumes=[]))[0]
    assert (
        "is not a quantity"
        in broken(
            lambda j: pod(j)["containers"][0]["resources"]["requests"].update(
                cpu="lots"
            )
        )[0]
    )
    assert (
        "not a label value"
        in broken(lambda j: j["metadata"]["labels"].update({"almanac.io/node": "a b"}))[
            0
        ]
    )
    # a file whose Job names a ConfigMap it does not carry, and text that is not YAML
    only_job = yaml.safe_dump(job)
    assert any("not in this file" in p for p in k8s.check_manifest(only_job))
    assert k8s.check_manifest("a: [")[0].startswith("not YAML:")
    assert k8s.check_manifest(yaml.safe_dump(cm)) == ["no Job in the file"]


@pytest.mark.parametrize(
    ("kw", "field", "words"),
    [
        (
            {"nodes": ["gpu-node-9"]},
            "node",
            "'gpu-node-9' is not a node of the cluster",
        ),
        ({"nodes": ["Node_1"]}, "node", "is not a node name (RFC 1123 subdomain)"),
        ({"nodes": []}, "node", "name the nodes to run on"),
        (
            {"namespace": "Bench_NS"},
            "namespace",
            "is not a namespace name (RFC 1123 label",
        ),
        ({"namespace": "a" * 64}, "namespace", "at most 63 characters"),
        ({"image": ""}, "image", "the container image"),
        ({"time_limit": "soon"}, "time_limit", "is not a time limit"),
        ({"cpu": "sixteen"}, "cpu", "is not a Kubernetes quantity"),
        ({"pvc": "My PVC"}, "pvc", "is not a PersistentVolumeClaim name"),
    ],
)
def test_bad_input_is_one_line_and_nothing_is_written(
    data_env, tmp_path, kw, field, words
):
    write_matrix(data_env, "kj", MATRIX.format(name="kj"))
    out = tmp_path / "out"
    with pytest.raises(k8s.KubernetesError) as exc:
        k8s.emit("kj", _opts(**kw), out)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{field}: ") and words in msg
    assert not out.exists()


def test_time_limits_read_as_slurm_reads_them():
    assert [
        k8s.seconds(x) for x in ("60", "05:30", "1:00:00", "2-03", "1-00:00:10")
    ] == [
        3600,
        330,
        3600,
        183600,
        86410,
    ]


def test_node_lists_from_kubectl_or_a_file(tmp_path):
    f = tmp_path / "nodes.txt"
    f.write_text("node/gpu-node-1\nnode/cpu-2\n\n# a comment\ncpu-3\n")
    assert k8s.read_node_file(str(f)) == ["gpu-node-1", "cpu-2", "cpu-3"]
    with pytest.raises(k8s.KubernetesError, match="no such file"):
        k8s.read_node_file(str(tmp_path / "missing.txt"))


@pytest.mark.integration
def test_invoke_bench_scheduler_k8s_is_one_line_for_a_bad_namespace(data_env, tmp_path):
    write_matrix(data_env, "kj", MATRIX.format(name="kj"))
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "invoke",
        "bench",
        "--scheduler",
        "k8s",
        "--matrix",
        "kj",
    ]
    cmd += ["--node", "n1", "--image", "img:1", "--emit-manifest", str(out)]
    bad = subprocess.run(
        [*cmd, "--namespace", "Not_Valid"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and not out.exists()
    lines = bad.stderr.strip().splitlines()
    assert lines == [
        "error: namespace: 'Not_Valid' is not a namespace name (RFC 1123 label: lower-case letters, "
        "digits and '-', starting and ending with a letter or digit, at most 63 characters)"
    ]
    ok = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    (path,) = out.glob("*.yaml")
    assert k8s.check_manifest(path.read_text()) == []
    assert "untested against a cluster here" in ok.stdout
