"""End to end: the ``packages.apt``, ``files`` and ``authorized_keys`` keys on sandbox pods.

Packages come from a local apt repository that the test builds (tests/apt_repo.py), so the
tests run offline. Each key gets a first apply, a quiet second run, drift after a hand edit on
one pod (reported by ``podstate check`` for that pod alone), and its failure cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from podstate.desired.errors import Layer, SpecError
from podstate.desired.spec import resolve
from podstate.sandbox import ssh
from tests.apt_repo import build_deb, serve
from tests.e2e import apply, check, exec_count

SANDBOX = {"pods": 3}
PACKAGE = "podstate-hello"
LATE = "podstate-late"  # in the repository, listed only by the lock tests
GITCONFIG = "/root/.gitconfig"
ACCELERATE = "/root/.config/accelerate/default_config.yaml"
ON_VOLUME = "/workspace/team/notes.txt"  # pod-1's /workspace is a network volume (sshfs)
KEYS = "~/.ssh/authorized_keys"
BEGIN = "# >>> podstate authorized_keys >>>"


def keygen(directory: Path, name: str) -> tuple[Path, str]:
    """Return a new ed25519 key's private file and its public line (comment ``name``)."""
    path = directory / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True
    )
    return path, Path(f"{path}.pub").read_text().strip()


def set_vars(fleet, extra: dict) -> None:
    """Add ``extra`` to the fleet's group_vars/all.yaml."""
    fleet.group_vars("all", extra, merge=True)


def login(fleet, pod: str, key: Path) -> subprocess.CompletedProcess:
    """Return ``ssh -i key pod true``: whether ``key`` may log in."""
    argv = ssh.ssh_command(pod, fleet.state)
    argv[argv.index("-i") + 1] = str(key)
    return subprocess.run([*argv, "true"], capture_output=True, text=True, timeout=30)


