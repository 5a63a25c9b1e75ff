"""Unit tests of the roles' pure decisions: probe facts in, variables and file content out."""

import base64
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from podstate.desired.state import Gpu, Nccl, Waiver
from podstate.facts import processes
from podstate.facts.files import PathInfo
from podstate.facts.gpu import GpuDevice, GpuState
from podstate.facts.mounts import Mount, mount_of
from podstate.facts.probe import Probe, parse_probe
from podstate.facts.processes import Process
from podstate.facts.request import Request
from podstate.facts.venv import VenvRequest
from podstate.inventory.fleet import desired
from podstate.nccl import variables
from podstate.pod import phases
from podstate.pod import probe as deploy_probe
from podstate.roles import gpu, shm
from podstate.roles.disk import has_room, on_container_disk
from podstate.roles.env import (
    BOOT_ADVICE,
    BOOT_ARMED,
    HOOK,
    inert_names,
    render_hooks,
    render_profile,
    stale_processes,
)
from tests.typed_state import state

H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    "cloud,gpus,nvlink,wanted,expected",
    [
        (
            "COMMUNITY",
            2,
            False,
            {"p2p": "auto", "ib": "auto"},
            {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"},
        ),
        ("COMMUNITY", 8, True, {"p2p": "auto", "ib": "auto"}, {"NCCL_IB_DISABLE": "1"}),
        ("COMMUNITY", 1, False, {"p2p": "auto", "ib": "leave"}, {}),
        ("COMMUNITY", 0, False, {"p2p": "auto", "ib": "auto"}, {"NCCL_IB_DISABLE": "1"}),
        ("SECURE", 2, False, {"p2p": "auto", "ib": "auto"}, {}),
        (
            "SECURE",
            2,
            True,
            {"p2p": "disable", "ib": "disable"},
            {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"},
        ),
        ("COMMUNITY", 4, False, {"p2p": "leave", "ib": "leave"}, {}),
    ],
)
def test_nccl_guards(cloud, gpus, nvlink, wanted, expected):
    assert variables(Nccl(**wanted), cloud, gpus, nvlink) == expected


def test_no_nccl_section_sets_nothing():
    assert variables(None, "COMMUNITY", 2, False) == {}


AUTO = {"p2p": "auto", "ib": "auto"}
BOTH = "export NCCL_P2P_DISABLE=1\nexport NCCL_IB_DISABLE=1\n"


@pytest.mark.parametrize(
    "cloud,wanted,profile,expected",
    [
        # a fresh COMMUNITY pod: the topology is unknown, so P2P takes its safe value
        ("COMMUNITY", AUTO, None, {"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}),
        ("COMMUNITY", {"p2p": "auto", "ib": "leave"}, None, {"NCCL_P2P_DISABLE": "1"}),
        # a guard already there stays, whatever is wanted; IB follows the cloud alone
        ("SECURE", AUTO, BOTH, {"NCCL_P2P_DISABLE": "1"}),
        ("COMMUNITY", {"p2p": "leave", "ib": "leave"}, BOTH, {"NCCL_P2P_DISABLE": "1"}),
        ("SECURE", None, BOTH, {"NCCL_P2P_DISABLE": "1"}),
        ("SECURE", AUTO, None, {}),
    ],
)
def test_unreadable_gpus_never_lower_the_p2p_guard(cloud, wanted, profile, expected):
    modes = None if wanted is None else Nccl(**wanted)
    assert variables(modes, cloud, None, False, profile) == expected


def healthy_gpus(unknown: tuple[str, ...] = ()) -> GpuState:
    """Two H100s read healthy, GPU 1 in hardware thermal slowdown; ``unknown`` fields not read."""
    readings = {
        "memory_mib": 81559,
        "driver": "550.127.05",
        "temperature": 45,
        "ecc_mode": "Enabled",
        "ecc_uncorrected": 0,
        "hw_thermal": "Not Active",
        "link_width": 16,
        "link_width_max": 16,
    }
    devices = (
        GpuDevice(0, H100, **readings),
        GpuDevice(1, H100, **{**readings, "temperature": 91, "hw_thermal": "Active"}),
    )
    return GpuState(readable=True, devices=devices, cuda="12.4", unknown=unknown)


def test_a_rejected_field_leaves_only_its_reading_unknown():
    wanted = Gpu(count=2, model="*H100*", min_driver="550", healthy=True)
    assert [f for f, _ in gpu.check(wanted, healthy_gpus())] == ["gpu.healthy"]
    found = dict(gpu.check(wanted, healthy_gpus(("clocks_throttle_reasons.hw_slowdown",))))
    assert list(found) == ["gpu.healthy"]
    message = found["gpu.healthy"]
    assert message.startswith("GPU 1 (NVIDIA H100 80GB HBM3): hardware thermal slowdown")
    assert message.count("GPU ") == 1  # GPU 0 is read healthy but for that one field
    assert (
        "; this pod's nvidia-smi does not know the field clocks_throttle_reasons.hw_slowdown "
        "(its release lacks or renamed it), so that reading is unknown and gpu.healthy cannot "
        "be checked" in message
    )


def test_a_requirement_whose_reading_is_unknown_is_not_met():
    found = dict(gpu.check(Gpu(min_driver="535", count=2), healthy_gpus(("driver_version",))))
    assert list(found) == ["gpu.min_driver"]
    assert "does not know the field driver_version" in found["gpu.min_driver"]
    assert gpu.check(Gpu(count=2), healthy_gpus(("driver_version",))) == []


RUNPOD_BASHRC = "# ~/.bashrc\ncase $- in *i*) ;; *) return;; esac\nalias ll='ls -l'\n"


def test_bashrc_hooks_come_first_and_last_once():
    rc = render_hooks(RUNPOD_BASHRC + "source /etc/rp_environment\n")
    assert rc.startswith(HOOK) and rc.endswith(HOOK)
    assert rc.count(HOOK) == 2
    assert rc.index("return;;") > len(HOOK)  # before Debian's early return
    assert rc.index("source /etc/rp_environment") < rc.rindex(HOOK)  # after RunPod's line


def test_bashrc_rendering_is_idempotent_and_moves_a_stale_hook():
    once = render_hooks(RUNPOD_BASHRC)
    assert render_hooks(once) == once
    appended = once + "source /etc/rp_environment\n"  # RunPod appended after our hook
    fixed = render_hooks(appended)
    assert fixed.endswith("source /etc/rp_environment\n" + HOOK)


def test_missing_bashrc_gets_the_hooks_only():
    assert render_hooks(None) == HOOK + HOOK


def test_profile_values_reach_sh_literally(tmp_path):
    values = {"A": "$(echo owned)", "B": 'it\'s "quoted"\nnext line', "C": ""}
    profile = tmp_path / "profile.sh"
    profile.write_text(render_profile(values, ["/opt/my tools/bin"]))
    shown = subprocess.run(
        ["sh", "-c", f'. "{profile}"; . "{profile}"; printf "%s|" "$A" "$B" "$C" "$PATH"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("|")
    assert shown[:3] == list(values.values())
    assert shown[3].startswith("/opt/my tools/bin:")
    assert shown[3].count("/opt/my tools/bin") == 1


# --- the container disk: what the desired state puts there ----------------------------------

ROOT_MOUNT = Mount("overlay", "/", "overlay", ("rw",))
VOLUME = Mount("mfs#eu-ro-1.runpod.net:9421", "/workspace", "fuse", ("rw",))
SCRATCH_TMPFS = Mount("tmpfs", "/scratch", "tmpfs", ("rw", "size=16g"))
WANTED = state(
    {
        "scratch": {"/scratch": {"size": "16G"}},
        "dirs": {
            "TMPDIR": "/scratch/tmp",
            "UV_CACHE_DIR": "/root/.cache/uv",
            "DATA": "/workspace/d",
        },
    }
)


def disk_probe(can_mount: bool, mounts: list[Mount], free: int | None = 1 << 30) -> Probe:
    """Return a probe of a pod with ``mounts``, each wanted path resolving to itself."""
    paths = ["/scratch", *WANTED.dir_paths]
    return replace(
        parse_probe([]),
        can_mount=can_mount,
        mounts=tuple(mounts),
        disk_free=free,
        disk_size=20 << 30,
        paths={p: PathInfo("directory", "755", p, mount_of(p, mounts)) for p in paths},
    )


def test_without_mounting_scratch_and_its_dirs_are_on_the_container_disk():
    probe = disk_probe(False, [ROOT_MOUNT, VOLUME])
    assert on_container_disk(WANTED, probe) == [
        "scratch /scratch",
        "TMPDIR=/scratch/tmp",
        "UV_CACHE_DIR=/root/.cache/uv",
    ]


def test_a_scratch_tmpfs_now_or_after_this_run_is_not_the_container_disk():
    expected = ["UV_CACHE_DIR=/root/.cache/uv"]
    assert on_container_disk(WANTED, disk_probe(True, [ROOT_MOUNT, VOLUME])) == expected
    mounted = disk_probe(False, [ROOT_MOUNT, VOLUME, SCRATCH_TMPFS])
    assert on_container_disk(WANTED, mounted) == expected


def test_no_mount_for_root_says_nothing_is_there():
    assert on_container_disk(WANTED, disk_probe(False, [VOLUME])) == []


@pytest.mark.parametrize("free", [2 << 30, 1 << 30])
def test_room_when_free_is_above_the_reserve_or_nothing_is_there(free):
    """No violation (has_room records none here, outside a deploy, where recording one would
    fail). Free space that cannot be read is a violation: tests/test_disk.py."""
    probe = disk_probe(True, [ROOT_MOUNT, VOLUME, SCRATCH_TMPFS], free)
    only_volume = state({"dirs": {"DATA": "/workspace/d"}, "disk_reserve": "2G"})
    assert has_room(probe, only_volume)
    if free != 1 << 30:
        assert has_room(probe, replace(WANTED, disk_reserve=2 << 30))


def test_waivers_hold_back_matching_findings_until_their_day():
    from datetime import date

    from podstate.run.findings import Violation, waive

    hot = Violation("GPU", "gpu.healthy", "GPU 3 throttles")
    shm = Violation("Shared memory", "shm.min_size", "/dev/shm is 64M")
    waivers = [
        Waiver("gpu.*", date(2026, 12, 31), "ticket 1"),
        Waiver("disk.min_free./", date(2026, 12, 31), "ticket 2"),
        Waiver("shm.min_size", date(2026, 11, 1), "ticket 3"),
    ]
    result = waive([hot, shm], waivers, date(2026, 12, 31))
    assert result.failing == [shm]
    assert result.waived == [(hot, waivers[0])]
    assert result.stale == [
        "waiver for disk.min_free./ (until 2026-12-31) matched nothing",
        "waiver for shm.min_size expired on 2026-11-01",
    ]
    assert waive([hot], waivers[:1], date(2027, 1, 1)).failing == [hot]


def test_requests_merge_each_item_once_in_order():
    merged = Request(paths=("/a", "/b"), files=("/f",)).merge(
        Request(paths=("/b", "/c"), apt=("git",), secrets={})
    )
    assert merged.paths == ("/a", "/b", "/c") and merged.files == ("/f",)
    arguments = merged.arguments()
    assert arguments["apt"] == ["git"] and arguments["repos"] is None and arguments["venv"] is None
    assert arguments["secrets"] == [] and Request().arguments()["secrets"] is None  # {}: read
    assert "secrets_file" in merged.stdin()[2] and "secrets_file" not in Request().stdin()[2]


def test_two_roles_cannot_ask_one_section_two_ways():
    asked = VenvRequest("/opt/venv", "python3", "/opt/.podstate/uv", "")
    venv = Request(venv=asked)
    assert venv.merge(Request()).venv == Request().merge(venv).venv == asked
    assert venv.merge(venv).venv == asked
    with pytest.raises(ValueError, match="venv"):
        venv.merge(Request(venv=replace(asked, path="/opt/other")))


FULL = {
    "scratch": {"/scratch": {"size": "1G"}},
    "dirs": {"TMPDIR": "/scratch/tmp", "PIP_CACHE_DIR": "/workspace/pip"},
    "env": {"A": "b"},
    "files": {"/etc/x.conf": {"content": "x\n"}},
    "authorized_keys": [],
    "packages": {"apt": ["git"]},
    "repos": {"/root/code": {"url": "https://github.com/a/b.git", "ref": "main"}},
    "secrets": {},
    "venv": {"path": "/opt/venv", "packages": ["requests"], "snapshot": "/workspace/snap"},
    "disk": {"min_free": {"/workspace": "1G"}},
    "download": {"url": "https://example.com/x", "min_mbps": 100},
    "boot": {"hook": True, "host_keys": "keep", "volume": "/vol"},
}


def test_the_deploy_probe_reads_what_every_phase_reads():
    """Every role is a phase of the run (podstate.pod.phases), and the deploy's probe reads
    each phase's every item: the request of a role called alone is part of it."""
    wanted = desired(FULL)
    roles_dir = Path(gpu.__file__).parent
    names = {p.stem for p in roles_dir.glob("*.py")} - {"__init__", "probe", "marker"}
    listed = {phase.reads.__module__.rsplit(".", 1)[1] for phase in phases.PHASES}
    assert listed == names and gpu.reads(wanted) == shm.reads(wanted) == Request()
    whole = deploy_probe.request(wanted).arguments()
    for phase in phases.PHASES:
        own = phase.reads(wanted).arguments()
        for key, value in own.items():
            if isinstance(value, list):
                assert set(map(str, value)) <= set(map(str, whole[key])), (phase.name, key)
            elif value is not None:
                assert whole[key] == value, (phase.name, key)


def test_the_run_order_is_one_table_that_the_deploy_shows():
    """The deploy's docstring and docs/ARCHITECTURE.md show the phases' table of contents,
    bookends included, and the last phases (planned after every deploy file) end with the
    ready marker."""
    from podstate.pod import deploy

    table = phases.contents()
    assert table in (deploy.__doc__ or "")
    architecture = Path(__file__).parent.parent / "docs" / "ARCHITECTURE.md"
    assert table in architecture.read_text(), "docs/ARCHITECTURE.md shows another order"
    lines = table.splitlines()
    assert "start" in lines[0] and "finish" in lines[-1] and "marker (last)" in lines[-2]
    last = [p.name for p in phases.PHASES if p.last]
    assert last == ["ready", "boot record", "removal", "boot", "marker"]
    assert [p.name for p in phases.PHASES][: len(phases.PHASES) - len(last)][0] == "disk"


RUNPOD_ENV = {"PIP_CACHE_DIR": "/workspace/.cache/pip"}
DECLARED_ENV = {"PIP_CACHE_DIR": "/scratch/pip"}


def process(pid: int, command: str, ssh: bool, environ=RUNPOD_ENV) -> Process:
    return Process(pid, command, environ, ssh)


def test_inert_processes_with_old_values_are_no_violation():
    """RunPod's start script leaves nginx and `sleep infinity` with the image's values for
    the container's whole life: neither can run Python, pip or uv work."""
    found = [process(7, "nginx", False), process(1, "sleep", False), process(9, "cron", True)]
    assert stale_processes(DECLARED_ENV, found) == []


def test_what_the_start_script_started_says_to_arm_the_boot_hook():
    found = [process(12, "jupyter-lab", False), process(40, "python3", True)]
    assert stale_processes(DECLARED_ENV, found) == [
        "jupyter-lab (pid 12) still has PIP_CACHE_DIR=/workspace/.cache/pip; restart it to "
        "pick up PIP_CACHE_DIR=/scratch/pip; " + BOOT_ADVICE,
        "python3 (pid 40) still has PIP_CACHE_DIR=/workspace/.cache/pip; restart it to "
        "pick up PIP_CACHE_DIR=/scratch/pip",
    ]
    armed = stale_processes(DECLARED_ENV, found[:1], hook=True)
    assert armed[0].endswith("; " + BOOT_ARMED)


def test_the_desired_state_moves_names_to_either_side():
    inert = inert_names(state({"processes": {"inert": ["supervisord"], "matter": ["nginx"]}}))
    assert "supervisord" in inert and "nginx" not in inert and "sleep" in inert
    found = [process(3, "nginx", False), process(4, "supervisord", False)]
    assert [m.split(" ")[0] for m in stale_processes(DECLARED_ENV, found, inert)] == ["nginx"]
    assert inert_names(state({})) == inert_names(state({"processes": {}}))


def test_the_probe_tells_a_process_of_an_ssh_session_from_one_of_the_container():
    def line(pid: int, comm: str, environ: str) -> str:
        return f"proc {pid} ={comm} {base64.b64encode(environ.encode()).decode()}"

    parsed = processes.parse(
        [
            line(5, "jupyter-lab", "PIP_CACHE_DIR=/w"),
            line(6, "python3", "PIP_CACHE_DIR=/w\nSSH_CONNECTION=1.2.3.4 5 6.7.8.9 22"),
            line(7, "bash", "SSH_CONNECTION=1.2.3.4 5 6.7.8.9 22"),  # no asked variable
        ]
    )
    assert parsed == (
        Process(pid=5, command="jupyter-lab", environ={"PIP_CACHE_DIR": "/w"}, ssh=False),
        Process(pid=6, command="python3", environ={"PIP_CACHE_DIR": "/w"}, ssh=True),
    )
