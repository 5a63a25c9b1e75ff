"""The boot hook's functions (scripts/boot.sh), each run alone under dash, bash and busybox
sh on a temporary tree that stands for the pod's filesystem and its /proc: no pod, no root.

The hook is sourced with PODSTATE_BOOT_PART=functions, which defines its functions and runs
nothing; its paths (data_dir, etc_dir, work_dir, proc_dir, ssh_dir, shm_dir) are then
pointed at the tree. The data files are written by podstate.operations.boot, as an apply
writes them.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from podstate.operations.boot import file_entry, render_state
from tests.shell_change import SCRIPTS, Ran, fake_command, proc_tree, run, stat_line

BOOT_ID = "0f6c9d1e-2b3a-4c5d-8e7f-0123456789ab"
POD_ID = "abc123xyz"
TOPOLOGY = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class Pod:
    """A temporary tree standing for a pod: its volume's hook data, its container disk's
    /etc, its /proc and root's home."""

    root: Path

    @property
    def data(self) -> Path:
        return self.root / "workspace" / ".podstate" / "boot"

    @property
    def etc(self) -> Path:
        return self.root / "etc" / "podstate"

    @property
    def work(self) -> Path:
        return self.etc / ".boot"

    @property
    def home(self) -> Path:
        return self.root / "root"

    def status(self) -> list[str]:
        """Return the lines the functions noted in the status."""
        return (self.work / "status").read_text().splitlines()

    def run(self, shell: str, call: str, env: dict[str, str] | None = None) -> Ran:
        """Return what ``call`` did after the hook's functions were sourced under ``shell``
        and pointed at this tree."""
        text = (
            f". {SCRIPTS / 'boot.sh'}\n"
            f"data_dir={self.data} data_file={self.data}/state etc_dir={self.etc}\n"
            f"work_dir={self.work} proc_dir={self.root}/proc ssh_dir={self.root}/etc/ssh\n"
            f"shm_dir={self.root}/shm\n{call}"
        )
        own = {"PODSTATE_BOOT_PART": "functions", "HOME": str(self.home)}
        return run(shell, text, own | (env or {}))


@pytest.fixture
def pod(tmp_path: Path) -> Pod:
    made = Pod(tmp_path)
    for path in (made.data, made.work, made.home, tmp_path / "shm"):
        path.mkdir(parents=True)
    (made.work / "status").write_text("")
    proc_tree(tmp_path / "proc", BOOT_ID, stat_line("my init) (x", 4242), {"RUNPOD_POD_ID": POD_ID})
    return made


def nvidia_smi(tmp_path: Path, fixture: str) -> dict[str, str]:
    """Return the environment in which ``nvidia-smi topo -m`` prints the topology ``fixture``."""
    bin_dir = fake_command(tmp_path / "bin", "nvidia-smi", (TOPOLOGY / fixture).read_text())
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


MARKS = f"{b64('# >>> p')} {b64('# <<< p')}"


def test_sourcing_the_functions_runs_nothing(shell: str, pod: Pod) -> None:
    done = pod.run(shell, "command -v restore >/dev/null && echo defined")
    assert (done.code, done.out, done.err) == (0, "defined\n", "")
    assert pod.status() == []


def test_shift_word_takes_the_first_word_and_keeps_the_paths_spaces(shell: str, pod: Pod) -> None:
    call = 'rest="0755 /a b/c"; shift_word; echo "$word|$rest"; shift_word; echo "$word|$rest"'
    assert pod.run(shell, call).out == "0755|/a b/c\n/a|b/c\n"


def test_home_reads_a_leading_tilde_as_home(shell: str, pod: Pod) -> None:
    done = pod.run(shell, 'home "~/.bashrc"; home "/etc/x y"; home "a~/b"')
    assert done.out == f"{pod.home}/.bashrc\n/etc/x y\na~/b\n"