def report(fleet, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Return ``podstate check --json`` (with ``args``) and its parsed report."""
    path = tmp_path / "report.json"
    result = check(fleet, "--json", str(path), *args)
    return result, json.loads(path.read_text())


@pytest.fixture(scope="module")
def setup(fleet, tmp_path_factory):
    """The fleet with every pod's apt sources set to the local repository, and the keys in
    group_vars: one package to install and one already there, two files (one from ``src``),
    a file on the network volume, and alice's key."""
    work = tmp_path_factory.mktemp("apt")
    debs = [build_deb(work, PACKAGE), build_deb(work, LATE)]
    for pod in fleet.pods:
        serve(fleet, pod, debs)
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    (fleet.vars_dir / "files").mkdir()
    (fleet.vars_dir / "files" / "gitconfig").write_text("[user]\n\tname = Pod\n")
    alice, alice_pub = keygen(tmp_path_factory.mktemp("keys"), "alice@example.com")
    set_vars(
        fleet,
        {
            "packages": {"apt": [PACKAGE, "bash"]},
            "files": {
                GITCONFIG: {"src": "files/gitconfig"},
                ACCELERATE: {"content": "compute_environment: LOCAL_MACHINE\n", "mode": "0600"},
                ON_VOLUME: {"content": "shared notes\n"},
            },
            "authorized_keys": [alice_pub],
        },
    )
    before = {pod: fleet.out(pod, f"cat {KEYS}") for pod in fleet.pods}
    return fleet, alice, alice_pub, before


@pytest.fixture(scope="module")
def applied(setup):
    fleet, *_ = setup
    first = apply(fleet)
    assert first.returncode == 0, first.stderr
    counts = {pod: exec_count(fleet, pod) for pod in fleet.pods}
    second = apply(fleet)
    quiet = {pod: exec_count(fleet, pod) - counts[pod] for pod in fleet.pods}
    return setup, first, second, quiet


# --- first apply, quiet second run ---------------------------------------------------------


def test_listed_package_is_installed_on_every_pod(applied):
    (fleet, *_), *_ = applied
    for pod in fleet.pods:
        status = fleet.out(pod, f"dpkg-query -W -f '${{Status}}' {PACKAGE}")
        assert status.endswith("install ok installed"), (pod, status)
        assert fleet.out(pod, f"cat /usr/share/{PACKAGE}/hello") == f"{PACKAGE} 1.0\n"


def test_files_hold_their_content_and_mode(applied):
    (fleet, *_), *_ = applied
    for pod in fleet.pods:
        assert fleet.out(pod, f"cat {GITCONFIG}") == "[user]\n\tname = Pod\n"
        assert fleet.out(pod, f"stat -c %a {GITCONFIG}").strip() == "644"
        assert fleet.out(pod, f"cat {ACCELERATE}") == "compute_environment: LOCAL_MACHINE\n"
        assert fleet.out(pod, f"stat -c %a {ACCELERATE}").strip() == "600"


def test_a_file_on_the_network_volume_is_written(applied):
    (fleet, *_), *_ = applied
    assert fleet.out("pod-1", "findmnt -n -o FSTYPE /workspace").strip().startswith("fuse")
    assert fleet.out("pod-1", f"cat {ON_VOLUME}") == "shared notes\n"


def test_listed_key_logs_in_and_the_keys_before_it_are_kept(applied):
    (fleet, alice, alice_pub, before), *_ = applied
    for pod in fleet.pods:
        text = fleet.out(pod, f"cat {KEYS}")
        assert text.startswith(before[pod])
        assert text.count(alice_pub) == 1 and text.count(BEGIN) == 1
        assert fleet.out(pod, f"stat -c %a {KEYS}").strip() == "600"
        assert login(fleet, pod, alice).returncode == 0


def test_second_run_changes_nothing_and_costs_the_probe(applied):
    _, _, second, quiet = applied
    assert second.returncode == 0, second.stderr
    assert second.hosts("success") == set()
    assert quiet == {pod: 1 for pod in quiet}


# --- drift after a hand edit on one pod ----------------------------------------------------


@pytest.fixture(scope="module")
def drifted(applied, tmp_path_factory):
    """pod-2 edited by hand: the package removed, .gitconfig changed, alice's key taken out
    of podstate's block; then checked with --diff."""
    (fleet, alice, alice_pub, _), *_ = applied
    fleet.out("pod-2", f"dpkg -r {PACKAGE}")
    fleet.out("pod-2", f"echo '[core]' >> {GITCONFIG}")
    fleet.out("pod-2", f"sed -i '/alice@example.com/d' {KEYS}")
    result, data = report(fleet, tmp_path_factory.mktemp("drift"), "--diff")
    return fleet, result, data


def changes(data: dict, pod: str) -> dict[str, dict]:
    return {c["operation"]: c for c in data["pods"][pod]["changes"]}


def test_drift_is_reported_for_the_edited_pod_alone(drifted):
    _, result, data = drifted
    assert result.returncode == 2, result.stdout + result.stderr
    assert {n: p["status"] for n, p in data["pods"].items()} == {
        "pod-1": "ok",
        "pod-2": "drift",
        "pod-3": "ok",
    }


def test_a_removed_package_is_drift_named_by_the_package(drifted):
    _, result, data = drifted
    assert changes(data, "pod-2")[f"Install {PACKAGE}"]["role"] == "Packages"
    assert f"Packages | Install {PACKAGE}" in result.stdout


def test_an_edited_file_is_drift_with_its_diff(drifted):
    _, _, data = drifted
    diff = changes(data, "pod-2")[f"File {GITCONFIG}"]["diff"]
    assert "-[core]" in diff


def test_a_key_taken_out_of_the_block_is_drift(drifted):
    _, _, data = drifted
    diff = changes(data, "pod-2")[f"Keys in {KEYS}"]["diff"]
    assert "+ssh-ed25519 " in diff and "alice@example.com" in diff


def test_apply_restores_the_edited_pod(drifted, tmp_path):
    fleet, *_ = drifted
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    assert run.hosts("success") >= {"pod-2"}
    assert fleet.ssh("pod-2", f"test -f /usr/share/{PACKAGE}/hello").returncode == 0
    result, data = report(fleet, tmp_path)
    assert result.returncode == 0, result.stdout


# --- authorized_keys: a key removed from the list, keys outside the block --------------------


def test_a_key_removed_from_the_list_leaves_the_block_and_others_stay(drifted, tmp_path):
    fleet, *_ = drifted
    _, bob_pub = keygen(tmp_path, "bob@example.com")
    fleet.out("pod-3", f"echo '{bob_pub}' >> {KEYS}")  # by hand, outside the block
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}, "authorized_keys": []})
    try:
        run = apply(fleet, "--limit", "pod-3")
        assert run.returncode == 0, run.stderr
        text = fleet.out("pod-3", f"cat {KEYS}")
        assert "alice@example.com" not in text and BEGIN not in text
        assert bob_pub in text
        assert ssh.ssh("pod-3", "true").returncode == 0  # podstate's own key still works
    finally:
        fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    again = apply(fleet, "--limit", "pod-3")
    assert again.returncode == 0, again.stderr
    assert bob_pub in fleet.out("pod-3", f"cat {KEYS}")


