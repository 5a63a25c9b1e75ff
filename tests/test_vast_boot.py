"""The boot hook on Vast: the template's onstart script sources it at every container start,
and it lives on the container disk, which Vast keeps across a stop and start; the pod's
identity is Vast's (VAST_CONTAINERLABEL, CONTAINER_ID), read from the container by name.

End to end on a sandbox Vast instance (``vast-1``, from the sandbox's pods file with
``provider: vast``), restarted by ``podstate sandbox restart`` as a Vast stop and start.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from podstate.operations import boot as boot_ops
from podstate.roles import env
from podstate.sandbox.state import pod_state_dir
from tests.e2e import BIN, apply, check, run
from tests.test_identity_cache import identity

SANDBOX = {"pods": 1, "vast": 1}
VAST = boot_ops.Layout("/workspace", "vast")
STATE = {"boot": {"hook": True}, "env": {"WHO": "vast-1"}}
# The template's onstart script: the hook first, then what the user's start runs, which
# records whether the state was back by then (the ready marker, the declared environment).
ONSTART = (
    f"{VAST.onstart_line()}\n"
    '{ cat /etc/podstate/ready; echo "WHO=${WHO:-}"; } >/root/onstart-saw 2>&1\n'
)


def test_the_vast_layout_keeps_the_hook_on_the_container_disk():
    assert (VAST.hook, VAST.state) == ("/var/lib/podstate/boot.sh", "/var/lib/podstate/boot/state")
    assert VAST.record == "/workspace/.podstate/applied" and not VAST.needs_volume
    # the line docs/vast.md gives for the onstart script
    assert VAST.onstart_line() == (
        "if [ -f /var/lib/podstate/boot.sh ]; then . /var/lib/podstate/boot.sh; fi"
    )
    assert boot_ops.Layout("/workspace").hook == "/workspace/.podstate/boot.sh"
    assert boot_ops.Layout("/workspace").needs_volume
    hook = boot_ops.render_hook(VAST)
    assert "_podstate_boot=/var/lib/podstate/boot.sh\n" in hook
    assert "    IDS='VAST_CONTAINERLABEL CONTAINER_ID'\n" in hook
    assert "RUNPOD_POD_ID" not in hook.split("IDS=", 1)[1].split("\n", 1)[0]
    with pytest.raises(ValueError):
        boot_ops.Layout("/workspace", "lambda")


@pytest.mark.parametrize(
    ("environ", "seen"),
    [
        (
            b"CONTAINER_API_KEY=secret\0VAST_CONTAINERLABEL=C.38250\0CONTAINER_ID=38250\0",
            "C.38250/38250",
        ),
        (b"CONTAINER_ID=38250\0", "38250"),
        (b"RUNPOD_POD_ID=abc\0CONTAINER_API_KEY=secret\0", ""),
        (b"", ""),
    ],
)
def test_the_hook_reads_the_identity_as_the_probe_does(tmp_path, environ, seen):
    path = tmp_path / "1" / "environ"
    path.parent.mkdir()
    path.write_bytes(environ)
    hook = re.search(r"\n    (identity\(\) \{.*?\n    \})\n", boot_ops.render_hook(VAST), re.S)
    assert hook, "the hook reads its identity in a function of its own"
    script = f"IDS='{' '.join(VAST.identity)}' proc_dir={tmp_path}\n{hook[1]}\nidentity\n"
    done = subprocess.run(["sh", "-c", script],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout == seen + "\n"
    assert identity("sh", path, tmp_path / "id", VAST.identity) == seen


def _restart(fleet) -> None:
    done = run(fleet, [str(BIN / "podstate"), "sandbox", "restart", "vast-1"])
    assert done.returncode == 0, done.stderr


def _check(fleet, tmp_path: Path) -> dict:
    out = tmp_path / "check.json"
    result = check(fleet, "--limit", "vast-1", "--json", str(out))
    assert "Traceback" not in result.stdout + result.stderr
    return json.loads(out.read_text())["pods"]["vast-1"]


def _start(fleet) -> str:
    """Return this container's start as the probe reads it: BOOT_ID:TICKS."""
    line = fleet.out("vast-1", "cat /proc/sys/kernel/random/boot_id /proc/1/stat")
    boot_id, stat = line.splitlines()
    return f"{boot_id}:{stat.rpartition(') ')[2].split()[19]}"