@pytest.mark.parametrize(
    "fixture,seen",
    [
        ("topo-1x.txt", "1 other"),
        ("topo-2x-pcie.txt", "2 other"),
        ("topo-4x-mixed.txt", "4 other"),
        ("topo-8x-nvlink-nics.txt", "8 nvlink"),
    ],
)
def test_topology_counts_the_gpus_and_needs_nvlink_on_every_pair(
    shell: str, pod: Pod, fixture: str, seen: str
) -> None:
    done = pod.run(shell, f"topology <{TOPOLOGY / fixture}")
    assert done.out == seen + "\n"


def test_gpus_as_written_pend_nothing(shell: str, pod: Pod, tmp_path: Path) -> None:
    env = nvidia_smi(tmp_path, "topo-2x-pcie.txt")
    done = pod.run(shell, 'gpus 2 other; echo "$? ${gpus_differ:-same} ${blocked:-open}"', env)
    assert done.out == "0 same open\n"
    assert pod.status() == []


def test_other_gpus_pend_the_marker_and_choose_the_safe_renderings(
    shell: str, pod: Pod, tmp_path: Path
) -> None:
    env = nvidia_smi(tmp_path, "topo-4x-mixed.txt")
    done = pod.run(shell, 'gpus 8 nvlink; echo "$gpus_differ $blocked"', env)
    assert done.out == "1 1\n"
    assert pod.status() == [
        "pending gpus: the data was written for 8 GPUs (nvlink), and this container has 4 GPUs"
        " (other): the NCCL guards are at their safe values until the next apply"
    ]


def test_directory_is_made_with_its_mode_or_left_its_own(shell: str, pod: Pod) -> None:
    made, kept = pod.root / "d" / "e", pod.root / "k"
    assert pod.run(shell, f"directory 0700 {made}; directory - {kept}").code == 0
    assert (made.stat().st_mode & 0o777, kept.is_dir()) == (0o700, True)
    assert pod.status() == [f"restored directory {made}", f"restored directory {kept}"]


def test_a_scratch_directory_gets_its_mode(shell: str, pod: Pod) -> None:
    path = pod.root / "scratch"
    pod.run(shell, f"scratch dir 1024 1777 {path}")
    assert path.stat().st_mode & 0o7777 == 0o1777
    assert pod.status() == [f"restored scratch {path}"]


def test_no_tmpfs_is_mounted_over_files_a_scratch_path_holds(shell: str, pod: Pod) -> None:
    path = pod.root / "scratch"
    path.mkdir()
    (path / "baked").write_text("image\n")
    done = pod.run(shell, f'scratch tmpfs 1024 1777 {path}; echo "$blocked"')
    assert done.out == "1\n"
    said = f"error scratch {path}: holds files (among them baked): no tmpfs over them"
    assert pod.status() == [said]
    assert (path / "baked").read_text() == "image\n"


def test_shm_big_enough_is_left_alone(shell: str, pod: Pod) -> None:
    done = pod.run(shell, 'shm 1; echo "$?"')
    assert done.out == "0\n"
    assert pod.status() == []


def test_owned_writes_the_file_with_its_mode_under_home(shell: str, pod: Pod) -> None:
    data = b64("secret-ish\n")
    done = pod.run(shell, f'owned 0600 "~/.config/x/token" {data}')
    target = pod.home / ".config" / "x" / "token"
    assert (done.code, target.read_text()) == (0, "secret-ish\n")
    assert target.stat().st_mode & 0o777 == 0o600
    assert pod.status() == [f"restored file {target}"]
    assert not target.with_name("token.podstate-boot").exists()


def test_owned_leaves_a_symbolic_link_alone(shell: str, pod: Pod) -> None:
    target = pod.root / "link"
    target.symlink_to(pod.root / "elsewhere")
    pod.run(shell, f"owned 0644 {target} {b64('x')}; echo $blocked")
    assert not (pod.root / "elsewhere").exists()
    assert pod.status() == [f"error file {target}: something else is there; left as it is"]


def test_put_keeps_an_existing_files_mode(shell: str, pod: Pod) -> None:
    old, new = pod.root / "old", pod.root / "new"
    old.write_text("old\n")
    old.chmod(0o640)
    new.write_text("new\n")
    assert pod.run(shell, f"put {new} {old} keep644").code == 0
    assert (old.read_text(), old.stat().st_mode & 0o777, new.exists()) == ("new\n", 0o640, False)


