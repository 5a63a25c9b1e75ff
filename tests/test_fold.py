"""End to end: podstate's changes to a pod run as one remote command (``podstate.run.fold``), and
each operation still reports its own result.

A step that fails names its own operation with its own output; the steps before it stay
done, no later one runs, and the lock is released. An upload too large to ride on the
command's stdin splits the command in two around it.
"""

from __future__ import annotations

import os
import resource
import shlex
from pathlib import Path

import paramiko

from podstate.run import fold, lock
from podstate.sandbox.state import pod_state_dir, read_json
from tests.e2e import Fleet, apply, exec_count

SANDBOX = {"pods": 2}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGmYcG6NWlP6zxDiXGHDwC4whjAQALSZ3F6gIKZEhofW fold@test"
BLOCKED = "/root/blocker/settings.toml"  # /root/blocker is a regular file: mkdir fails


def _results(run) -> dict[str, dict[str, list[str]]]:
    """Return each operation's hosts by outcome, by operation name."""
    return {op["name"].split(" | ")[-1]: op for op in run.json["results"]["operations"]}


def _declare(fleet: Fleet, pod: str, data: dict) -> None:
    fleet.host_vars(pod, {"shm": {"min_size": "32M"}, **data})


def _client(root: Path) -> paramiko.SSHClient:
    """Return a paramiko client connected to pod-1 of the sandbox at ``root``, as root."""
    client = paramiko.SSHClient()
    client.load_host_keys(str(pod_state_dir(root, "pod-1") / "known_hosts"))
    client.connect(
        "127.0.0.1",
        read_json(root / "pods.json")["pod-1"]["port"],
        "root",
        key_filename=str(root / "id_ed25519"),
        allow_agent=False,
        look_for_keys=False,
    )
    return client


def test_a_failing_step_fails_its_operation_and_stops_the_pod_there(fleet: Fleet):
    for pod in fleet.pods:
        fleet.out(pod, "printf 'not a directory\\n' > /root/blocker")
        _declare(
            fleet,
            pod,
            {
                "files": {
                    "/root/.gitconfig": {"content": "[user]\n\tname = Pod\n"},
                    **({BLOCKED: {"content": "x = 1\n"}} if pod == "pod-1" else {}),
                },
                "authorized_keys": [KEY],
            },
        )
    before = exec_count(fleet, "pod-1")
    run = apply(fleet)
    commands = exec_count(fleet, "pod-1") - before
    assert run.returncode != 0
    ops = _results(run)
    assert ops[f"File {BLOCKED}"]["error"] == ["pod-1"]
    # its own output, from inside the folded command
    assert "Not a directory" in run.stderr or "File exists" in run.stderr, run.stderr
    # the steps before it (the profile, the other file) are done on pod-1 ...
    assert "pod-1" in ops["File /root/.gitconfig"]["success"]
    assert fleet.out("pod-1", "cat /root/.gitconfig") == "[user]\n\tname = Pod\n"
    assert fleet.ssh("pod-1", "test -s /etc/profile.d/podstate.sh").returncode == 0
    # ... no later one ran there, and the lock is gone; the other pod converged
    assert "pod-1" not in ops["Keys in ~/.ssh/authorized_keys"]["success"]
    assert fleet.ssh("pod-1", "grep -q fold@test ~/.ssh/authorized_keys").returncode != 0
    assert fleet.ssh("pod-1", "test -e /run/podstate.lock").returncode == 1
    assert "pod-2" in ops["Keys in ~/.ssh/authorized_keys"]["success"]
    assert fleet.ssh("pod-2", "test -e /run/podstate.lock").returncode == 1
    # the probe, then one command for every change up to the failure
    assert commands == 2
    # fixed, the next apply finishes the pod: the failed step and the ones after it
    fleet.out("pod-1", "rm /root/blocker")
    again = apply(fleet)
    assert again.returncode == 0, again.stderr
    assert fleet.out("pod-1", f"cat {BLOCKED}") == "x = 1\n"
    assert fleet.ssh("pod-1", "grep -q fold@test ~/.ssh/authorized_keys").returncode == 0


def test_an_upload_too_large_for_stdin_splits_the_command_around_it(fleet: Fleet, monkeypatch):
    large = "".join(f"{i:07d}\n" for i in range(5000))  # 40,000 bytes, over UPLOAD_MAX
    monkeypatch.setenv("PODSTATE_FOLD_SECRET", large)
    for pod in fleet.pods:
        _declare(
            fleet,
            pod,
            {
                "secrets": {"FOLD_SECRET": {"from_env": "PODSTATE_FOLD_SECRET"}},
                "env": {"FOLD_CHANGED": pod},
            },
        )
    before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    # the probe, the changes up to the upload, then (after it, over SFTP) the rest
    assert {pod: exec_count(fleet, pod) - before[pod] for pod in fleet.pods} == {
        pod: 3 for pod in fleet.pods
    }
    for pod in fleet.pods:
        assert fleet.out(pod, "bash -lc 'printf %s \"$FOLD_SECRET\"'") == large
        assert fleet.out(pod, "bash -lc 'echo $FOLD_CHANGED'") == pod + "\n"
        assert fleet.out(pod, "stat -c %a /etc/podstate/secrets/env.sh") == "600\n"


def test_over_ssh_each_step_is_read_as_it_ran_whatever_its_output_ended_with(fleet: Fleet):
    """Through the pod's own sshd and sh: output with no final newline, a progress line, NUL
    and a byte that is not UTF-8 are each their step's, exactly; the long step after a short
    one that printed no newline is held to its own limit, not the short one's."""
    segment = fold.Segment("op", release=True)
    for shell, ttl, later in [
        ("printf 'no newline'", 1, False),
        ("sleep 2; printf '10%%\\r100%%'", 10, True),
        ("printf 'x\\000\\377'", 5, False),
    ]:
        segment.add(fold._step(lock.Change(shell))[0], ttl, later)
    client = _client(fleet.state)
    with client:
        channel = client.get_transport().open_session()  # type: ignore[union-attr]
        channel.set_combine_stderr(True)
        channel.exec_command(f"sh -c {shlex.quote(segment.command())}")  # as pyinfra runs it
        fold.converse(segment, channel, None)
    assert (segment.why, segment.status, segment.done) == ("", 0, {0, 1, 2})
    assert [bytes(segment.output[i]) for i in range(3)] == [b"no newline", b"10%\r100%", b"x\0\xff"]
    assert fleet.ssh("pod-1", "test -e /run/podstate.lock").returncode == 1


def test_a_fold_is_read_whatever_the_number_of_its_channel_descriptor(fleet: Fleet):
    """A run of hundreds of pods holds descriptors numbered past 1024, where ``select``
    refuses them ("filedescriptor out of range"): 260 of 500 pods' first apply failed so.
    Here every descriptor below 1100 is taken first, so the channel's are above."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), max(hard, 2048)))
    held = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        segment = fold.Segment("op", release=True)
        segment.add(fold._step(lock.Change("printf 'many pods'"))[0], 10, False)
        client = _client(fleet.state)
        with client:
            channel = client.get_transport().open_session()  # type: ignore[union-attr]
            assert channel.get_transport().sock.fileno() > 1024  # type: ignore[union-attr]
            channel.set_combine_stderr(True)
            channel.exec_command(f"sh -c {shlex.quote(segment.command())}")
            fold.converse(segment, channel, None)
        assert (segment.why, segment.status, bytes(segment.output[0])) == ("", 0, b"many pods")
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