def test_the_hook_puts_a_vast_instance_back_before_anything_else(fleet, tmp_path):
    fleet.host_vars("vast-1", STATE)
    applied = apply(fleet, "--limit", "vast-1")  # creates ~/.no_auto_tmux first, over SFTP
    assert applied.returncode == 0, applied.stderr[-3000:]
    ident = str(json.loads((fleet.state / "pods.json").read_text())["vast-1"]["pod_id"])
    assert fleet.out("vast-1", f"sed -n 2p {VAST.state}") == f"pod vast-1 C.{ident}/{ident}\n"
    assert fleet.ssh("vast-1", "test -e /workspace/.podstate/boot.sh").returncode == 1
    fleet.out("vast-1", "cat >/root/onstart.sh", ONSTART.encode())
    fleet.out("vast-1", f"rm {env.PROFILE}")  # lost since: the hook puts it back

    _restart(fleet)

    marker = json.loads(fleet.out("vast-1", "cat /etc/podstate/ready"))
    assert marker["container"] == _start(fleet)  # written by the hook, for this start
    saw = fleet.out("vast-1", "cat /root/onstart-saw").splitlines()
    assert json.loads(saw[0]) == marker and saw[1] == "WHO=vast-1"
    assert "export WHO=vast-1\n" in fleet.out("vast-1", f"cat {env.PROFILE}")
    assert fleet.ssh("vast-1", "podstate-ready").returncode == 0
    status = fleet.out("vast-1", "cat /etc/podstate/boot")
    assert f"container {_start(fleet)}\n" in status and status.endswith(" ready\n")
    assert fleet.out("vast-1", f"cat {VAST.status}") == status
    entry = _check(fleet, tmp_path)
    assert (entry["status"], entry["boot"]["outcome"]) == ("ok", "restored"), entry


def test_a_carried_over_container_disk_of_another_instance_restores_nothing(fleet, tmp_path):
    environment = pod_state_dir(fleet.state, "vast-1") / "container.env"
    kept = environment.read_text()
    ident = kept.split('CONTAINER_ID="')[1].split('"')[0]
    environment.write_text(kept.replace(f'CONTAINER_ID="{ident}"', 'CONTAINER_ID="4242"'))
    try:
        fleet.out("vast-1", f"rm {env.PROFILE}")
        _restart(fleet)

        assert fleet.ssh("vast-1", f"test -e {env.PROFILE}").returncode == 1
        assert fleet.ssh("vast-1", "podstate-ready").returncode == 1  # the marker is stale
        assert "WHO=\n" in fleet.out("vast-1", "cat /root/onstart-saw")
        entry = _check(fleet, tmp_path)
        assert entry["status"] == "restarted" and entry["boot"]["outcome"] == "skipped"
        assert (
            f"is for pod vast-1 (C.{ident}/{ident}), not this one "
            f"(VAST_CONTAINERLABEL/CONTAINER_ID=C.{ident}/4242)" in entry["boot"]["reason"]
        )
    finally:
        environment.write_text(kept)
    _restart(fleet)


def test_a_vast_start_without_the_onstart_line_is_named(fleet, tmp_path):
    fleet.out("vast-1", "rm /root/onstart.sh")
    applied = apply(fleet, "--limit", "vast-1")
    assert applied.returncode == 0, applied.stderr[-3000:]

    _restart(fleet)  # the status of the start before stays on the container disk

    entry = _check(fleet, tmp_path)
    assert entry["boot"]["outcome"] == "not-run", entry
    assert VAST.onstart_line() in entry["boot"]["reason"]
    assert "onstart script" in entry["boot"]["reason"]


def test_each_provider_reads_the_hook_with_a_probe_of_its_own():
    from podstate.facts.boot import IDENTITY, assuming, provider
    from podstate.facts.probe import program
    from podstate.inventory.fleet import desired
    from podstate.pod import probe
    from podstate.roles import boot

    state = desired({"boot": {"hook": True, "volume": "/w"}})
    programs = []
    for name in IDENTITY:
        with assuming(name):
            assert boot.volume(state).provider == name
            programs.append(program(**probe.request(state).arguments()))
    assert provider() == "runpod"  # outside a pod, by default
    assert len(set(programs)) == len(programs)  # each provider's probe is its own
