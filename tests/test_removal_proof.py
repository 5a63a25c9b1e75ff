"""Every removal proves on the pod that what it removes is what podstate wrote, and takes
only that: a venv on the volume takes its own files from podstate's directory there, never
the boot hook, its data, the archived host keys or another pod's record beside them; a
record line naming a path outside the place its kind lives, or with ``..``, or something
podstate did not write, removes nothing and is named; the records' folder on the volume is
root-only even where it was made looser.

End to end on pod-2, whose ``/workspace`` is a local volume (a venv may live there).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import yaml

from podstate.facts import made
from podstate.facts.made import Entry
from tests.e2e import apply, check
from tests.fixtures.venv.wheels import tar_bytes, wheelhouse

SANDBOX = {"pods": 2}
POD = "pod-2"
HOME = "/workspace/.podstate"
RECORDS = f"{HOME}/made"
VENV = {"path": "/workspace/venv", "packages": ["tinyapp"], "find_links": ["/workspace/wheels"],
        "no_index": True}  # fmt: skip
BASE = {"shm": {"min_size": "32M"}, "boot": {"hook": True, "host_keys": "keep"}}
THEIRS = "/workspace/theirs.txt"


def _desired(fleet, data: dict) -> None:
    (fleet.vars_dir / "group_vars" / "all.yaml").write_text(yaml.safe_dump(data))


def _entry(fleet, tmp_path: Path) -> dict:
    out = tmp_path / "r.json"
    result = check(fleet, "--limit", POD, "--json", str(out))
    assert out.exists(), result.stdout + result.stderr
    return json.loads(out.read_text())["pods"][POD]


def _changes(entry: dict) -> list[str]:
    return [c["operation"] for c in entry["changes"]]


def _applied(fleet) -> None:
    done = apply(fleet, "--limit", POD)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


def _ls(fleet, directory: str) -> list[str]:
    return sorted(fleet.out(POD, f"ls -A {directory}").split())


def _other_record(fleet) -> str:
    """Write another pod's record on the volume (a pod sharing it); return its path."""
    other = f"{RECORDS}/other-pod-id"
    text = made.render("pod-9", "other-pod-id", [Entry("file", THEIRS, (made.sums("x\n"),))])
    fleet.out(POD, f"echo x > {THEIRS} && cat > {other}", text.encode())
    return other


def test_a_venv_on_the_volume_takes_only_its_own_files_from_podstates_directory(fleet, tmp_path):
    house = base64.b64encode(tar_bytes(wheelhouse(tmp_path / "wheels"))).decode()
    fleet.out(POD, f"mkdir -p /workspace/wheels && echo {house} | base64 -d | "
                   "tar -xzf - -C /workspace/wheels")  # fmt: skip
    _desired(fleet, {**BASE, "venv": VENV})
    _applied(fleet)
    other = _other_record(fleet)
    there = _ls(fleet, HOME)
    assert {"boot.sh", "boot", "made", "venv.log"} <= set(there), there
    boot = _ls(fleet, f"{HOME}/boot")
    assert {"state", "hostkeys.tar", "hostkeys.sum"} <= set(boot), boot
    records = _ls(fleet, RECORDS)
    assert len(records) == 2 and "other-pod-id" in records

    _desired(fleet, BASE)
    assert "would remove: the venv /workspace/venv" in _changes(_entry(fleet, tmp_path))
    _applied(fleet)
    assert fleet.ssh(POD, "test -e /workspace/venv").returncode == 1
    assert not [n for n in _ls(fleet, "/workspace") if n.startswith(".venv-")]
    kept = _ls(fleet, HOME)
    assert "venv.log" not in kept and "uv" not in kept and "uv-env" not in kept
    assert set(there) - {"venv.log", "uv", "uv-env", "uv-install.log"} <= set(kept), kept
    assert _ls(fleet, f"{HOME}/boot") == boot
    assert _ls(fleet, RECORDS) == records
    assert fleet.out(POD, f"cat {THEIRS}") == "x\n"
    assert "other-pod-id" in fleet.out(POD, f"cat {other}")
    assert _entry(fleet, tmp_path)["status"] == "ok"
    fleet.out(POD, f"rm -f {other} {THEIRS}")
