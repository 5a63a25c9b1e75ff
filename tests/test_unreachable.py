"""Every pod that cannot be reached says why in one line, and nothing prints a traceback.

Each cause happens for real: a sandbox pod that refuses the key offered, a port nothing
listens on, a server that accepts and then never sends an SSH banner, one that accepts and
closes, a name that does not resolve, a connection that times out (a listening socket whose
queue is full: the kernel drops the SYN), a key file that does not exist.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e import BIN, ROOT, apply, check, run

SANDBOX = {"pods": 1}
TIMEOUT = "1"  # seconds: connecting, the SSH banner
FAST = {"PODSTATE_CONNECT_TIMEOUT": TIMEOUT}


class Servers:
    """TCP servers on 127.0.0.1 that are not SSH servers, each the cause of one failure."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.held: list[socket.socket] = []
        self.stopping = False

    def _socket(self) -> socket.socket:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        self.sockets.append(server)
        return server

    def _serve(self, server: socket.socket, keep: bool) -> int:
        server.listen(8)

        def accept() -> None:
            while not self.stopping:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                if keep:
                    self.held.append(conn)
                else:
                    conn.close()

        threading.Thread(target=accept, daemon=True).start()
        return server.getsockname()[1]

    def silent(self) -> int:
        """Return the port of a server that accepts and then sends nothing, ever."""
        return self._serve(self._socket(), keep=True)

    def closing(self) -> int:
        """Return the port of a server that accepts and closes at once."""
        return self._serve(self._socket(), keep=False)

    def refusing(self) -> int:
        """Return a port bound and not listening: a connection to it is refused."""
        return self._socket().getsockname()[1]

    def full(self) -> int:
        """Return the port of a listening socket that never accepts, its queue full (one
        connection waiting at a backlog of 0; a second to be sure): the kernel drops a
        further SYN, so connecting times out."""
        server = self._socket()
        server.listen(0)
        port = server.getsockname()[1]
        for _ in range(2):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            self.held.append(filler)
        return port

    def close(self) -> None:
        self.stopping = True
        for sock in self.sockets + self.held:
            sock.close()


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    found = Servers()
    yield found
    found.close()


@pytest.fixture(scope="module")
def other_key(tmp_path_factory) -> Path:
    """A private key the sandbox pods were never given."""
    key = tmp_path_factory.mktemp("key") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


@pytest.fixture(scope="module")
def pods_file(fleet, servers, other_key, tmp_path_factory) -> Path:
    """The sandbox's pods file (its defaults: user, key, known hosts) with a pod for each
    cause, the sandbox pod itself offered a key it does not know."""
    document = yaml.safe_load(fleet.pods_file.read_text())
    assert document["defaults"]["ssh_strict_host_key_checking"] == "yes"
    (pod,) = document["pods"].values()
    empty = tmp_path_factory.mktemp("known") / "known_hosts"
    empty.touch()
    local = {"ssh_hostname": "127.0.0.1"}
    document["pods"] = {
        "key-refused": {**pod, "ssh_key": str(other_key)},
        "host-key-unknown": {**pod, "ssh_known_hosts_file": str(empty)},
        "refused": {**local, "ssh_port": servers.refusing()},
        "silent": {**local, "ssh_port": servers.silent()},
        "closing": {**local, "ssh_port": servers.closing()},
        "unresolved": {"ssh_hostname": "nosuch.invalid"},
        "timing-out": {**local, "ssh_port": servers.full()},
    }
    path = tmp_path_factory.mktemp("pods") / "pods.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _causes(ports: dict[str, int], key: Path, known: str) -> dict[str, str]:
    """Return each pod's error, as podstate words it, for the ports it was given."""
    return {
        "host-key-unknown": f"host key refused: no key for 127.0.0.1:{ports['host-key-unknown']} "
        f"in {known}, and ssh_strict_host_key_checking refuses a key it does not know",
        "key-refused": f"key refused: 127.0.0.1:{ports['key-refused']} did not accept the key "
        f"{key} for root",
        "refused": f"connection refused: nothing listens on 127.0.0.1:{ports['refused']}",
        "silent": f"no SSH banner: 127.0.0.1:{ports['silent']} accepted the connection but "
        f"sent none in {TIMEOUT} s",
        "closing": f"no SSH banner: 127.0.0.1:{ports['closing']} closed the connection before "
        "sending one",
        "unresolved": "name not resolved: nosuch.invalid",
        "timing-out": f"timed out after {TIMEOUT} s connecting to 127.0.0.1:{ports['timing-out']}",
    }


