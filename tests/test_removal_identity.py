"""The records of what podstate made are bound to the pod's identity on every provider: a
Vast instance's records name its Vast identity, and a container without any provider's
identity gets an id podstate makes, written into its container disk's record; on a volume
two pods share, each pod's things stay in its own record, and a path the other pod's record
names too is never removed by this one. The provider's identity wins over the record's: a
container disk copied from another pod (a baked image) takes nothing of that pod's.

End to end on sandbox pods: ``vast-1`` and ``vast-2`` (Vast instances, from the pods file,
vast-2 given a copy of vast-1's container disk's record), pod-2 and pod-4 restarted without
RUNPOD_POD_ID (an image without any provider's variables), pod-4's volume the same
directory as pod-2's (a volume the two share), and pod-3 with a copy of pod-1's container
disk's record, on pod-1's network volume.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from podstate.facts import made, record_id
from podstate.facts.made import Made, Record
from podstate.operations.records import record_command
from podstate.sandbox import container, inside
from podstate.sandbox.state import pod_state_dir
from podstate.shell import script
from tests.e2e import BIN, apply, check, run
from tests.record_entries import entry as line_entry

SANDBOX = {"pods": 4, "vast": 2}
BASE = {"shm": {"min_size": "32M"}}
RECORDS = "/workspace/.podstate/made"
SHARED = "/workspace/shared/both.txt"
NEW_ID = re.compile(r"podstate-[0-9a-f]{32}")


# --- unit tests ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod_id", "name"),
    [
        ("k3x9q2mz8w1abc", "k3x9q2mz8w1abc"),  # RunPod's: the name as it always was
        ("C.38250/38250", "C.38250+38250"),  # Vast's two values
        ("podstate-0123456789abcdef0123456789abcdef", "podstate-0123456789abcdef0123456789abcdef"),
        ("a/b/c", "a+b+c"),
        ("x_y.z-1", "x_y.z-1"),
        ("", None),
        (".hidden", None),
        ("..", None),
        ("/abc", None),
        ("-abc", None),
        ("a+b", None),  # else it would share a name with a/b
        ("a b", None),
        ("a\nb", None),
        ("é", None),
        ("a" * 128, "a" * 128),
        ("a" * 129, None),
    ],
)
def test_the_volume_records_name_is_one_safe_path_component_as_in_the_found(pod_id, name):
    assert record_id.record_name(pod_id) == name
    shell = subprocess.run(
        ["sh", "-c", f'i=$1; {record_id.name_line()}; printf %s "$made_name"', "sh", pod_id],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shell == (name or "")
    if name is None:
        with pytest.raises(ValueError):
            record_id.volume_record("/workspace", pod_id)
    else:
        assert record_id.volume_record("/workspace", pod_id) == f"{RECORDS}/{name}"


def test_a_path_another_record_on_the_volume_names_is_told(tmp_path):
    records, disk = tmp_path / "made", tmp_path / "disk"
    records.mkdir()
    mine = [line_entry("file", "/workspace/a", "s"), line_entry("dir", "/workspace/d")]
    theirs = [line_entry("file", "/workspace/a", "t"), line_entry("file", "/workspace/b", "t")]
    (records / "C.1+1").write_text(made.render("me", "C.1/1", mine))
    (records / "C.1+1.part").write_text(made.render("me", "C.1/1", [line_entry("dir", "/x")]))
    (records / "podstate-f00").write_text(made.render("other", "podstate-f00", theirs))
    disk.write_text(made.render("me", "C.1/1", [line_entry("file", "/etc/x", "s")]))
    (records / "gone").write_text(made.render("old", "gone", [line_entry("dir", "/x")]))

    def others(name: str) -> list[str]:
        """made_others after made_state read this pod's records, as the probe runs them."""
        read = f"made_state disk {disk} 100 >/dev/null"
        if name:
            read += f"; made_state volume {records}/{name} 100 >/dev/null"
        scripts = ("enc.sh", "stats.sh", "file_state.sh", "repo_clean.sh", "busy.sh")
        text = "\n".join(
            [
                *(script(s) for s in (*scripts, "made_proof.sh", "made_state.sh")),
                script("made_others.sh"),
                f"{read}; made_others {records} '{name}'",
            ]
        )
        out = subprocess.run(["sh", "-c", text], capture_output=True, text=True, check=True)
        return out.stdout.splitlines()

    assert others("C.1+1") == ["made.other =/workspace/a"]
    assert sorted(others("")) == []  # no record on the volume: only the disk's paths
    found = made.parse(["made.pod_id =C.1/1", *others("C.1+1")])
    assert found.pod_id == "C.1/1" and found.others == {"/workspace/a"}


