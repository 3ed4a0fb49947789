"""Fabric connections to inventory hosts: verified host keys, one key, no surprises.

* Host keys: only the entry's known_hosts file is trusted; an unknown key is refused
  (paramiko's RejectPolicy) unless the entry says ``accept-new``, which records it there
  (trust on first use). A key that differs from the recorded one is always refused.
* Authentication: the entry's key file only (no agent, no ~/.ssh/id_* guessing) or,
  without a key, the SSH agent only. A passphrase comes from the environment variable the
  entry names; it is handed to paramiko and to ``redact`` and nowhere else.
* Failures become an error kind of the run schema: ``unreachable`` (DNS, refused or timed
  out TCP, SSH handshake cut), ``refused`` (authentication or host key), with a message
  that names the host and never holds a secret.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from runtime.hosts.inventory import Host

# paramiko's transport thread logs a failed handshake with a full traceback through the
# "paramiko" logger; with no handler configured Python's last-resort handler prints it on
# stderr beside our one-line failure. The failure is recorded (artifact + host log) already.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class RemoteFailure(Exception):
    """A host could not be used: ``kind`` is the run schema's error kind."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        exit_code: int | None = None,
        signal: str | None = None,
    ):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.exit_code = exit_code
        self.signal = signal


def secrets_of(host: Host) -> list[str]:
    """Values that must never be written anywhere (the key passphrase, if any)."""
    out = []
    if host.key_passphrase_env and os.environ.get(host.key_passphrase_env):
        out.append(os.environ[host.key_passphrase_env])
    return out


def redact(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "[redacted]")
    return text


class AcceptNewPolicy:
    """Trust an unknown host key on first use and record it in the known_hosts file."""

    def __init__(self, path: Path):
        self.path = path

    def missing_host_key(self, client, hostname, key):  # paramiko's policy interface
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


def connect(host: Host):
    """An open fabric.Connection to ``host``, or RemoteFailure(unreachable|refused)."""
    import paramiko
    from fabric import Config, Connection

    kh = host.known_hosts_path()
    connect_kwargs: dict[str, object] = {
        "allow_agent": host.key is None,
        "look_for_keys": False,
        "banner_timeout": host.connect_timeout_s,
        "auth_timeout": host.connect_timeout_s,
    }
    if host.key:
        key = host.key_path()
        if not key.is_file():
            raise RemoteFailure("refused", f"{host.name}: key file {key} not found")
        connect_kwargs["key_filename"] = [str(key)]
        if host.key_passphrase_env:
            connect_kwargs["passphrase"] = os.environ.get(host.key_passphrase_env, "")
    config = Config(
        overrides={"load_ssh_configs": False, "run": {"hide": True, "warn": True}}
    )
    conn = Connection(
        host.address,
        user=host.user,
        port=host.port,
        connect_timeout=int(max(1, host.connect_timeout_s)),
        connect_kwargs=connect_kwargs,
        config=config,
    )
    client = conn.client
    if kh.exists():
        client.load_host_keys(str(kh))
    if host.host_key_policy == "accept-new":
        client.set_missing_host_key_policy(AcceptNewPolicy(kh))
    else:
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
    where = f"{host.user}@{host.address}:{host.port}"
    try:
        conn.open()
    except paramiko.BadHostKeyException as exc:
        raise RemoteFailure(
            "refused",
            f"{host.name}: host key of {host.address}:{host.port} does not match {kh} "
            f"(got {exc.key.get_name()} {exc.key.get_fingerprint().hex()}); refusing",
        ) from None
    except paramiko.AuthenticationException as exc:
        raise RemoteFailure(
            "refused",
            f"{host.name}: authentication refused for {where} ({type(exc).__name__})",
        ) from None
    except paramiko.ssh_exception.NoValidConnectionsError as exc:
        reasons = "; ".join(
            sorted(
                {
                    os.strerror(e.errno) if e.errno else str(e)
                    for e in exc.errors.values()
                }
            )
        )
        raise RemoteFailure(
            "unreachable",
            f"{host.name}: cannot connect to {host.address}:{host.port} ({reasons})",
        ) from None
    except TimeoutError:
        raise RemoteFailure(
            "unreachable",
            f"{host.name}: no answer from {host.address}:{host.port} within "
            f"{host.connect_timeout_s:g} s",
        ) from None
    except socket.gaierror as exc:
        raise RemoteFailure(
            "unreachable",
            f"{host.name}: cannot resolve {host.address} ({exc.strerror})",
        ) from None
    except OSError as exc:
        raise RemoteFailure(
            "unreachable",
            f"{host.name}: cannot connect to {host.address}:{host.port} "
            f"({exc.strerror or type(exc).__name__})",
        ) from None
    except paramiko.SSHException as exc:
        text = str(exc)
        if "known_hosts" in text or "not found in" in text:
            raise RemoteFailure(
                "refused",
                f"{host.name}: host key of {host.address}:{host.port} is not in {kh} "
                "(add it with ssh-keyscan after checking it, or set host_key_policy: "
                "accept-new)",
            ) from None
        raise RemoteFailure(
            "unreachable",
            f"{host.name}: SSH handshake with {host.address}:{host.port} failed "
            f"({text.splitlines()[0] if text else type(exc).__name__})",
        ) from None
    return conn
