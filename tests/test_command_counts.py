"""Remote commands per pod: the one-round-trip budget of a run, counted in the pods' sshd logs.

Real pods are 50-200 ms away, so every remote command a run spends per pod is time. On a
converged fleet a check and a noop apply each cost the probe alone; a first apply costs the
probe plus one command that makes every change and releases the pod lock. Counts, never
times: bench/ measures time.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
from collections.abc import Iterator

import pytest
import yaml

from podstate.run import fold
from podstate.sandbox import inside
from tests.apt_repo import build_deb, serve
from tests.e2e import ROOT, Fleet, apply, check, exec_count

CHECK_COMMANDS = 1  # exactly: the probe
NOOP_COMMANDS = 1  # exactly: the probe (the issue's budget is 3)
# exactly: the probe, then one command for every change (podstate.run.fold), which releases the
# pod lock; however much changes
FIRST_APPLY_COMMANDS = 2
# every role that changes something in use: apt packages, files, keys, a repository cloned
# from a bare one on the pod, a secret (its file travels on the command's stdin); all read
# by the same probe
KEYS = {
    "packages": {"apt": ["podstate-counted", "bash"]},
    "files": {
        "/root/.gitconfig": {"content": "[user]\n\tname = Pod\n"},
        "/root/.config/accelerate/default_config.yaml": {"content": "x: 1\n", "mode": "0600"},
    },
    "authorized_keys": [
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGmYcG6NWlP6zxDiXGHDwC4whjAQALSZ3F6gIKZEhofW a@b"
    ],
    "repos": {"/root/code/counted": {"url": "file:///srv/git/counted.git", "ref": "v1"}},
    "secrets": {"COUNTED_TOKEN": {"from_env": "PODSTATE_COUNTED_TOKEN"}},
}
ORIGIN = (
    "set -e; git init -q --bare /srv/git/counted.git && git init -q /tmp/counted && "
    "cd /tmp/counted && echo 1 > f && git add f && "
    "git -c user.name=t -c user.email=t@example.com commit -qm 1 && git tag v1 && "
    "git push -q /srv/git/counted.git HEAD:refs/heads/main --tags && rm -rf /tmp/counted"
)


# A first apply of every section at once, on a pod with a local volume: 200 files, 20
# repositories, kept host keys and the boot hook (whose data holds every file on the
# container disk). Each command's argument stays under ARGUMENT_MAX: the probe's program
# and the steps of the changes travel on its stdin.
LARGE_POD = "pod-2"
ARGUMENT_MAX = 64 << 10
FILES = 200
# a login shell's execve, as strace writes it: the command (sshd's exec request) is its -c
LOGIN = re.compile(r'execve\("[^"]*", \["bash", "-c", "((?:[^"\\]|\\.)*)"')
REPOS = 20
# a line of the fold's reader that its quoting on the command line leaves as it is
READER_LINE = b"the changes did not all reach the pod"


def _large_state() -> dict:
    """Return every section podstate converges (but a venv, which builds from the network),
    with FILES files (on the container disk: the boot hook's data holds each), REPOS
    repositories, kept host keys and the boot hook."""
    return {
        **KEYS,
        "shm": {"min_size": "32M"},
        "env": {"PODSTATE_COUNTED": "large"},
        "files": {
            f"/root/counted/f{i:03d}.conf": {"content": f"# file {i}\nvalue = {i * 7919}\n"}
            for i in range(FILES)
        },
        "repos": {
            f"/root/code/r{i:02d}": {"url": "file:///srv/git/counted.git", "ref": "v1"}
            for i in range(REPOS)
        },
        "boot": {"hook": True, "host_keys": "keep"},
    }


@contextlib.contextmanager
def _arguments(pod: str) -> Iterator[list[bytes]]:
    """Yield a list that, once the block has run, holds the command each login shell
    started on ``pod`` during it was given (its ``-c`` argument), read back whole."""
    commands: list[bytes] = []
    with inside.execs(pod) as started:
        yield commands
    for arg in LOGIN.findall("\n".join(started)):
        # strace writes each byte that is not printable as an escape: undone
        commands.append(arg.encode().decode("unicode_escape").encode("latin-1"))


def _counted(fleet: Fleet, run) -> tuple[object, dict[str, int]]:
    """Return ``run()``'s result and the remote commands each pod served during it."""
    before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
    result = run()
    return result, {pod: exec_count(fleet, pod) - before[pod] for pod in fleet.pods}


@pytest.fixture(scope="module")
def counts(fleet: Fleet, tmp_path_factory) -> dict[str, dict[str, int]]:
    """Return the commands per pod of a first apply, a noop apply and a check, in that order.

    pod-3's 64 MiB /dev/shm is accepted (min_size 32M) so that every pod converges cleanly;
    a ``venv`` key, if the shipped state has one, is left out (it would build from the
    network, and costs commands of its own). Every pod gets ``KEYS``, its package from a
    local apt repository.
    """
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    deb = build_deb(tmp_path_factory.mktemp("apt"), "podstate-counted")
    for pod in fleet.pods:
        serve(fleet, pod, [deb])
        fleet.out(pod, ORIGIN)
    os.environ["PODSTATE_COUNTED_TOKEN"] = "counted"
    fleet.group_vars("all", KEYS, merge=True)
    for path in (fleet.vars_dir / "group_vars").glob("*.yaml"):
        data = yaml.safe_load(path.read_text()) or {}
        if "venv" in data:
            del data["venv"]
            fleet.group_vars(path.stem, data)
    result: dict[str, dict[str, int]] = {}
    for step, run in (
        ("first apply", lambda: apply(fleet)),
        ("noop apply", lambda: apply(fleet)),
        ("check", lambda: check(fleet)),
    ):
        outcome, result[step] = _counted(fleet, run)
        assert outcome.returncode == 0, f"{step}: {outcome.stdout}\n{outcome.stderr}"
    return result


def test_check_runs_one_command_per_pod(counts):
    assert counts["check"] == {pod: CHECK_COMMANDS for pod in counts["check"]}


def test_noop_apply_runs_only_the_probe(counts):
    assert counts["noop apply"] == {pod: NOOP_COMMANDS for pod in counts["noop apply"]}


def test_first_apply_runs_the_probe_and_one_command(counts):
    assert counts["first apply"] == {pod: FIRST_APPLY_COMMANDS for pod in counts["first apply"]}


def test_a_first_apply_of_everything_is_one_command_of_a_small_argument(fleet, counts, tmp_path):
    """A first apply of every section is one command, whose argument is small, and each
    file's content travels once on its stdin: the boot hook's data, which holds every file
    on the container disk, copies them on the pod from the files the same command writes
    (its stdin recorded as the bench records a run's commands: bench/record)."""
    state = _large_state()
    fleet.host_vars(LARGE_POD, state)
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    env = {
        **fleet.env(),
        "PYTHONPATH": str(ROOT / "bench" / "record"),
        "PODSTATE_BENCH_RECORD": str(recorded),
    }
    try:
        with _arguments(LARGE_POD) as commands:
            run = lambda: apply(fleet, "--limit", LARGE_POD, env=env)  # noqa: E731
            result, served = _counted(fleet, run)
        assert result.returncode == 0, result.stdout + result.stderr
        assert fleet.out(LARGE_POD, "ls /root/counted | wc -l") == f"{FILES}\n"
        assert fleet.out(LARGE_POD, "ls -d /root/code/r* | wc -l") == f"{REPOS}\n"
        assert fleet.out(LARGE_POD, "head -c 14 /workspace/.podstate/boot/state") == (
            "podstate-boot "
        )
    finally:
        fleet.host_vars(LARGE_POD, None)
    assert served[LARGE_POD] == FIRST_APPLY_COMMANDS
    assert len(commands) == FIRST_APPLY_COMMANDS
    assert READER_LINE.decode() in fold.READER
    assert len([c for c in commands if READER_LINE in c]) == 1
    assert max(len(c) for c in commands) < ARGUMENT_MAX
    sent = [
        base64.b64decode(json.loads(line)["stdin"])
        for path in recorded.glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    stdin = b"".join(sent)
    for path, item in state["files"].items():
        content = item["content"].encode()
        assert stdin.count(content) == 1, path
        assert base64.b64encode(content) not in stdin, path