def test_text_reads_its_lines_after_the_contents_line(shell: str, pod: Pod) -> None:
    data = pod.root / "data"
    data.write_text("text 2 0644 /x\nmarker d\ncontents 3\none\ntwo\nthree\n")
    call = f"exec 4<{data}; contents_open=; text 2 && echo ok; text 2 || echo short"
    assert pod.run(shell, call).out == "ok\nshort\n"
    assert (pod.work / "text").read_text() == "three\n"


def test_hook_puts_podstates_block_first_and_last_and_keeps_the_users_lines(
    shell: str, pod: Pod
) -> None:
    rc = pod.home / ".bashrc"
    rc.write_text("mine\n# >>> p\nold\n# <<< p\nalso mine\n")
    block = "# >>> p\nnew\n# <<< p\n"
    pod.run(shell, f'hook {MARKS} "~/.bashrc" {b64(block)}')
    assert rc.read_text() == block + "mine\nalso mine\n" + block
    assert pod.status() == [f"restored hooks in {rc}"]


def test_hook_names_a_lone_mark(shell: str, pod: Pod) -> None:
    rc = pod.home / ".bashrc"
    rc.write_text("a\n# <<< p\nb\n")
    block = b64("# >>> p\n# <<< p\n")
    pod.run(shell, f'hook {MARKS} "~/.bashrc" {block}')
    assert rc.read_text() == "# >>> p\n# <<< p\na\nb\n# >>> p\n# <<< p\n"
    said = f"error hook {rc}: podstate's block there has lost a mark (line 2:"
    assert pod.status()[0].startswith(said)


def test_packages_pend_those_dpkg_lacks(shell: str, pod: Pod) -> None:
    pod.run(shell, "packages dash podstate-no-such-package")
    assert pod.status() == [
        "pending packages.apt: podstate-no-such-package not installed: the next apply installs them"
    ]


def test_cstart_reads_boot_id_and_ticks_past_a_name_with_parentheses(shell: str, pod: Pod) -> None:
    done = pod.run(shell, "cstart; started")
    assert done.out == f'{BOOT_ID}:4242\n"{BOOT_ID}:4242"\n'


def test_without_proc_the_start_is_null(shell: str, pod: Pod) -> None:
    done = pod.run(shell, f"proc_dir={pod.root}/none; cstart; echo $?; started")
    assert done.out == "1\nnull\n"


def test_identity_joins_the_ids_variables_found(shell: str, pod: Pod) -> None:
    proc_tree(pod.root / "p2", BOOT_ID, stat_line("sh", 1), {"A": "x", "C_ID": "7", "B": "y"})
    done = pod.run(shell, f"proc_dir={pod.root}/p2; IDS='A NONE B'; identity")
    assert done.out == "x/y\n"


def test_marker_names_the_digest_and_this_containers_start(shell: str, pod: Pod) -> None:
    pod.run(shell, "marker d1g")
    ready = (pod.etc / "ready").read_text()
    assert ready.startswith('{"digest": "d1g", "restored_at": "')
    assert ready.endswith(f'"container": "{BOOT_ID}:4242"}}\n')


def _write_data(pod: Pod, text: str) -> None:
    (pod.data / "state").write_text(text)


@pytest.mark.parametrize(
    "data,said",
    [
        (None, "skipped no hook data at {data}/state: run podstate apply with boot.hook"),
        (
            "podstate-boot 1\npod p1 abc123xyz\nsum 00\n",
            "skipped the hook's data {data}/state does not match its checksum: nothing was"
            " restored; the next apply writes it again",
        ),
        (
            render_state("p1", None, []),
            "skipped the hook's data in {data} (for pod p1) names no RunPod pod id: the apply"
            " that wrote it could not read its container's RUNPOD_POD_ID, so it may be another"
            " pod's: nothing was restored",
        ),
        (
            render_state("p1", "other", []),
            "skipped the hook's data in {data} is for pod p1 (other), not this one"
            " (RUNPOD_POD_ID=abc123xyz): nothing was restored; an apply to this pod writes its own",
        ),
    ],
)
def test_restore_skips_data_it_cannot_vouch_for(
    shell: str, pod: Pod, data: str | None, said: str
) -> None:
    if data is not None:
        _write_data(pod, data)
    done = pod.run(shell, "restore; echo $?")
    assert done.out == "1\n"
    assert pod.status()[-1] == said.format(data=pod.data)