@pytest.fixture(scope="module")
def causes(pods_file, other_key) -> dict[str, str]:
    pods = yaml.safe_load(pods_file.read_text())["pods"]
    ports = {name: pod.get("ssh_port", 22) for name, pod in pods.items()}
    return _causes(ports, other_key, pods["host-key-unknown"]["ssh_known_hosts_file"])


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text and "\n  File " not in text, text


def test_check_names_each_cause_in_one_line(fleet, pods_file, causes, tmp_path, monkeypatch):
    for key, value in FAST.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "check.json"
    result = check(fleet, "--timeout", TIMEOUT, "--json", str(out), pods_file=pods_file)
    _no_traceback(result.stderr + result.stdout)
    assert result.returncode == 1
    pods = json.loads(out.read_text())["pods"]
    assert {name: (pod["status"], pod["error"]) for name, pod in pods.items()} == {
        name: ("unreachable", cause) for name, cause in causes.items()
    }
    # each pod's line: name, status, its error, then "; price unknown" (a pods file names none)
    table = [line.split("; price ")[0].split() for line in result.stdout.splitlines()]
    for name, cause in causes.items():
        assert [name, "unreachable", *cause.split()] in table, result.stdout


def test_wait_names_each_cause(fleet, pods_file, causes, monkeypatch):
    for key, value in FAST.items():
        monkeypatch.setenv(key, value)
    result = run(
        fleet,
        [str(BIN / "podstate"), "wait", "--timeout", "1", "--interval", "1"],
        pods_file,
    )
    _no_traceback(result.stderr + result.stdout)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    for name, cause in causes.items():
        if name == "timing-out":  # wait's own connect time limit, not TIMEOUT
            (line,) = [line for line in lines if line.startswith(f"  {name}: ")]
            assert re.fullmatch(
                rf"  {name}: unreachable: timed out after \d+ s connecting to "
                rf"{re.escape(cause.split()[-1])}",
                line,
            ), line
        else:
            assert f"  {name}: unreachable: {cause}" in lines, result.stdout


def test_a_plain_pyinfra_run_names_each_cause(fleet, pods_file, causes, monkeypatch):
    for key, value in FAST.items():
        monkeypatch.setenv(key, value)
    result = apply(fleet, pods_file=pods_file)
    _no_traceback(result.stderr + result.stdout)
    assert result.returncode != 0
    for name, cause in causes.items():
        assert any(
            line.split() == [f"[{name}]", *cause.split()] for line in result.stderr.splitlines()
        ), (name, result.stderr)


def test_a_missing_key_file_stops_the_run_before_any_pod(fleet, pods_file, tmp_path):
    missing = tmp_path / "no-such-key"
    document = yaml.safe_load(pods_file.read_text())
    document["defaults"]["ssh_key"] = str(missing)
    document["pods"] = {"a": {"ssh_hostname": "127.0.0.1"}, "b": {"ssh_hostname": "127.0.0.1"}}
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump(document))
    line = (
        f"podstate: no such SSH key file: {missing} (ssh_key of a, b): make it (ssh-keygen -t "
        "ed25519 -f FILE) or set ssh_key to the private key your pods accept"
    )
    result = check(fleet, pods_file=path)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", line + "\n")
    applied = apply(fleet, pods_file=path)
    _no_traceback(applied.stderr)
    assert applied.returncode == 1 and line in applied.stderr.splitlines()


def test_a_key_file_missing_at_connect_is_named_for_its_pod(fleet, tmp_path):
    """An inventory of a team's own (not the pods file, which is checked first): the key
    file is found missing when connecting, and that pod's error names it."""
    missing = tmp_path / "no-such-key"
    inventory = tmp_path / "inventory.py"
    inventory.write_text(
        f"pods = [('a', {{'ssh_hostname': '127.0.0.1', 'ssh_key': '{missing}'}})]\n"
    )
    out = tmp_path / "check.json"
    result = check(fleet, "--inventory", str(inventory), "--json", str(out))
    _no_traceback(result.stderr + result.stdout)
    assert result.returncode == 1
    pod = json.loads(out.read_text())["pods"]["a"]
    assert (pod["status"], pod["error"]) == ("unreachable", f"no such key file: {missing}")


def test_the_shipped_example_without_its_key_is_one_line(tmp_path):
    """A new user's first run: the example pods file, and no ~/.ssh/id_ed25519 yet."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PODSTATE_", "RUNPOD_"))}
    env.update(HOME=str(tmp_path), PODSTATE_PODS="inventories/pods.example.yaml")
    result = subprocess.run(
        [str(BIN / "podstate"), "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"podstate: no such SSH key file: {tmp_path}/.ssh/id_ed25519 (ssh_key of trainer-1, "
        "eval-1): make it (ssh-keygen -t ed25519 -f FILE) or set ssh_key to the private key "
        "your pods accept\n"
    )
