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
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from podstate.desired.secret import Secret, render
from podstate.facts import made
from podstate.facts.made import Entry, Made, Record
from podstate.facts.record_lines import refused
from podstate.operations.boot import render_state, save_keys_command
from podstate.operations.removal import proved_command
from podstate.operations.venv import snapshot_line
from podstate.run import fold, lock
from podstate.shell import script
from tests.e2e import BIN, apply, check, run
from tests.fixtures.venv.wheels import tar_bytes, wheelhouse
from tests.record_entries import entry as line_entry

SANDBOX = {"pods": 2}
POD = "pod-2"
HOME = "/workspace/.podstate"
RECORDS = f"{HOME}/made"
VENV = {"path": "/workspace/venv", "packages": ["tinyapp"], "find_links": ["/workspace/wheels"],
        "no_index": True}  # fmt: skip
BASE = {"shm": {"min_size": "32M"}, "boot": {"hook": True, "host_keys": "keep"}}
THEIRS = "/workspace/theirs.txt"


# --- unit tests ---------------------------------------------------------------------------

HEX = "0123456789abcdef" * 4


def _tar(*names: str) -> bytes:
    """Return a tar of files ``names`` (each holding a line), named as in podstate's
    archive of the host keys."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size, info.mode = 6, 0o600
            tar.addfile(info, io.BytesIO(b"-----\n"))
    return out.getvalue()


def _proved(kind: str, path: Path, field: str = "") -> bool:
    command = script("made_proof.sh") + 'made_proof "$1" "$2" "$3"'
    done = subprocess.run(["sh", "-c", command, "sh", kind, str(path), field], check=False)
    return done.returncode == 0


def _write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        (root / name).write_bytes(data)


SECRET = render({"HF_TOKEN": Secret("secrets.HF_TOKEN.from_env", "hf_x")})
KEYS = {"hostkeys.tar": _tar("ssh_host_ed25519_key"), "hostkeys.sum": f"{HEX}  -\n"}
CURRENT = snapshot_line(HEX, "venv-0123456789ab.tar.zst", "zstd", HEX) + "\n"


@pytest.mark.parametrize(
    ("kind", "name", "field", "files", "proved"),
    [
        ("secrets", "env.sh", "", {"env.sh": SECRET}, True),
        ("secrets", "env.sh", "", {"env.sh": "export HF_TOKEN=mine\n"}, False),
        ("secrets", "env.sh", "", {"env.sh": ""}, False),
        ("secrets", "env.sh", "", {}, True),  # nothing there: nothing to remove
        ("keys", "hostkeys.tar", "", KEYS, True),
        ("keys", "hostkeys.tar", "", {"hostkeys.tar": _tar("root/notes.txt")}, False),
        ("keys", "hostkeys.tar", "", {**KEYS, "hostkeys.sum": "mine\n"}, False),
        ("data", "boot", "", {"boot/state": render_state("pod-1", "id", [])}, True),
        ("data", "boot", "", {"boot/state": "x\n", "boot/status": "start now\n"}, False),
        ("data", "boot", "", {"boot/status": "start 2026-01-01T00:00:00Z\n"}, True),
        ("data", "boot", "", {"boot/status": "mine\n"}, False),
        ("data", "boot", "", {f"boot/{n}": c for n, c in KEYS.items()}, True),
        ("snapshot", "s", "", {"s/current": CURRENT, "s/venv-0123456789ab.tar.zst": "x"}, True),
        ("snapshot", "s", "", {"s/current.bad": CURRENT}, True),
        ("snapshot", "s", "", {"s/current": "mine\n", "s/venv-0123456789ab.tar.zst": "x"}, False),
        ("snapshot", "s", "", {"s/venv-0123456789ab.tar.zst": "x"}, False),
        ("snapshot", "s", "", {"s/notes.txt": "mine\n"}, True),  # no archive: rmdir keeps it
        (
            "dir",
            "d",
            "scratch",
            {"d/.podstate-cache/pip/x": "", "d/.podstate-cache/uv/y": ""},
            True,
        ),
        (
            "dir",
            "d",
            "scratch",
            {"d/.podstate-cache/uv/y": "", "d/.podstate-cache/.mine": ""},
            False,
        ),
        ("dir", "d", "scratch", {"d/mine": ""}, True),  # no cache: rmdir keeps what is there
        ("dir", "d", "", {"d/.podstate-cache/mine": ""}, True),  # removed only when empty
    ],
)
def test_the_proof_tells_what_podstate_wrote_from_what_it_did_not(
    tmp_path, kind, name, field, files, proved
):
    _write(tmp_path, files)
    assert _proved(kind, tmp_path / name, field) is proved


def test_the_host_keys_podstate_archives_are_proved_as_its_own(tmp_path):
    data = tmp_path / "boot"
    subprocess.run(["sh", "-c", save_keys_command(str(data))], check=True)
    assert _proved("keys", data / "hostkeys.tar") and _proved("data", data)


def test_a_fold_carries_the_proof_once_and_its_steps_run_it(tmp_path):
    steps = []
    for name, current in (("ours", CURRENT), ("mine", "mine\n")):
        _write(tmp_path, {f"{name}/current": current})
        remove = f"rm -f {tmp_path}/{name}/current"
        steps.append(
            fold._step(lock.Change(proved_command("snapshot", str(tmp_path / name), "", remove)))
        )
    segment = fold.Segment("h")
    for shell, ttl, later in steps:
        segment.add(shell, ttl, later)
    assert segment.payload().decode().count("made_hex()") == 1  # on stdin, once
    define = f"podstate_made_proof() {{\n{script('made_proof.sh')}\n}}\n"
    done = [
        subprocess.run(["sh", "-c", define + shell], capture_output=True, text=True)
        for shell, _, _ in steps
    ]
    assert done[0].returncode == 0 and not (tmp_path / "ours/current").exists()
    assert done[1].returncode == 1 and "holds what podstate did not write" in done[1].stderr
    assert (tmp_path / "mine/current").read_text() == "mine\n"


def test_the_secrets_files_first_line_is_the_mark_the_proof_reads():
    assert SECRET.startswith("# Managed by podstate: ")


def _made(volume: list[Entry]) -> Made:
    record = Record("file", "pod-2", "id", {e.path: e for e in volume})
    return Made(pod_id="id", records={"disk": Record("file", "pod-2", "id"), "volume": record})


@pytest.mark.parametrize(
    ("entry", "on_volume", "why"),
    [
        (line_entry("secrets", "/etc/podstate/secrets/env.sh"), False, None),
        (line_entry("secrets", "/etc/passwd"), False, "which podstate keeps only at"),
        (line_entry("dir", "/workspace/../root"), True, "a path podstate never writes"),
        (line_entry("dir", "/workspace/./x"), True, "a path podstate never writes"),
        (line_entry("dir", "/workspace//x"), True, "a path podstate never writes"),
        (line_entry("dir", "/workspace/x/"), True, "a path podstate never writes"),
        (line_entry("dir", "workspace/x"), False, "a path podstate never writes"),
        (line_entry("dir", "/"), False, "a path podstate never writes"),
        (line_entry("dir", "~/.config"), False, None),
        (line_entry("data", "/workspace/.podstate/boot"), True, None),
        (line_entry("data", "/var/lib/podstate/boot"), False, None),
        (line_entry("data", "/root"), False, "which podstate keeps only at"),
        (line_entry("keys", "/workspace/.podstate/boot/hostkeys.tar"), True, None),
        (line_entry("keys", "/workspace/.podstate/boot/other.tar"), True, "keeps only at"),
        (line_entry("file", "/etc/x", "s"), False, None),
        (line_entry("file", "/etc/x", "s"), True, "not on the volume /workspace"),
        (line_entry("snapshot", "/workspace/.podstate/venv"), True, None),
        (line_entry("saved", "/etc/x", "s", "=/etc/podstate/saved/x"), False, None),
        (line_entry("saved", "/etc/x", "s", "=/etc/passwd"), False, "not under /etc/podstate"),
        (
            line_entry("saved", "/etc/x", "s", "=/etc/podstate/saved/../../passwd"),
            False,
            "not under",
        ),
        (line_entry("apt", "apt:nvtop"), False, None),
    ],
)
def test_a_record_line_podstate_never_writes_is_refused(entry, on_volume, why):
    homes = ("/workspace/.podstate", "/var/lib/podstate")
    found = refused(entry, _made([entry] if on_volume else []), "/workspace", homes)
    assert (found is None) if why is None else (why in (found or "")), found


# --- end to end ---------------------------------------------------------------------------


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
    text = made.render("pod-9", "other-pod-id", [line_entry("file", THEIRS, made.sums("x\n"))])
    fleet.out(POD, f"echo x > {THEIRS} && cat > {other}", text.encode())
    return other


def test_a_venv_on_the_volume_takes_only_its_own_files_from_podstates_directory(fleet, tmp_path):
    house = base64.b64encode(tar_bytes(wheelhouse(tmp_path / "wheels"))).decode()
    fleet.out(POD, f"mkdir -p /workspace/wheels && echo {house} | base64 -d | "
                   "tar -xzf - -C /workspace/wheels")  # fmt: skip
    fleet.group_vars("all", {**BASE, "venv": VENV})
    _applied(fleet)
    other = _other_record(fleet)
    there = _ls(fleet, HOME)
    assert {"boot.sh", "boot", "made", "venv.log"} <= set(there), there
    boot = _ls(fleet, f"{HOME}/boot")
    assert {"state", "hostkeys.tar", "hostkeys.sum"} <= set(boot), boot
    records = _ls(fleet, RECORDS)
    assert len(records) == 2 and "other-pod-id" in records

    fleet.group_vars("all", BASE)
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


def _volume_record(fleet) -> str:
    [name] = [n for n in _ls(fleet, RECORDS) if n != "other-pod-id"]
    return f"{RECORDS}/{name}"


# Lines as another pod's root could add to this pod's record on the volume they share: a
# file outside the place of the secrets file, a directory named through "..", and a
# directory of the user's that holds an archive named as podstate names its snapshots.
FORGED = {
    "/etc/victim.conf": ("secrets =/etc/victim.conf", "which podstate keeps only at"),
    "/workspace/../victim": ("dir =/workspace/../victim scratch", "a path podstate never writes"),
    "/workspace/mine": ("snapshot =/workspace/mine", "holds what podstate did not write"),
}
VICTIMS = ["/etc/victim.conf", "/victim/.podstate-cache/keep.txt",
           "/workspace/mine/venv-0123456789ab.tar.gz"]  # fmt: skip


def test_a_record_line_podstate_did_not_write_removes_nothing_and_says_why(fleet, tmp_path):
    fleet.group_vars("all", BASE)
    _applied(fleet)
    for victim in VICTIMS:
        fleet.out(POD, f"mkdir -p $(dirname {victim}) && echo mine > {victim}")
    record = _volume_record(fleet)
    lines = "".join(line + "\n" for line, _ in FORGED.values())
    fleet.out(POD, f"cat >> {record}", lines.encode())

    changes = _changes(_entry(fleet, tmp_path))
    parts = [part for change in changes for part in change.split("; would forget: ")]
    for path, (_, why) in FORGED.items():
        [said] = [p for p in parts if p.removeprefix("would forget: ").startswith(f"{path}:")] or [
            p for p in parts if p.removeprefix("would forget: ").startswith(f"{path} ")
        ]
        assert why in said and "left as it is" in said, said
    assert not [c for c in changes if c.startswith("would remove")], changes
    _applied(fleet)
    for victim in VICTIMS:
        assert fleet.out(POD, f"cat {victim}") == "mine\n", victim
    text = fleet.out(POD, f"cat {record}")
    assert not [line for line, _ in FORGED.values() if line in text]  # forgotten
    assert _entry(fleet, tmp_path)["status"] == "ok"


def test_the_removal_proves_again_on_the_pod_what_it_removes(fleet):
    fleet.out(POD, "mkdir -p /workspace/mine && echo mine > /workspace/mine/current")
    remove = "rm -f /workspace/mine/current"
    done = fleet.ssh(POD, proved_command("snapshot", "/workspace/mine", "", remove))
    assert done.returncode == 1
    assert "/workspace/mine: holds what podstate did not write; left as it is" in done.stderr
    assert fleet.out(POD, "cat /workspace/mine/current") == "mine\n"
    fleet.out(POD, f"echo '{CURRENT.strip()}' > /workspace/mine/current")
    done = fleet.ssh(POD, proved_command("snapshot", "/workspace/mine", "", remove))
    assert done.returncode == 0, done.stderr
    assert fleet.ssh(POD, "test -e /workspace/mine/current").returncode == 1


def test_the_records_folder_on_the_volume_is_made_root_only_again(fleet, tmp_path):
    fleet.group_vars("all", BASE)
    _applied(fleet)
    fleet.out(POD, f"chmod 777 {RECORDS}")
    changes = _changes(_entry(fleet, tmp_path))
    assert (
        f"would tighten: {RECORDS} to mode 700 (it is 777): the records in it are root's alone"
        in changes
    )
    _applied(fleet)
    assert fleet.out(POD, f"stat -c %a {RECORDS}") == "700\n"
    assert _entry(fleet, tmp_path)["status"] == "ok"


def test_uninstall_leaves_what_a_line_podstate_did_not_write_names(fleet):
    fleet.group_vars("all", BASE)
    _applied(fleet)
    for victim in VICTIMS:
        fleet.out(POD, f"mkdir -p $(dirname {victim}) && echo mine > {victim}")
    lines = "".join(line + "\n" for line, _ in FORGED.values())
    fleet.out(POD, f"cat >> {_volume_record(fleet)}", lines.encode())
    dry = run(fleet, [str(BIN / "podstate"), "uninstall", "--limit", POD, "--dry-run"])
    assert dry.returncode == 2, dry.stdout + dry.stderr
    [line] = [x for x in dry.stdout.splitlines() if "would leave in place: " in x]
    for path, (_, why) in FORGED.items():
        assert f"{path}" in line and why in line, line
    done = run(fleet, [str(BIN / "podstate"), "uninstall", "--limit", POD])
    assert done.returncode == 0, done.stdout + done.stderr
    for victim in VICTIMS:
        assert fleet.out(POD, f"cat {victim}") == "mine\n", victim
    assert fleet.ssh(POD, f"test -e {HOME}/boot.sh").returncode == 1  # the rest went