# --- failure cases ---------------------------------------------------------------------------


def test_an_unknown_package_fails_that_pod_with_one_line_and_installs_nothing(drifted):
    fleet, *_ = drifted
    fleet.host_vars("pod-1", {"packages": {"apt": [LATE, "nosuch-pkg"]}})
    try:
        run = apply(fleet)
    finally:
        fleet.host_vars("pod-1", None)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.hosts("error") == {"pod-1"}
    lines = [line for line in run.stderr.splitlines() if "[pod-1] podstate: " in line]
    assert len(lines) == 1, run.stderr
    assert "unknown package nosuch-pkg" in lines[0]
    assert fleet.ssh("pod-1", f"dpkg-query -W {LATE}").returncode != 0


def test_a_pod_without_apt_get_is_a_violation_and_nothing_is_tried(drifted):
    fleet, *_ = drifted
    fleet.host_vars("pod-2", {"packages": {"apt": [LATE]}})
    fleet.out("pod-2", "mv /usr/bin/apt-get /usr/bin/apt-get.hidden")
    try:
        run = apply(fleet)
    finally:
        fleet.out("pod-2", "mv /usr/bin/apt-get.hidden /usr/bin/apt-get")
        fleet.host_vars("pod-2", None)
    assert run.hosts("error") == {"pod-2"} and "Traceback" not in run.stderr
    assert (
        f"packages.apt: this pod has no apt-get (not a Debian or Ubuntu image), so podstate "
        f"cannot install {LATE}"
    ) in run.stderr
    assert fleet.ssh("pod-2", f"dpkg-query -W {LATE}").returncode != 0


def test_a_held_dpkg_lock_is_waited_for_then_fails_the_pod_past_the_bound(drifted, monkeypatch):
    fleet, *_ = drifted
    monkeypatch.setenv("PODSTATE_APT_LOCK_WAIT", "2")
    fleet.host_vars("pod-1", {"packages": {"apt": [LATE]}})
    holder = hold_dpkg_lock(fleet, "pod-1")
    try:
        started = time.monotonic()
        run = apply(fleet, "--limit", "pod-1")
        took = time.monotonic() - started
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        fleet.host_vars("pod-1", None)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "another apt or dpkg held its lock for 2 s" in run.stderr
    assert "/var/lib/dpkg/lock-frontend" in run.stderr
    assert took >= 2
    assert fleet.ssh("pod-1", f"dpkg-query -W {LATE}").returncode != 0