def test_a_record_that_names_no_id_gets_the_pods_id_with_the_lines_it_adds(tmp_path):
    record = tmp_path / "made"
    old = [line_entry("file", "/workspace/a", "s1"), line_entry("dir", "/workspace")]
    record.write_text(made.render("pod-4", None, old))
    new = line_entry("file", "/etc/b", "s2").line()
    head = made.render("pod-4", "podstate-f00", [])
    command = record_command(str(record), new, private=True, append=True, head=head)
    subprocess.run(["sh", "-c", command], check=True)
    written = made.parse_record(record.read_text())
    assert (written.pod, written.pod_id) == ("pod-4", "podstate-f00")
    assert list(written.entries) == ["/workspace", "/workspace/a", "/etc/b"]
    assert written.entries["/workspace/a"].fields == ("s1",)  # the sums on the pod, kept


def _found(pod_id: str | None, **records: Record) -> Made:
    return Made(pod_id=pod_id, records=records)


def test_a_record_naming_another_id_is_refused_and_one_naming_none_on_the_disk_is_adopted():
    adopted = _found("C.1/1", disk=Record("file", "vast-1", None))
    assert record_id.trusted(adopted) == {}
    theirs = _found("C.1/1", disk=Record("file", "vast-1", "C.1/1"),
                    volume=Record("file", "vast-2", "C.2/2"))  # fmt: skip
    assert record_id.trusted(theirs) == {"volume": "it is another pod's (pod id C.2/2)"}
    nameless = _found("C.1/1", volume=Record("file", "x", None))
    assert record_id.trusted(nameless) == {"volume": "it is another pod's (pod id unknown)"}


def test_a_container_disks_record_naming_another_id_than_the_providers_is_a_copy():
    ours, theirs = line_entry("file", "/etc/mine", "s"), line_entry("file", "/etc/theirs", "t")
    disk = Record("file", "pod-1", "a1b2c3d4e5f6gh", entries={theirs.path: theirs})
    volume = Record("file", "pod-3", "k3x9q2mz8w1abc", entries={ours.path: ours})
    copy = _found("k3x9q2mz8w1abc", disk=disk, volume=volume)
    assert record_id.trusted(copy) == {}  # not another pod's record on the pod: a copy
    assert record_id.copied(copy) == "a1b2c3d4e5f6gh"
    assert list(made.previous(copy)) == ["/etc/mine"]  # nothing the copy names is this pod's
    assert "names pod id a1b2c3d4e5f6gh, not this pod's (k3x9q2mz8w1abc" in (
        record_id.copied_words(copy)
    )
    own = _found("a1b2c3d4e5f6gh", disk=Record("file", "pod-1", "a1b2c3d4e5f6gh"))
    assert (
        record_id.copied(own) is None and record_id.copied(_found("x", disk=Record("file"))) is None
    )


