"""Unit tests for the pure parsers: sizes, /proc/mounts, nvidia-smi output, the probe."""

import json
import os
import re
import socket
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from podstate.facts import activity, probe
from podstate.facts.files import PathInfo
from podstate.facts.gpu import GPU_FIELDS, all_nvlink, parse_gpu_list, parse_topology
from podstate.facts.mounts import mount_of, parse_mounts
from podstate.facts.probe import PodProbe, Probe, parse_probe
from podstate.sizes import SIZE_PATTERN, SIZE_WORDS, format_size, parse_size
from tests import probing

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = FIXTURES.parent.parent


@pytest.mark.parametrize(
    "text,expected",
    [
        ("64M", 64 << 20),
        ("16G", 16 << 30),
        ("1.5G", 3 << 29),
        ("8GiB", 8 << 30),
        ("512K", 512 << 10),
        ("100", 100),
        ("2 GB", 2 << 30),
        (4096, 4096),
        ("1P", 1 << 50),
        ("16GB", 16 << 30),
        ("512 M", 512 << 20),
        ("100B", 100),
        ("1.3K", 1331),  # rounded down to whole bytes
    ],
)
def test_sizes_use_binary_units(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text", ["8X", "-1", "", " 8G", "G", "8 G B", True, -5, 1.5, "16g", "16iB", "8  G", "1.G"]
)
def test_bad_sizes_are_refused(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_format_size_is_exact_or_rounded():
    assert format_size(16 << 30) == "16G"
    assert format_size(65536 * 1024) == "64M"
    assert format_size(1536 << 20) == "1536M"
    assert format_size(1000) == "1000B"


def test_schema_and_parser_agree_on_sizes():
    schema = json.loads((Path(__file__).parent.parent / "schema/pod.schema.json").read_text())
    assert schema["$defs"]["size"]["pattern"] == SIZE_PATTERN
    assert re.match(SIZE_PATTERN, "16G")


def test_what_a_size_may_be_is_stated_as_the_parser_takes_it():
    """The schema's message says exactly what is accepted, and each example in it is."""
    schema = json.loads((ROOT / "schema/pod.schema.json").read_text())
    assert schema["$defs"]["size"]["x-message"] == f"is not a size: {SIZE_WORDS}"
    examples = SIZE_WORDS.rsplit(": ", 1)[1].split(", ")
    assert len(examples) == 6 and all(parse_size(text) for text in examples)
    with pytest.raises(ValueError):
        parse_size("16g")  # the words say so


def test_mounts_find_the_network_volume_of_runpod():
    mounts = parse_mounts((FIXTURES / "mounts-runpod.txt").read_text())
    workspace = mount_of("/workspace/.cache/pip", mounts)
    assert workspace.target == "/workspace" and workspace.is_network
    assert not mount_of("/scratch/tmp", mounts).is_network
    assert mount_of("/scratch/tmp", mounts).target == "/"


def test_mounts_unescape_spaces_and_read_tmpfs_size():
    mounts = parse_mounts((FIXTURES / "mounts-runpod.txt").read_text())
    scratch = mount_of("/scratch dir/x", mounts)
    assert scratch.target == "/scratch dir"
    assert scratch.size == 8 << 30
    assert mount_of("/dev/shm", mounts).size == 64 << 20


@pytest.mark.parametrize(
    "line,network",
    [
        ("host:/export /data nfs4 rw 0 0", True),
        ("root@h:/s /workspace fuse.sshfs rw 0 0", True),
        ("//srv/share /mnt cifs rw 0 0", True),
        ("/dev/vda / ext4 rw 0 0", False),
        ("tmpfs /scratch tmpfs rw,size=1k 0 0", False),
        ("overlay / overlay rw 0 0", False),
    ],
)
def test_network_filesystems(line, network):
    assert parse_mounts(line)[0].is_network is network


def test_gpu_list():
    text = (
        "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-1b2c3d4e-0000-1111-2222-333344445555)\n"
        "GPU 1: NVIDIA GeForce RTX 4090 (UUID: GPU-1b2c3d4e-0000-1111-2222-333344445556)\n"
    )
    assert parse_gpu_list(text) == ["NVIDIA GeForce RTX 4090"] * 2
    assert parse_gpu_list("") == []


@pytest.mark.parametrize(
    "fixture,count,nvlink",
    [
        ("topo-8x-nvlink-nics.txt", 8, True),
        ("topo-2x-pcie.txt", 2, False),
        ("topo-4x-mixed.txt", 4, False),
        ("topo-1x.txt", 1, False),
    ],
)
def test_topology_nvlink_needs_every_pair(fixture, count, nvlink):
    links = parse_topology((FIXTURES / fixture).read_text())
    assert len([pair for pair in links if pair[0] != pair[1]]) == count * (count - 1)
    assert all_nvlink(links, count) is nvlink


def test_topology_ignores_nic_columns():
    links = parse_topology((FIXTURES / "topo-8x-nvlink-nics.txt").read_text())
    assert set(links.values()) == {"X", "NV18"}


def test_probe_script_runs_in_sh_and_reads_back(tmp_path):
    (tmp_path / "a dir").mkdir(mode=0o1777)
    (tmp_path / "a dir").chmod(0o1777)
    (tmp_path / "f").write_text("line 1\n$(not run)\n")
    paths = [str(tmp_path / "a dir"), str(tmp_path / "missing" / "deeper")]
    files = [str(tmp_path / "f"), str(tmp_path / "absent")]
    out = probing.run(paths, files)
    assert out.returncode == 0, out.stderr
    probe = parse_probe(out.stdout.splitlines())
    assert probe.paths[paths[0]].kind == "directory"
    assert probe.paths[paths[0]].mode == "1777"
    assert probe.paths[paths[1]].kind is None
    assert probe.paths[paths[1]].real == paths[1]
    assert probe.files[files[0]].content == "line 1\n$(not run)\n"
    assert probe.files[files[1]].state == "absent"
    assert probe.shm_size > 0
    assert 0 < probe.disk_free <= probe.disk_size
    status = Path("/proc/self/status").read_text()
    cap_eff = int(re.search(r"^CapEff:\s*(\w+)", status, re.M).group(1), 16)
    assert probe.can_mount is bool(cap_eff >> 21 & 1)  # CAP_SYS_ADMIN, as this process has


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_a_probe_program_cut_short_on_its_way_runs_none_of_it(tmp_path, shell):
    mark = tmp_path / "ran"
    whole = "".join(f"{line}\n" for line in probe.sourced(f"echo begin; touch {mark}\necho end"))
    for cut in (len(whole) - 2, len(whole) // 2):  # its closing brace lost; half of it
        done = subprocess.run(
            [shell, "-c", probe.READER], input=whole[:cut], capture_output=True, text=True
        )
        assert done.returncode != 0 and done.stdout == "" and not mark.exists()
    done = subprocess.run([shell, "-c", probe.READER], input=whole, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "begin\nend\n") and mark.exists()


def test_a_probe_program_on_a_socket_is_read_by_cat(tmp_path):
    """A stdin that cannot be opened by name (a socket, where sshd's is a pipe) is read
    whole by cat, and the program runs as from a pipe."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        program = probe.sourced("echo begin; echo end")
        ours.sendall("".join(f"{line}\n" for line in program).encode())
        ours.shutdown(socket.SHUT_WR)
        done = subprocess.run(["sh", "-c", probe.READER], stdin=theirs, capture_output=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"begin\nend\n", b"")


@pytest.mark.parametrize("base64_w0", [True, False], ids=["base64 -w0", "base64 without -w"])
def test_probe_reads_odd_paths_back_exactly(tmp_path, base64_w0):
    """Kinds with spaces, links, names with spaces and line breaks; and a base64 without
    ``-w`` (an old busybox), whose lines the probe joins itself."""
    (tmp_path / "d").mkdir()
    (tmp_path / "plain file").write_text("x\n" * 100)
    (tmp_path / "link").symlink_to(tmp_path / "d")
    odd = tmp_path / "line\nbreak\n"
    odd.mkdir()
    env = dict(os.environ)
    if not base64_w0:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "base64").write_text(
            '#!/bin/sh\nfor a; do [ "$a" = -w0 ] && exit 1; done\nexec /usr/bin/base64 "$@"\n'
        )
        (bin_dir / "base64").chmod(0o755)
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
    paths = [str(tmp_path / n) for n in ("plain file", "link", "line\nbreak\n")]
    files = [str(tmp_path / "plain file")]
    out = probing.run(paths, files, env=env)
    assert out.returncode == 0, out.stderr
    probe = parse_probe(out.stdout.splitlines())
    assert replace(probe.paths[paths[0]], mount=None) == PathInfo(
        kind="regular file", mode="644", real=paths[0], mount=None
    )
    assert probe.paths[paths[1]].kind == "symbolic link"
    assert probe.paths[paths[1]].real == str(tmp_path / "d")
    assert probe.paths[paths[2]].real == str(odd)
    assert probe.files[files[0]].content == "x\n" * 100  # over one base64 line of 76


def run_probe_with_standin(tmp_path, layout: str) -> Probe:
    """Return the probe of this machine with the sandbox's nvidia-smi stand-in on PATH,
    answering from ``layout``."""
    from podstate.sandbox.shapes import SHAPES, gpu_layout

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    standin = bin_dir / "nvidia-smi"
    standin.write_bytes((ROOT / "podstate/sandbox/files/nvidia-smi").read_bytes())
    standin.chmod(0o755)
    (tmp_path / "layout").write_text(gpu_layout("pod-1", SHAPES[0]) + layout)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "NVIDIA_SMI_STANDIN_LAYOUT": str(tmp_path / "layout"),
    }
    out = probing.run(env=env)
    assert out.returncode == 0, out.stderr
    return PodProbe().process(out.stdout.splitlines())


def test_a_field_nvidia_smi_rejects_is_asked_without(tmp_path):
    """Two fields rejected, as a release that lacks or renamed them; GPU 1 throttles."""
    probe = run_probe_with_standin(
        tmp_path,
        "reject|clocks_throttle_reasons.hw_slowdown\nreject|pcie.link.width.max\n"
        "health|1|91|Enabled|0|No|No|Not Active|Active|Not Active|Not Active|16|16\n",
    )
    state = probe.gpu
    assert state.readable
    assert state.unknown == ("clocks_throttle_reasons.hw_slowdown", "pcie.link.width.max")
    assert [(d.index, d.name, d.temperature, d.hw_thermal) for d in state.devices] == [
        (0, "NVIDIA GeForce RTX 4090", 31, "Not Active"),
        (1, "NVIDIA GeForce RTX 4090", 91, "Active"),
    ]
    assert {(d.hw_slowdown, d.link_width, d.link_width_max) for d in state.devices} == {
        (None, 16, None)
    }
    assert state.cuda == "12.4" and probe.nvlink is False  # header and topology read too


def test_an_nvidia_smi_that_fails_leaves_every_reading_unknown(tmp_path):
    probe = run_probe_with_standin(tmp_path, "fail|255|Failed to initialize NVML: Unknown Error\n")
    state = probe.gpu
    assert (state.readable, state.error, state.unknown) == (
        False,
        "Failed to initialize NVML: Unknown Error",
        (),
    )
    assert probe.gpus == ()


def test_a_pod_answer_naming_a_field_not_asked_is_malformed():
    from pyinfra.api.exceptions import FactProcessError

    answer = ["begin", "gpu.query 0 =", "gpu.unknown clocks_event_reasons.hw_slowdown", "end"]
    with pytest.raises(FactProcessError, match="nvidia-smi fields not asked"):
        PodProbe().process(answer)


# Real captures from a single-H200 host (tests/fixtures/nvidia/README.md).
NVIDIA = FIXTURES / "nvidia"


def test_real_h200_gpu_list():
    names = parse_gpu_list((NVIDIA / "h200-L.txt").read_text())
    assert names == ["NVIDIA H200"]
    assert "H200" in names[0]


def test_real_h200_topology_of_one_gpu_is_not_nvlink():
    text = (NVIDIA / "h200-topo.txt").read_text()
    # The real header row is underlined with ANSI escapes, even into a file or pipe.
    assert text.splitlines()[0].startswith("\t\x1b[4mGPU0\t")
    links = parse_topology(text)
    assert not [pair for pair in links if pair[0] != pair[1]]
    assert all_nvlink(links, 1) is False


def test_real_h200_topology_reads_the_gpu0_column():
    links = parse_topology((NVIDIA / "h200-topo.txt").read_text())
    assert links == {(0, 0): "X"}


def test_real_h200_shm_is_the_last_of_two_mounts():
    mounts = parse_mounts((NVIDIA / "h200-mounts.txt").read_text())
    assert len([m for m in mounts if m.target == "/dev/shm"]) == 2
    block, blocks, _ = (int(f) for f in (NVIDIA / "h200-stat-shm.txt").read_text().split())
    df_bytes = int((NVIDIA / "h200-df-shm.txt").read_text().splitlines()[1].split()[1])
    assert mount_of("/dev/shm", mounts).size == block * blocks == df_bytes == 128 << 30


# The fields the probe asked nvidia-smi when the H200 captures were made; those it asks now
# besides (whether a GPU is in use) are read as a release that rejects them reads.
CAPTURED_FIELDS = tuple(GPU_FIELDS)[:15]
NEWER_FIELDS = "gpu.unknown " + ",".join(tuple(GPU_FIELDS)[15:])


def test_real_h200_probe_answer_parses():
    """podstate's probe, run on a real H200 pod: every section reads back."""

    lines = (NVIDIA / "h200-probe.txt").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("gpu.query "))
    probe = PodProbe().process([*lines[: at + 1], NEWER_FIELDS, *lines[at + 1 :]])
    (gpu,) = probe.gpu.devices
    assert (gpu.name, gpu.memory_mib, gpu.driver) == ("NVIDIA H200", 143771, "580.159.04")
    assert (gpu.ecc_mode, gpu.ecc_uncorrected, gpu.retired_pending) == ("Enabled", 0, None)
    assert (gpu.hw_thermal, gpu.link_width, gpu.link_width_max) == ("Not Active", 16, 16)
    assert probe.gpu.cuda == "13.0" and probe.gpus == ("NVIDIA H200",)
    assert probe.shm_size == probe.free["/dev/shm"] == 128 << 30
    assert probe.nvlink is False and probe.shell == "/bin/bash"
    assert activity.read(probe)["idle"] is None  # its utilization was not read: unknown


def test_real_h200_query_has_every_field_the_probe_asked():
    from podstate.facts.gpu import parse_cuda_version, parse_gpu_query

    (gpu,) = parse_gpu_query((NVIDIA / "h200-probe-query.csv").read_text(), CAPTURED_FIELDS)
    assert gpu.index == 0 and gpu.remap_pending == "No" and gpu.power_brake == "Not Active"
    assert parse_cuda_version((NVIDIA / "h200-probe-header.txt").read_text()) == "13.0"


@pytest.mark.parametrize("value", ["16G\n", "64M\n", "1.5T\n"])
def test_a_size_with_a_trailing_newline_is_refused_by_the_schema_and_the_parser(value):
    schema = json.loads((ROOT / "schema/pod.schema.json").read_text())
    assert not re.search(schema["$defs"]["size"]["pattern"], value)
    with pytest.raises(ValueError):
        parse_size(value)
