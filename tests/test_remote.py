"""Remote hosts over SSH, for real: Debian's OpenSSH server on a loopback port, generated
ed25519 host and user keys, the project copied over SFTP and a tiny matrix run "remotely"
(this machine, reached through sshd, reusing this Python: ``install: system``), plus the
failure cases: unreachable port, wrong key, unknown host key, remote crash, timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import artifacts, untar
from core.errors import ConfigError
from runtime.hosts import inventory as hosts
from runtime.models import registry as models
from tests.support import sshd as sshd_support

ROOT = Path(__file__).resolve().parents[1]
PASSPHRASE = "pa55-Phrase-never-logged"


# -- inventory (no sshd needed) ----------------------------------------------------------------
def _inv(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "hosts.yaml"
    p.write_text(body)
    return p


@pytest.mark.parametrize(
    "entry, field, message",
    [
        ("user: u", "hosts.h1.address", "required field is missing"),
        (
            "address: a\n    user: u\n    port: 70000",
            "hosts.h1.port",
            "less than or equal to 65535",
        ),
        (
            "address: a\n    user: u\n    adress: b",
            "hosts.h1.adress",
            "did you mean 'address'",
        ),
        (
            "address: a\n    user: u\n    labels: [g p u]",
            "hosts.h1.labels",
            "label 'g p u'",
        ),
        (
            "address: a\n    user: u\n    host_key_policy: yes-always",
            "hosts.h1.host_key_policy",
            "'reject' or 'accept-new'",
        ),
        (
            "address: a\n    user: u\n    install: conda",
            "hosts.h1.install",
            "'venv' or 'system'",
        ),
        (
            "address: a\n    user: u\n    key_passphrase_env: not a var",
            "hosts.h1.key_passphrase_env",
            "not an environment",
        ),
        (
            "address: -oProxyCommand=x\n    user: u",
            "hosts.h1.address",
            "is not a host address",
        ),
    ],
)
def test_bad_inventory_entry_is_one_line_naming_file_and_field(
    tmp_path, entry, field, message
):
    p = _inv(tmp_path, f"schema_version: 1\nhosts:\n  h1:\n    {entry}\n")
    with pytest.raises(ConfigError) as ei:
        hosts.load_inventory(p)
    text = str(ei.value)
    assert "\n" not in text
    assert text.startswith(f"{p}: {field}: "), text
    assert message in text


def test_inventory_shape_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"hosts: must be a mapping"):
        hosts.load_inventory(_inv(tmp_path, "hosts: [a, b]\n"))
    with pytest.raises(ConfigError, match=r"hosts\.bad name: a host name"):
        hosts.load_inventory(
            _inv(tmp_path, "hosts:\n  bad name: {address: a, user: u}\n")
        )
    with pytest.raises(
        ConfigError, match=r"schema_version: version 9 is not supported"
    ):
        hosts.load_inventory(_inv(tmp_path, "schema_version: 9\nhosts: {}\n"))
    with pytest.raises(ConfigError, match=r"malformed YAML"):
        hosts.load_inventory(_inv(tmp_path, "hosts: {a: [\n"))


def test_inventory_defaults_relative_paths_and_selection(tmp_path):
    p = _inv(
        tmp_path,
        "hosts:\n  a: {address: x, user: u, key: keys/id, labels: [cpu]}\n"
        "  b: {address: y, user: u, labels: [gpu, big]}\n  c: {address: z, user: u, labels: [gpu]}\n",
    )
    inv = hosts.load_inventory(p)
    a = inv.hosts["a"]
    assert (a.port, a.host_key_policy, a.install, a.python) == (
        22,
        "reject",
        "venv",
        "python3",
    )
    assert a.key == str(tmp_path / "keys" / "id")  # relative to the inventory's folder
    assert a.llama_cpp.reuse is True
    assert [h.name for h in hosts.select(inv, [], ["gpu"])] == ["b", "c"]
    assert [h.name for h in hosts.select(inv, ["c", "a"], ["big"])] == ["a", "b", "c"]
    with pytest.raises(
        ConfigError, match=r"no host named 'd' \(did you mean|no host named 'd'"
    ):
        hosts.select(inv, ["d"], [])
    with pytest.raises(
        ConfigError, match=r"no host has the label 'tpu' \(labels: big, cpu, gpu\)"
    ):
        hosts.select(inv, [], ["tpu"])


def test_cli_bad_inventory_one_line_exit_2_and_no_artifact(tmp_path):
    data = tmp_path / "data"
    (data / "matrices").mkdir(parents=True)
    (data / "models.yaml").write_text((ROOT / "data" / "models.yaml").read_text())
    (data / "hosts.yaml").write_text(
        "hosts:\n  h1: {address: a, user: u, port: nope}\n"
    )
    env = dict(os.environ, ALMANAC_DATA=str(data))
    res = subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(ROOT), "bench", "--host", "h1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"error: {data / 'hosts.yaml'}: hosts.h1.port: Input should be a valid integer, unable to parse string as an "
        "integer (got 'nope')"
    ]
    assert not (data / "runs").exists()


# -- snapshot ------------------------------------------------------------------------------------
def test_snapshot_is_the_working_tree_and_its_digest_follows_content(
    tmp_path, live_tree
):
    from runtime.remote import snapshot

    a = snapshot.make()
    assert (
        "runtime/remote/agent.py" in a.files
        and "data/schema/run.v1.schema.json" in a.files
    )
    assert (
        "tests/test_remote.py" in a.files
    )  # untracked files travel too: the tree as it is
    assert not any(f.startswith(("data/runs/", ".gpu/", ".whl/")) for f in a.files)
    # a copy of the tree (outside git): deterministic bytes, a digest that follows content
    import shutil
    import tarfile

    root = tmp_path / "tree"
    for rel in (
        "pyproject.toml",
        "runtime/__init__.py",
        "data/schema/run.v1.schema.json",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, root / rel)
    one = snapshot.make(root)
    assert snapshot.make(root).data == one.data and one.commit is None
    unpacked = tmp_path / "unpacked"
    with tarfile.open(fileobj=__import__("io").BytesIO(one.data)) as tar:
        untar.extract(tar, unpacked)
    assert snapshot.tree_digest(unpacked) == one.digest
    (root / "runtime/__init__.py").write_text(
        (root / "runtime/__init__.py").read_text() + "\n"
    )
    two = snapshot.make(root)
    assert one.digest != two.digest
    reqs = snapshot.requirements(root)
    assert any(r.startswith("llama-cpp-python==") for r in reqs)


def test_a_virtualenv_in_the_checkout_stays_behind(tmp_path):
    """`python3 -m venv <any name>` inside a git checkout (untracked, not ignored) is not the
    project: the snapshot leaves it behind, found by its pyvenv.cfg."""
    import subprocess

    from runtime.remote import snapshot

    root = tmp_path / "tree"
    (root / "runtime").mkdir(parents=True)
    (root / "runtime" / "__init__.py").write_text("")
    (root / "myenv" / "lib").mkdir(parents=True)
    (root / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "myenv" / "lib" / "big.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    files, _, _ = snapshot.list_files(root)
    assert files == ["runtime/__init__.py"]


# -- a real sshd ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def sshd_env(tmp_path_factory):
    reason = sshd_support.ensure_sshd()
    if reason:
        pytest.skip(reason)
    d = tmp_path_factory.mktemp("sshd")
    user_key = sshd_support.keygen(d / "user_ed25519")
    pass_key = sshd_support.keygen(d / "pass_ed25519", PASSPHRASE)
    wrong_key = sshd_support.keygen(d / "wrong_ed25519")
    server = sshd_support.start(d / "server", [user_key, pass_key])
    (d / "known_hosts").write_text(server.known_hosts_line())
    (d / "empty_known_hosts").write_text("")
    yield {
        "dir": d,
        "server": server,
        "user_key": user_key,
        "pass_key": pass_key,
        "wrong_key": wrong_key,
    }
    server.stop()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    from runtime.models import synth

    path = tmp_path_factory.mktemp("model") / "tiny-remote.gguf"
    synth.write_gguf("tiny-llama", "Q8_0", path, seed=3)
    return path


def _data(tmp_path: Path, model: Path, tests: str = "[tg8]") -> Path:
    data = tmp_path / "data"
    (data / "matrices").mkdir(parents=True)
    (data / "models.yaml").write_text(
        f"schema_version: 1\nmodels:\n  tiny-remote:\n    path: {model}\n"
        "    description: synthetic tiny llama\n"
    )
    (data / "matrices" / "tiny.yaml").write_text(
        "schema_version: 1\nname: tiny-remote\nmodels: [tiny-remote]\nrepetitions: 1\nwarmup: false\n"
        f"timeout_s: 120\nsettings: {{n_threads: 1}}\ntests: {tests}\n"
    )
    return data


def _host_entry(
    env: dict,
    name: str,
    *,
    workdir: Path,
    key: Path | None = None,
    port: int | None = None,
    known_hosts: Path | None = None,
    python: str = sys.executable,
    extra: str = "",
) -> str:
    s = env["server"]
    return (
        f"  {name}:\n    address: 127.0.0.1\n    port: {port or s.port}\n    user: {s.user}\n"
        f"    key: {key or env['user_key']}\n    known_hosts: {known_hosts or env['dir'] / 'known_hosts'}\n"
        f"    python: {python}\n    install: system\n    workdir: {workdir}\n    connect_timeout_s: 5\n"
        f"    labels: [cpu]\n    env: {{ALMANAC_CACHE: {workdir}/cache}}\n{extra}"
    )


def test_matrix_runs_over_ssh_and_artifacts_come_back(
    sshd_env, tiny_model, tmp_path, monkeypatch, live_tree
):
    from runtime.remote import controller, snapshot

    data = _data(tmp_path, tiny_model)
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    inv_path = data / "hosts.yaml"
    inv_path.write_text(
        "schema_version: 1\nhosts:\n"
        + _host_entry(sshd_env, "loop", workdir=tmp_path / "remote")
    )
    inv = hosts.load_inventory(inv_path)
    events: list[tuple[str, str]] = []
    out = controller.run_hosts(
        hosts.select(inv, ["loop"]),
        str(data / "matrices" / "tiny.yaml"),
        progress=lambda h, e, i: events.append((h, e)),
        log_dir=tmp_path / "logs",
    )
    o = out[0]
    assert o.status == "ok", (o.message, o.log.read_text()[-2000:])
    assert len(o.measured) == 1 and not o.failed and not o.invalid
    doc = artifacts.load(o.measured[0])
    assert o.measured[0].is_relative_to(data / "runs")
    assert doc["status"] == "ok" and doc["test"]["name"] == "tg8"
    assert (
        doc["summary"]["tokens_per_second"]["n"] == 1
        and doc["summary"]["tokens_per_second"]["mean"] > 0
    )
    # fingerprinted on the host, under the inventory's name
    assert doc["host"]["name"] == "loop" and doc["host"]["id"].startswith("loop-")
    assert doc["model"]["sha256"] == models.sha256_file(tiny_model)
    # the same code: the build block names the snapshot, and the copy on the host hashes to it
    source = doc["build"]["almanac_source"]
    copy = tmp_path / "remote" / "src" / source["digest"][:16]
    assert snapshot.tree_digest(copy) == source["digest"]
    assert (copy / "runtime" / "remote" / "agent.py").is_file()
    assert (
        ("loop", "host") in events
        and ("loop", "done") in events
        and events[-1] == ("loop", "finished")
    )
    log = o.log.read_text()
    assert "[1/1] tiny-remote tg8: ok" in log
    assert sshd_env["user_key"].read_text().splitlines()[1] not in log
    # a second run measures nothing new: the host resumes from its own data
    again = controller.run_hosts(
        hosts.select(inv, ["loop"]),
        str(data / "matrices" / "tiny.yaml"),
        log_dir=tmp_path / "logs2",
    )[0]
    assert again.status == "ok" and not again.measured and not again.fetched
    assert len(list((data / "runs").rglob("*.json"))) == 1


def _wrapper(path: Path, body: str) -> str:
    path.write_text(f'#!/bin/sh\n{body}\nexec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return str(path)


def test_failures_are_artifacts_and_other_hosts_go_on(
    sshd_env, tiny_model, tmp_path, monkeypatch, live_tree
):
    from runtime.remote import controller

    data = _data(tmp_path, tiny_model, tests="[tg8, pp16]")
    monkeypatch.setenv("ALMANAC_DATA", str(data))
    monkeypatch.setenv("ALMANAC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ALMANAC_TEST_PASS", PASSPHRASE)
    closed = sshd_support.free_port()
    # "python" wrappers that crash (SIGKILL) or hang when asked to run the matrix
    crash = _wrapper(
        tmp_path / "crash-python", 'case "$*" in *" run "*) kill -KILL $$;; esac'
    )
    hang = _wrapper(tmp_path / "hang-python", 'case "$*" in *" run "*) sleep 60;; esac')
    w = tmp_path / "remote"
    body = "schema_version: 1\nhosts:\n" + "".join(
        [
            _host_entry(sshd_env, "down", workdir=w, port=closed),
            _host_entry(sshd_env, "wrongkey", workdir=w, key=sshd_env["wrong_key"]),
            _host_entry(
                sshd_env,
                "stranger",
                workdir=w,
                known_hosts=sshd_env["dir"] / "empty_known_hosts",
            ),
            _host_entry(
                sshd_env,
                "crashes",
                workdir=w,
                python=crash,
                key=sshd_env["pass_key"],
                extra="    key_passphrase_env: ALMANAC_TEST_PASS\n",
            ),
            _host_entry(
                sshd_env, "hangs", workdir=w, python=hang, extra="    timeout_s: 12\n"
            ),
            _host_entry(sshd_env, "good", workdir=tmp_path / "remote-good"),
        ]
    )
    (data / "hosts.yaml").write_text(body)
    inv = hosts.load_inventory(data / "hosts.yaml")
    before = (sshd_env["dir"] / "empty_known_hosts").read_text()
    outs = {
        o.host: o
        for o in controller.run_hosts(
            list(inv.hosts.values()),
            str(data / "matrices" / "tiny.yaml"),
            log_dir=tmp_path / "logs",
        )
    }
    expect = {
        "down": "unreachable",
        "wrongkey": "refused",
        "stranger": "refused",
        "crashes": "crash",
        "hangs": "timeout",
    }
    for name, kind in expect.items():
        o = outs[name]
        assert (o.status, o.error_kind) == ("failed", kind), (name, o.message)
        assert (
            len(o.failed) == 2 and not o.measured
        )  # one failed artifact per configuration
        for p in o.failed:
            doc = artifacts.load(p)
            assert doc["status"] == "failed" and doc["error"]["kind"] == kind
            assert name in doc["error"]["message"]
            assert doc["model"]["sha256"] == models.sha256_file(tiny_model)
            assert (
                doc["host"]["source"] == "inventory"
                and doc["host"]["id"] == f"{name}-inventory"
            )
            assert doc["host"]["name"] == name
    assert (
        "cannot connect" in outs["down"].message and str(closed) in outs["down"].message
    )
    assert "authentication refused" in outs["wrongkey"].message
    assert (
        "not in" in outs["stranger"].message
        and "known_hosts" in outs["stranger"].message
    )
    assert outs["crashes"].message.count("SIGKILL") == 1
    assert "timeout_s (12 s)" in outs["hangs"].message
    # an unknown key was refused, not recorded
    assert (sshd_env["dir"] / "empty_known_hosts").read_text() == before
    # the good host measured both tests while the others failed
    good = outs["good"]
    assert good.status == "ok" and len(good.measured) == 2
    # no secret anywhere: not the passphrase, not the private keys
    keys = [
        sshd_env[k].read_text().splitlines()[1]
        for k in ("user_key", "pass_key", "wrong_key")
    ]
    written = [p.read_text() for p in (data / "runs").rglob("*.json")] + [
        p.read_text() for p in (tmp_path / "logs").glob("*.log")
    ]
    assert written and all(
        PASSPHRASE not in t and not any(k in t for k in keys) for t in written
    )


def test_host_key_accept_new_records_once_and_a_changed_key_is_refused(
    sshd_env, tmp_path
):
    from runtime.remote.ssh import RemoteFailure, connect

    kh = tmp_path / "kh"
    s = sshd_env["server"]
    host = hosts.Host(
        name="tofu",
        address="127.0.0.1",
        port=s.port,
        user=s.user,
        key=str(sshd_env["user_key"]),
        known_hosts=str(kh),
        host_key_policy="accept-new",
    )
    conn = connect(host)
    assert conn.run("echo hi", hide=True, in_stream=False).stdout.strip() == "hi"
    conn.close()
    lines = kh.read_text().splitlines()
    assert lines == [f"[127.0.0.1]:{s.port} {s.host_pub}"]
    connect(host).close()  # the recorded key is trusted: nothing appended
    assert kh.read_text().splitlines() == lines
    other = sshd_support.keygen(tmp_path / "other_host")
    fake = " ".join(Path(str(other) + ".pub").read_text().split()[:2])
    kh.write_text(f"[127.0.0.1]:{s.port} {fake}\n")
    with pytest.raises(RemoteFailure) as ei:
        connect(host)
    assert ei.value.kind == "refused" and "does not match" in ei.value.message
    assert json.dumps(ei.value.message)  # one plain line


def test_cli_remote_run_prints_a_line_per_host_and_exits_1_when_a_host_failed(
    tiny_model, tmp_path
):
    data = _data(tmp_path, tiny_model)
    closed = sshd_support.free_port()
    key = tmp_path / "id"
    key.write_text("not a key; never read: the host is unreachable first\n")
    (data / "hosts.yaml").write_text(
        f"hosts:\n  nowhere:\n    address: 127.0.0.1\n    port: {closed}\n    user: u\n    key: {key}\n"
        "    labels: [gpu]\n    connect_timeout_s: 3\n"
    )
    env = dict(
        os.environ, ALMANAC_DATA=str(data), ALMANAC_CACHE=str(tmp_path / "cache")
    )
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "invoke",
            "-r",
            str(ROOT),
            "bench",
            "--label",
            "gpu",
            "--matrix",
            str(data / "matrices" / "tiny.yaml"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert res.returncode == 1, res.stderr[-2000:]
    line = [ln for ln in res.stderr.splitlines() if ln.startswith("nowhere: ")]
    assert line and "failed (unreachable), 0 measured, 1 failed" in line[0]
    [art] = list((data / "runs" / "nowhere-inventory").rglob("*.json"))
    assert artifacts.load(art)["error"]["kind"] == "unreachable"


def test_agent_venv_reuses_installed_packages_and_pip_runs_only_when_requirements_change(
    tmp_path,
):
    """``install: venv`` for real: a venv that sees this Python's site-packages (llama_cpp.reuse),
    where every pinned requirement is already satisfied (pip needs no index), then a second
    prepare that skips pip because nothing changed."""
    from runtime.remote import snapshot

    req = tmp_path / "requirements.txt"
    req.write_text("\n".join(snapshot.requirements()) + "\n")
    cmd = [
        sys.executable,
        "-m",
        "runtime.remote.agent",
        "prepare",
        "--mode",
        "venv",
        "--workdir",
        str(tmp_path / "w"),
        "--requirements",
        str(req),
        "--reuse-llama",
    ]
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")

    def events(out: str) -> list[dict]:
        return [
            json.loads(ln[len("@@almanac ") :])
            for ln in out.splitlines()
            if ln.startswith("@@almanac ")
        ]

    first = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert first.returncode == 0, first.stdout[-1500:] + first.stderr[-1500:]
    [ev] = events(first.stdout)
    assert ev["event"] == "python" and ev["installed"] is True
    venv_py = Path(ev["path"])
    assert venv_py == tmp_path / "w" / "venv" / "bin" / "python"
    assert "llama-cpp-python visible to the venv: 0.3.36" in first.stdout
    check = subprocess.run(
        [
            str(venv_py),
            "-c",
            "import llama_cpp, importlib.metadata as m; "
            "print(m.version('llama-cpp-python'))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.stdout.strip() == "0.3.36"  # reused, not rebuilt
    second = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert second.returncode == 0 and events(second.stdout)[0]["installed"] is False
    assert "pip install" not in second.stdout


def test_agent_venv_made_from_a_venv_sees_that_venvs_packages(tmp_path):
    """The project installed in a virtualenv (the normal way): a venv the agent makes from that
    interpreter with llama_cpp.reuse must see the outer venv's packages, not only the base
    interpreter's (a package only the outer venv has stands for llama-cpp-python)."""
    outer = tmp_path / "outer"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "venv",
            "--without-pip",
            "--system-site-packages",
            str(outer),
        ],
        check=True,
        timeout=120,
    )
    outer_py = outer / "bin" / "python"
    site_dir = subprocess.run(
        [
            str(outer_py),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site_dir) / "almanac_only_in_outer.py").write_text("VALUE = 42\n")
    req = tmp_path / "requirements.txt"
    req.write_text("# nothing to install\n")
    env = dict(
        os.environ,
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONPATH=str(ROOT),
    )
    p = subprocess.run(
        [
            str(outer_py),
            "-m",
            "runtime.remote.agent",
            "prepare",
            "--mode",
            "venv",
            "--workdir",
            str(tmp_path / "w"),
            "--requirements",
            str(req),
            "--reuse-llama",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout[-1500:] + p.stderr[-1500:]
    inner_py = tmp_path / "w" / "venv" / "bin" / "python"
    check = subprocess.run(
        [str(inner_py), "-c", "import almanac_only_in_outer as m; print(m.VALUE)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.stdout.strip() == "42", check.stderr


def test_a_host_that_does_not_speak_ssh_fails_without_a_traceback(tiny_model, tmp_path):
    """A port that answers with garbage instead of an SSH banner: paramiko's transport thread logs
    a traceback; it must not reach stderr beside the one failure line and the failed artifact."""
    import socket
    import threading

    data = _data(tmp_path, tiny_model)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            try:
                c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" + b"\xff" * 300)
            finally:
                c.close()

    threading.Thread(target=serve, daemon=True).start()
    key = tmp_path / "id"
    key.write_text("not a key; never read: the handshake fails first\n")
    (data / "hosts.yaml").write_text(
        f"hosts:\n  garbage:\n    address: 127.0.0.1\n    port: {port}\n    user: u\n    key: {key}\n"
        "    connect_timeout_s: 3\n"
    )
    env = dict(
        os.environ, ALMANAC_DATA=str(data), ALMANAC_CACHE=str(tmp_path / "cache")
    )
    try:
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "invoke",
                "-r",
                str(ROOT),
                "bench",
                "--host",
                "garbage",
                "--matrix",
                str(data / "matrices" / "tiny.yaml"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        srv.close()
    assert res.returncode == 1 and "Traceback" not in res.stderr + res.stdout, (
        res.stderr[-3000:]
    )
    [art] = list((data / "runs" / "garbage-inventory").rglob("*.json"))
    doc = artifacts.load(art)
    assert doc["error"]["kind"] == "unreachable" and "Traceback" not in json.dumps(doc)