@pytest.mark.parametrize(
    ("names", "environment", "own"),
    [
        (("RUNPOD_POD_ID",), b"A=1\0RUNPOD_POD_ID=own1\0", "own1"),
        (("VAST_CONTAINERLABEL", "CONTAINER_ID"),
         b"CONTAINER_ID=38250\0A=1\0VAST_CONTAINERLABEL=C.38250\0", "C.38250/38250"),
    ],
)  # fmt: skip
def test_the_providers_identity_wins_over_the_container_disks_record(
    tmp_path, names, environment, own
):
    """The probe's lines for the pod's id, run in sh over a stand-in for /proc/1/environ."""
    environ = tmp_path / "environ"
    lines = made.probe_lines({"volume": str(tmp_path), "identity": list(names)})
    line = next(x for x in lines if "made.pod_id" in x).replace("/proc/1/environ", str(environ))

    def pod_id(environment: bytes, disk: str) -> str:
        environ.write_bytes(environment)
        text = f'enc() {{ enc_v="=$1"; }}; made_id={disk}; {line}'
        return subprocess.run(["sh", "-c", text], capture_output=True, text=True).stdout

    assert pod_id(environment, "=copied1") == f"made.pod_id ={own}\n"  # a copied disk's
    assert pod_id(environment, "") == f"made.pod_id ={own}\n"
    assert pod_id(b"A=1\0", "=podstate-f00") == "made.pod_id =podstate-f00\n"
    bad = b"".join(n.encode() + b"=a b\0" for n in names)  # names no record: the disk's
    assert pod_id(bad, "=podstate-f00") == "made.pod_id =podstate-f00\n"
    assert pod_id(b"A=1\0", "") == ""


def test_a_pod_without_an_id_that_names_a_record_gets_a_new_one():
    assert record_id.own_id(_found("k3x9q2mz8w1abc")) == "k3x9q2mz8w1abc"
    assert record_id.own_id(_found("C.38250/38250")) == "C.38250/38250"
    fresh = [record_id.own_id(_found(pod_id)) for pod_id in (None, "a b", ".x")]
    assert all(NEW_ID.fullmatch(i) for i in fresh) and len(set(fresh)) == 3


# --- end to end ---------------------------------------------------------------------------


def _record(fleet, pod: str, path: str) -> Record:
    record = made.parse_record(fleet.out(pod, f"cat {path}"))
    assert record.problem is None, record.problem
    return record


def _entry(fleet, pod: str, tmp_path: Path, env: dict | None = None) -> dict:
    out = tmp_path / "r.json"
    result = check(fleet, "--limit", pod, "--json", str(out), env=env)
    assert out.exists(), result.stdout + result.stderr
    return json.loads(out.read_text())["pods"][pod]


def _changes(entry: dict) -> list[str]:
    return [c["operation"] for c in entry["changes"]]