def test_apply_goes_on_once_the_other_apt_lets_go_of_the_lock(drifted):
    fleet, *_ = drifted
    fleet.host_vars("pod-1", {"packages": {"apt": [LATE]}})
    holder = hold_dpkg_lock(fleet, "pod-1")
    try:
        background = start(fleet, "--limit", "pod-1")
        wait_for_waiting_apt(background)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    try:
        out, err = background.communicate(timeout=120)
    finally:
        fleet.host_vars("pod-1", None)
    assert background.returncode == 0, out + err
    assert fleet.out("pod-1", f"cat /usr/share/{LATE}/hello") == f"{LATE} 1.0\n"


def hold_dpkg_lock(fleet, pod: str) -> subprocess.Popen:
    """Return a process on ``pod`` that holds dpkg's frontend lock, as a running apt does,
    until its stdin is closed; returns once the lock is held."""
    holder = subprocess.Popen(
        [
            *ssh.ssh_command(pod, fleet.state),
            'exec python3 -c \'import fcntl, sys; f = open("/var/lib/dpkg/lock-frontend", "w");'
            ' fcntl.lockf(f, fcntl.LOCK_EX); print("held", flush=True); sys.stdin.read()\'',
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def start(fleet, *args: str) -> subprocess.Popen:
    """Start ``pyinfra -y inventories/pods.py deploy/*.py`` in the background."""
    from tests.e2e import BIN, ROOT

    deploys = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "deploy").glob("*.py"))
    return subprocess.Popen(
        [str(BIN / "pyinfra"), "-y", *args, "inventories/pods.py", *deploys],
        cwd=ROOT,
        env=fleet.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def wait_for_waiting_apt(run: subprocess.Popen, limit: float = 60) -> None:
    """Return once podstate's apt script has found the lock held and waits (a ``sleep`` it
    started), seen in /proc (sandbox pods share the host's process ids)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        assert run.poll() is None, "apply ended before it waited for the lock"
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
                parent_argv = Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0")
            except (OSError, IndexError):
                continue
            if argv[0] == b"sleep" and b"apt_install" in parent_argv:
                return
        time.sleep(0.05)  # polling /proc for the event, not waiting for time to pass
    raise AssertionError("podstate's apt never waited for the lock")


def test_a_missing_src_stops_the_run_before_contact(drifted):
    fleet, *_ = drifted
    before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
    fleet.host_vars("pod-2", {"files": {"/root/x.conf": {"src": "files/nope.conf"}}})
    try:
        run = apply(fleet)
    finally:
        fleet.host_vars("pod-2", None)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "files: /root/x.conf: cannot read src files/nope.conf" in run.stderr
    assert {pod: exec_count(fleet, pod) for pod in fleet.pods} == before


def test_a_directory_at_a_file_path_is_a_violation_and_untouched(drifted):
    fleet, *_ = drifted
    fleet.out("pod-2", "mkdir -p /root/conf.d/keep")
    fleet.host_vars("pod-2", {"files": {"/root/conf.d": {"content": "x\n"}}})
    try:
        run = apply(fleet, "--limit", "pod-2")
    finally:
        fleet.host_vars("pod-2", None)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "files./root/conf.d: /root/conf.d is a directory" in run.stderr
    assert fleet.out("pod-2", "ls -A /root/conf.d") == "keep\n"


def test_an_invalid_key_line_stops_the_run_before_contact(drifted):
    fleet, *_ = drifted
    before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
    fleet.host_vars("pod-2", {"authorized_keys": ["ssh-foo AAAAB3 bob"]})
    try:
        run = apply(fleet)
    finally:
        fleet.host_vars("pod-2", None)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "authorized_keys.0: 'ssh-foo AAAAB3 bob' is not an authorized key line" in run.stderr
    assert {pod: exec_count(fleet, pod) for pod in fleet.pods} == before


def test_keys_that_would_make_the_file_too_large_are_a_violation_and_untouched(drifted):
    """Lines of the user's own fill ~/.ssh/authorized_keys to just under 64K, the most
    podstate writes in one command: adding the missing key would take it past, so nothing
    is written, and the pod fails with one line, not with an exec error."""
    fleet, *_ = drifted
    from podstate.limits import MAX_FILE

    fleet.out("pod-2", f"cp {KEYS} /root/keys.bak && sed -i '/alice@example.com/d' {KEYS}")
    size = int(fleet.out("pod-2", f"wc -c < {KEYS}"))
    lines, rest = divmod(MAX_FILE - 20 - size, 64)
    padding = "# " + "x" * 61 + "\n"
    fleet.out("pod-2", f"cat >> {KEYS}", (padding * lines + "#" * (rest - 1) + "\n").encode())
    before = fleet.out("pod-2", f"sha256sum {KEYS}")
    try:
        run = apply(fleet, "--limit", "pod-2")
        after = fleet.out("pod-2", f"sha256sum {KEYS}")
    finally:
        fleet.out("pod-2", f"mv -f /root/keys.bak {KEYS}")
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert (
        f"violation: authorized_keys: {KEYS} would be 64.1K with podstate's block, more than "
        "the 64K podstate writes in one command"
    ) in run.stderr
    assert after == before


# --- the desired state, without pods -------------------------------------------------------

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGmYcG6NWlP6zxDiXGHDwC4whjAQALSZ3F6gIKZEhofW a@b"


def resolved(data: dict, root: Path | None = None) -> dict:
    return resolve([Layer("host_vars/p.yaml", data, root)], "p")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"packages": {"apt": ["tmux", "Bad_Name"]}}, "packages.apt.1: 'Bad_Name' is not a Deb"),
        ({"packages": {"apt": ["tmux=1.0"]}}, "no version or option"),
        (
            {"packages": {"yum": ["tmux"]}},
            "packages.yum: unknown key (allowed: apt, remove_undeclared)",
        ),
        ({"authorized_keys": ["AAAAC3Nz a@b"]}, "authorized_keys.0: 'AAAAC3Nz a@b' is not an"),
        ({"authorized_keys": ['from="x" ' + ED25519]}, "options such as from= are not"),
        ({"authorized_keys": [ED25519.replace("ed25519", "rsa", 1)]}, "says ssh-rsa but holds"),
        ({"authorized_keys": ["ssh-ed25519 AAAAC3Nz!x"]}, "authorized_keys.0: "),
        ({"files": {"rel/x": {"content": "x"}}}, "files: 'rel/x' must be an absolute path"),
        ({"files": {"/x": {"content": "x", "src": "y"}}}, "files: /x: give either content or"),
        ({"files": {"/x": {"mode": "644"}}}, "files: /x: give either content or src"),
        ({"files": {"/x": {"content": "x", "mode": "rw"}}}, "files./x.mode: 'rw' is not an oct"),
        ({"files": {"/x": {"content": "x" * 70000}}}, "files: /x: 70000 bytes, more than"),
        ({"files": {"/etc/profile.d/podstate.sh": {"content": "x"}}}, "environment hook"),
    ],
)
def test_invalid_keys_are_one_line_errors(data, expected):
    with pytest.raises(SpecError) as error:
        resolved(data)
    assert expected in str(error.value) and "\n" not in str(error.value)
    assert str(error.value).startswith("host_vars/p.yaml: ")


def test_keys_are_normalized(tmp_path):
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "a.bin").write_bytes(b"\xff\x00raw")
    state = resolved(
        {
            "packages": {"apt": ["tmux", "nvtop", "tmux"]},
            "files": {"/etc//a": {"src": "files/a.bin", "mode": "0600"}, "/b": {"content": ""}},
            "authorized_keys": [ED25519.replace(" ", "   "), ED25519],
        },
        tmp_path,
    )
    assert state["packages"] == {"apt": ["tmux", "nvtop"]}
    assert state["files"]["/etc/a"]["mode"] == "600" and state["files"]["/b"]["mode"] == "644"
    assert state["files"]["/etc/a"]["content"].encode("utf-8", "surrogateescape") == b"\xff\x00raw"
    assert state["authorized_keys"] == [ED25519]