def test_restore_puts_back_the_entries_and_the_marker(shell: str, pod: Pod) -> None:
    made = pod.root / "made dir"
    entries = [
        f"dir 0750 {made}\n",
        file_entry("file", "0644 ~/.config/a", "A\n"),
        "text 2 0600 ~/b\n",
        "marker dig\n",
    ]
    _write_data(pod, render_state("p1", POD_ID, entries, ["b1\nb2\n"]))
    done = pod.run(shell, "restore; echo $?")
    assert done.out == "0\n"
    status = pod.status()
    assert status[:4] == [
        f"pod p1 {POD_ID}",
        f"restored directory {made}",
        f"restored file {pod.home}/.config/a",
        f"restored file {pod.home}/b",
    ]
    assert status[4].startswith("done ") and status[4].endswith(" ready")
    assert (pod.home / "b").read_text() == "b1\nb2\n"
    assert (pod.etc / "ready").read_text().startswith('{"digest": "dig"')


def test_restore_with_a_pending_entry_writes_no_marker(shell: str, pod: Pod) -> None:
    _write_data(pod, render_state("p1", POD_ID, ["pending secrets: hf\n", "marker dig\n"]))
    pod.run(shell, "restore")
    assert pod.status()[1] == "pending secrets: hf"
    assert pod.status()[2].endswith(" pending")
    assert not (pod.etc / "ready").exists()


def test_restore_chooses_the_safe_rendering_for_other_gpus(
    shell: str, pod: Pod, tmp_path: Path
) -> None:
    target = pod.root / "nccl.sh"
    guarded = file_entry("guarded", f"0644 {target}", "fast\n") + b64("safe\n") + "\n"
    entries = ["gpus 8 nvlink\n", guarded]
    _write_data(pod, render_state("p1", POD_ID, entries))
    pod.run(shell, "restore", nvidia_smi(tmp_path, "topo-2x-pcie.txt"))
    assert target.read_text() == "safe\n"


def _keys_tar(pod: Pod, private: bytes, public: bytes) -> str:
    """Save host keys in the pod's data as an apply does; return the sha256 of the public half."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (("ssh_host_ed25519_key", private), ("ssh_host_ed25519_key.pub", public)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    (pod.data / "hostkeys.tar").write_bytes(buffer.getvalue())
    (pod.data / "hostkeys.sum").write_text(hashlib.sha256(private + public).hexdigest() + "  -\n")
    return hashlib.sha256(public).hexdigest()


def test_keys_put_back_the_saved_host_keys(shell: str, pod: Pod) -> None:
    public = _keys_tar(pod, b"PRIVATE\n", b"ssh-ed25519 AAAA pod\n")
    pod.run(shell, f"keys {public}")
    assert (pod.root / "etc" / "ssh" / "ssh_host_ed25519_key").read_bytes() == b"PRIVATE\n"
    assert pod.status() == ["restored host keys"]


def test_keys_of_another_pod_are_not_put_back(shell: str, pod: Pod) -> None:
    _keys_tar(pod, b"PRIVATE\n", b"ssh-ed25519 AAAA pod\n")
    pod.run(shell, f"keys {'0' * 64}")
    assert not (pod.root / "etc" / "ssh").exists()
    assert pod.status()[0].startswith("error host keys: the keys in ")


def test_no_saved_keys_is_an_error(shell: str, pod: Pod) -> None:
    pod.run(shell, "keys 00")
    assert pod.status() == [f"error host keys: none are saved in {pod.data}; new ones are made"]