def _applied(fleet, pod: str, state: dict, env: dict | None = None) -> None:
    fleet.host_vars(pod, state)
    done = apply(fleet, "--limit", pod, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


def test_a_vast_instances_records_name_its_identity_and_what_it_made_goes(fleet, tmp_path):
    fleet.group_vars("all", BASE)
    ident = str(json.loads((fleet.state / "pods.json").read_text())["vast-1"]["pod_id"])
    identity = f"C.{ident}/{ident}"
    files = {"/workspace/vast/notes.txt": "on the volume\n", "/etc/vast-made.conf": "on disk\n"}
    _applied(fleet, "vast-1", {"files": {p: {"content": c} for p, c in files.items()}})

    disk = _record(fleet, "vast-1", made.MADE)
    volume = _record(fleet, "vast-1", f"{RECORDS}/C.{ident}+{ident}")
    assert (disk.pod, disk.pod_id) == (volume.pod, volume.pod_id) == ("vast-1", identity)
    assert "/etc/vast-made.conf" in disk.entries and "/workspace/vast/notes.txt" not in disk.entries
    assert volume.entries["/workspace/vast/notes.txt"].kind == "file"
    assert fleet.out("vast-1", f"ls -A {RECORDS}") == f"C.{ident}+{ident}\n"
    assert _entry(fleet, "vast-1", tmp_path)["status"] == "ok"

    fleet.host_vars("vast-1", {})
    entry = _entry(fleet, "vast-1", tmp_path)
    assert entry["status"] == "drift", entry
    for path in files:
        assert f"would remove: {path}" in _changes(entry)
    _applied(fleet, "vast-1", {})
    for path in [*files, "/workspace/vast"]:
        assert fleet.ssh("vast-1", f"test -e {path}").returncode == 1, path
    assert _entry(fleet, "vast-1", tmp_path)["status"] == "ok"


def test_a_vast_template_made_from_an_instance_takes_nothing_of_that_instances(fleet, tmp_path):
    # vast-2 runs a template made from vast-1's container disk: its record and what that
    # names, under vast-2's own VAST_CONTAINERLABEL and CONTAINER_ID
    fleet.group_vars("all", BASE)
    records = json.loads((fleet.state / "pods.json").read_text())
    ids = {p: f"C.{records[p]['pod_id']}/{records[p]['pod_id']}" for p in ("vast-1", "vast-2")}
    original = "/etc/vast-original.conf"
    _applied(fleet, "vast-1", {"files": {original: {"content": "vast-1's\n"}}})
    inside.pod_exec("vast-2", "touch ~/.no_auto_tmux")  # as the template has it, a copy too
    for path in (made.MADE, original):
        copied = fleet.out("vast-1", f"cat {path}").encode()
        fleet.out("vast-2", f"mkdir -p /etc/podstate && cat > {path}", copied)

    fleet.host_vars("vast-2", {"files": {"/etc/vast-clone.conf": {"content": "vast-2's\n"}}})
    changes = _changes(_entry(fleet, "vast-2", tmp_path))
    assert not [c for c in changes if original in c], changes
    assert [c for c in changes if c.startswith("would start this pod's own record")], changes
    _applied(fleet, "vast-2", {"files": {"/etc/vast-clone.conf": {"content": "vast-2's\n"}}})
    assert fleet.out("vast-2", f"cat {original}") == "vast-1's\n"
    disk = _record(fleet, "vast-2", made.MADE)
    assert (disk.pod, disk.pod_id) == ("vast-2", ids["vast-2"])
    assert original not in disk.entries and "/etc/vast-clone.conf" in disk.entries
    assert _entry(fleet, "vast-2", tmp_path)["status"] == "ok"
    assert _record(fleet, "vast-1", made.MADE).pod_id == ids["vast-1"]
    assert _entry(fleet, "vast-1", tmp_path)["status"] == "ok"


@pytest.fixture(scope="module")
def sharing(fleet, tmp_path_factory) -> dict:
    """pod-2 and pod-4 restarted without RUNPOD_POD_ID, pod-4's volume pod-2's directory;
    return the environment of a user whose pods come from the sandbox's RunPod API (which
    vouches for the host keys a restart makes)."""
    for pod in ("pod-2", "pod-4"):
        environment = pod_state_dir(fleet.state, pod) / "container.env"
        lines = environment.read_text().splitlines(keepends=True)
        environment.write_text("".join(line for line in lines if "RUNPOD_POD_ID=" not in line))
    workspace = pod_state_dir(fleet.state, "pod-4") / "workspace"
    workspace.rmdir()
    workspace.symlink_to(pod_state_dir(fleet.state, "pod-2") / "workspace")
    for pod in ("pod-2", "pod-4"):
        container.restart(pod)
    assert fleet.ssh("pod-2", "grep -qa RUNPOD_POD_ID= /proc/1/environ").returncode == 1
    fleet.out("pod-2", "touch /workspace/seen-by-both")
    assert fleet.out("pod-4", "ls /workspace") == "seen-by-both\n"
    fleet.out("pod-2", "rm /workspace/seen-by-both")
    return fleet.api_env(tmp_path_factory.mktemp("hostkeys"))


def _id(fleet, pod: str) -> str:
    """Return the id the pod's container disk's record names: one podstate made."""
    pod_id = _record(fleet, pod, made.MADE).pod_id
    assert pod_id is not None and NEW_ID.fullmatch(pod_id), pod_id
    return pod_id


def test_pods_without_an_id_sharing_a_volume_keep_their_records_apart(fleet, sharing, tmp_path):
    fleet.group_vars("all", BASE)
    state = {"files": {SHARED: {"content": "both\n"}, "/etc/own.conf": {"content": "own\n"}}}
    fleet.host_vars("pod-2", state)
    assert _entry(fleet, "pod-2", tmp_path, sharing)["status"] == "drift"
    assert fleet.ssh("pod-2", f"test -e {made.MADE}").returncode == 1  # a check writes nothing
    for pod in ("pod-2", "pod-4"):
        _applied(fleet, pod, state, sharing)
    ids = {pod: _id(fleet, pod) for pod in ("pod-2", "pod-4")}
    assert ids["pod-2"] != ids["pod-4"]
    for pod, pod_id in ids.items():
        assert SHARED not in _record(fleet, pod, made.MADE).entries
        assert "/etc/own.conf" in _record(fleet, pod, made.MADE).entries
        volume = _record(fleet, pod, f"{RECORDS}/{pod_id}")
        assert (volume.pod, volume.pod_id) == (pod, pod_id) and SHARED in volume.entries
    assert sorted(fleet.out("pod-2", f"ls -A {RECORDS}").split()) == sorted(ids.values())
    for pod in ("pod-2", "pod-4"):  # the id stays what was written
        _applied(fleet, pod, state, sharing)
        assert _id(fleet, pod) == ids[pod]
        assert _entry(fleet, pod, tmp_path, sharing)["status"] == "ok"

    # pod-4 found the file pod-2 made (it held the declared content): pod-2 would not remove
    # it while pod-4's record names it, and pod-4 forgets it without a word; it stays
    assert _record(fleet, "pod-4", f"{RECORDS}/{ids['pod-4']}").entries[SHARED].kind == "found"
    fleet.host_vars("pod-2", {"files": {"/etc/own.conf": state["files"]["/etc/own.conf"]}})
    assert (
        f"would forget: {SHARED} is in another pod's record on the volume too (a pod sharing "
        "it made it as well): left as it is"
    ) in _changes(_entry(fleet, "pod-2", tmp_path, sharing))
    fleet.host_vars("pod-2", state)
    fleet.host_vars("pod-4", {"files": {"/etc/own.conf": state["files"]["/etc/own.conf"]}})
    changes = _changes(_entry(fleet, "pod-4", tmp_path, sharing))
    assert not [c for c in changes if SHARED in c]
    _applied(fleet, "pod-4", {"files": {"/etc/own.conf": {"content": "own\n"}}}, sharing)
    assert fleet.out("pod-4", f"cat {SHARED}") == "both\n"
    assert SHARED not in _record(fleet, "pod-4", f"{RECORDS}/{ids['pod-4']}").entries
    assert SHARED in _record(fleet, "pod-2", f"{RECORDS}/{ids['pod-2']}").entries
    assert _entry(fleet, "pod-4", tmp_path, sharing)["status"] == "ok"

    # uninstall on pod-4 takes its own record and leaves pod-2's
    done = run(fleet, [str(BIN / "podstate"), "uninstall", "--limit", "pod-4"], env=sharing)
    assert done.returncode == 0, done.stdout + done.stderr
    assert fleet.out("pod-2", f"ls -A {RECORDS}") == f"{ids['pod-2']}\n"
    assert fleet.ssh("pod-4", "test -e /etc/own.conf").returncode == 1
    assert fleet.out("pod-2", f"cat {SHARED}") == "both\n"

    # now that no other record names it, pod-2 removes it when it leaves its desired state
    fleet.host_vars("pod-2", {})
    changes = _changes(_entry(fleet, "pod-2", tmp_path, sharing))
    assert f"would remove: {SHARED}" in changes and "would remove: /etc/own.conf" in changes
    _applied(fleet, "pod-2", {}, sharing)
    assert fleet.ssh("pod-2", "test -e /workspace/shared").returncode == 1
    assert _id(fleet, "pod-2") == ids["pod-2"]


def test_a_record_an_earlier_podstate_wrote_without_an_id_is_adopted(fleet, sharing, tmp_path):
    # pod-4 after its uninstall (above), with what an earlier podstate recorded on a pod
    # without an id: everything in the container disk's record, which names no id
    fleet.group_vars("all", BASE)
    kept, gone = "/workspace/old/kept.txt", "/workspace/old/gone.txt"
    for path in (kept, gone):
        fleet.out("pod-4", f"mkdir -p /workspace/old && echo old > {path}")
    entries = [line_entry("file", p, made.sums("old\n")) for p in (kept, gone)]
    fleet.out("pod-4", f"mkdir -p /etc/podstate && cat > {made.MADE}",
              made.render("pod-4", None, entries).encode())  # fmt: skip
    state = {"files": {kept: {"content": "old\n"}}}
    fleet.host_vars("pod-4", state)
    assert f"would remove: {gone}" in _changes(_entry(fleet, "pod-4", tmp_path, sharing))

    _applied(fleet, "pod-4", state, sharing)
    pod_id = _id(fleet, "pod-4")
    assert fleet.ssh("pod-4", f"test -e {gone}").returncode == 1
    assert not [p for p in _record(fleet, "pod-4", made.MADE).entries if p.startswith("/workspace")]
    on_volume = _record(fleet, "pod-4", f"{RECORDS}/{pod_id}").entries
    assert kept in on_volume and gone not in on_volume
    _applied(fleet, "pod-4", state, sharing)
    assert _id(fleet, "pod-4") == pod_id
    assert _entry(fleet, "pod-4", tmp_path, sharing)["status"] == "ok"


@pytest.fixture(scope="module")
def baked(fleet, tmp_path_factory) -> dict:
    """pod-3's volume made pod-1's (an image baked from pod-1 run beside it, on the same
    network volume); return the environment of a user whose pods come from the sandbox's
    RunPod API (which vouches for the host keys pod-3's restart makes)."""
    settings = pod_state_dir(fleet.state, "pod-3") / "pod.env"  # both on network volumes
    lines = settings.read_text().splitlines(keepends=True)
    volume = shlex.quote(str(fleet.state / "storage" / "pod-1"))
    settings.write_text("".join(
        f"STORAGE_DIR={volume}\n" if line.startswith("STORAGE_DIR=") else line for line in lines
    ))  # fmt: skip
    container.restart("pod-3")
    fleet.out("pod-1", "echo pod-1 > /workspace/seen-by-both")
    assert fleet.out("pod-3", "cat /workspace/seen-by-both") == "pod-1\n"
    fleet.out("pod-1", "rm /workspace/seen-by-both")
    return fleet.api_env(tmp_path_factory.mktemp("hostkeys"))


def test_a_container_disk_copied_from_another_pod_takes_nothing_of_that_pods(
    fleet, baked, tmp_path
):
    # pod-1 configured; pod-3 then runs an image baked from pod-1's container disk: its
    # record and what that names, under pod-3's own RUNPOD_POD_ID, on pod-1's volume
    fleet.group_vars("all", BASE)
    ids = {p: r["pod_id"] for p, r in json.loads((fleet.state / "pods.json").read_text()).items()}
    original = {"/etc/original.conf": "pod-1's\n", "/workspace/original/data.txt": "pod-1's\n"}
    _applied(fleet, "pod-1", {"files": {p: {"content": c} for p, c in original.items()}}, baked)
    on_volume = fleet.out("pod-1", f"cat {RECORDS}/{ids['pod-1']}")
    for path in (made.MADE, "/etc/original.conf"):
        fleet.out(
            "pod-3",
            f"mkdir -p /etc/podstate && cat > {path}",
            fleet.out("pod-1", f"cat {path}").encode(),
        )
    assert _record(fleet, "pod-3", made.MADE).pod_id == ids["pod-1"]

    # uninstall on the clone takes away the copied record, and nothing it names
    uninstall = [str(BIN / "podstate"), "uninstall", "--limit", "pod-3"]
    done = run(fleet, [*uninstall, "--dry-run"], env=baked)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"names pod id {ids['pod-1']}, not this pod's ({ids['pod-3']}" in done.stdout
    assert "original" not in done.stdout
    done = run(fleet, uninstall, env=baked)
    assert done.returncode == 0, done.stdout + done.stderr
    assert fleet.out("pod-3", "cat /etc/original.conf") == "pod-1's\n"
    assert fleet.ssh("pod-3", f"test -e {made.MADE}").returncode == 1
    assert fleet.out("pod-1", "cat /workspace/original/data.txt") == "pod-1's\n"
    copied = fleet.out("pod-1", f"cat {made.MADE}").encode()
    fleet.out("pod-3", f"mkdir -p /etc/podstate && cat > {made.MADE}", copied)

    clone = {"files": {"/etc/clone.conf": {"content": "pod-3's\n"},
                       "/workspace/clone/data.txt": {"content": "pod-3's\n"}}}  # fmt: skip
    fleet.host_vars("pod-3", clone)
    entry = _entry(fleet, "pod-3", tmp_path, baked)
    assert entry["status"] == "drift", entry
    changes = _changes(entry)
    assert not [c for c in changes if "original" in c and "would remove" in c], changes
    started = [c for c in changes if c.startswith("would start this pod's own record")]
    assert started and f"names pod id {ids['pod-1']}, not this pod's ({ids['pod-3']}" in started[0]
    _applied(fleet, "pod-3", clone, baked)

    for pod in ("pod-1", "pod-3"):
        for path, content in original.items():
            if pod == "pod-1" or path.startswith("/etc"):
                assert fleet.out(pod, f"cat {path}") == content, (pod, path)
    records = fleet.state / "storage" / "pod-1" / RECORDS.removeprefix("/workspace/")
    assert (records / ids["pod-1"]).read_text() == on_volume
    disk = _record(fleet, "pod-3", made.MADE)
    assert (disk.pod, disk.pod_id) == ("pod-3", ids["pod-3"])
    assert "/etc/clone.conf" in disk.entries and "/etc/original.conf" not in disk.entries
    own = _record(fleet, "pod-3", f"{RECORDS}/{ids['pod-3']}")
    assert {"/workspace/clone", "/workspace/clone/data.txt"} <= set(own.entries)
    assert not [path for path in own.entries if "original" in path]
    assert _entry(fleet, "pod-3", tmp_path, baked)["status"] == "ok"
    assert _entry(fleet, "pod-1", tmp_path, baked)["status"] == "ok"

    # the clone's uninstall takes its own things, and nothing of pod-1's
    done = run(fleet, [str(BIN / "podstate"), "uninstall", "--limit", "pod-3"], env=baked)
    assert done.returncode == 0, done.stdout + done.stderr
    for path in ("/etc/clone.conf", "/workspace/clone"):
        assert fleet.ssh("pod-3", f"test -e {path}").returncode == 1, path
    assert fleet.out("pod-3", "cat /etc/original.conf") == "pod-1's\n"
    assert fleet.out("pod-1", "cat /workspace/original/data.txt") == "pod-1's\n"
    assert sorted(p.name for p in records.iterdir()) == [ids["pod-1"]]
    entry = _entry(fleet, "pod-1", tmp_path, baked)
    assert entry["status"] == "ok", entry["error"][:600]
