"""Remote commands per pod: the one-round-trip budget of a run, counted in the pods' sshd logs.

Real pods are 50-200 ms away, so every remote command a run spends per pod is time. On a
converged fleet a check and a noop apply each cost the probe alone; a first apply costs the
probe plus one command that makes every change and releases the pod lock. Counts, never
times: bench/ measures time.
"""

from __future__ import annotations

import os

import pytest
import yaml

from tests.apt_repo import build_deb, serve
from tests.e2e import Fleet, apply, check, exec_count

CHECK_COMMANDS = 1  # exactly: the probe
NOOP_COMMANDS = 1  # exactly: the probe (the budget is 3)
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
    with (fleet.vars_dir / "group_vars" / "all.yaml").open("a") as all_vars:
        all_vars.write(yaml.safe_dump(KEYS))
    for path in (fleet.vars_dir / "group_vars").glob("*.yaml"):
        data = yaml.safe_load(path.read_text()) or {}
        if "venv" in data:
            del data["venv"]
            path.write_text(yaml.safe_dump(data))
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
