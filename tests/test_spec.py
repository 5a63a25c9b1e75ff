"""The desired state: merge order, validation messages, and the pods file."""

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from podstate.inventory import load_pods
from podstate.podsfile import read_pods_file
from podstate.spec import Layer, SpecError, merge, resolve

ROOT = Path(__file__).resolve().parent.parent
PYINFRA = Path(sys.executable).parent / "pyinfra"
SCHEMA_KEYS = json.loads((ROOT / "schema/pod.schema.json").read_text())["properties"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    """A pods file and vars dir in tmp_path, selected through the environment."""
    write(
        tmp_path / "pods.yaml",
        """\
        defaults: {ssh_user: root}
        pods:
          a: {ssh_hostname: 127.0.0.1, ssh_port: 1, cloud: SECURE, groups: [trainers]}
          b: {ssh_hostname: 127.0.0.1, ssh_port: 2}
        """,
    )
    write(
        tmp_path / "vars/group_vars/all.yaml",
        """\
        scratch: {/scratch: {size: 8G}}
        env: {A: all, B: all}
        nccl: {p2p: auto, ib: auto}
        """,
    )
    write(tmp_path / "vars/group_vars/secure.yaml", "env: {A: secure}\nnccl: {ib: leave}\n")
    write(tmp_path / "vars/group_vars/trainers.yaml", "env: {A: trainers}\n")
    write(tmp_path / "vars/host_vars/b.yaml", "scratch: {/scratch: {mode: '700'}}\n")
    monkeypatch.setenv("PODSTATE_PODS", str(tmp_path / "pods.yaml"))
    monkeypatch.setenv("PODSTATE_VARS", str(tmp_path / "vars"))
    return tmp_path


def test_merge_is_deep_for_mappings_and_replaces_the_rest():
    assert merge({"a": {"x": 1, "y": [1]}, "b": 1}, {"a": {"y": [2]}, "b": {"c": 1}}) == {
        "a": {"x": 1, "y": [2]},
        "b": {"c": 1},
    }


def test_state_merges_all_then_cloud_then_groups_then_host(fleet):
    pods = {pod.name: pod for pod in load_pods()}
    assert pods["a"].groups == ["secure", "trainers"]
    assert pods["b"].groups == ["community"]
    assert pods["a"].data["podstate"]["env"] == {"A": "trainers", "B": "all"}
    assert pods["a"].data["podstate"]["nccl"] == {"p2p": "auto", "ib": "leave"}
    assert pods["b"].data["podstate"]["scratch"] == {"/scratch": {"size": 8 << 30, "mode": "700"}}
    assert pods["b"].data["cloud"] == "COMMUNITY"


def test_pods_from_the_same_files_share_a_state_but_not_its_object(fleet):
    """Validated once for the files they share, each pod still gets its own copy to use."""
    pods_file = fleet / "pods.yaml"
    pods_file.write_text(pods_file.read_text() + "  c: {ssh_hostname: 127.0.0.1, ssh_port: 3}\n")
    write(fleet / "vars/group_vars/community.yaml", "env: {B: community}\n")
    pods = {pod.name: pod for pod in load_pods()}
    c, b = pods["c"].data["podstate"], pods["b"].data["podstate"]
    assert c["env"] == {"A": "all", "B": "community"} == b["env"]
    assert c["scratch"]["/scratch"]["mode"] == "1777"  # b's host_vars are b's alone
    c["env"]["A"] = "changed"
    assert b["env"]["A"] == "all"
    write(fleet / "vars/group_vars/community.yaml", "env: {B: 2}\n")
    with pytest.raises(SpecError, match=r"group_vars/community.yaml: env.B: .*\(pod b\)$"):
        load_pods()


@pytest.mark.parametrize(
    "content,expected",
    [
        ("scratch: {/scratch: {size: 8X}}", "scratch./scratch.size: '8X' is not a size"),
        ("dirs: {TMPDIR: tmp}", "dirs.TMPDIR: 'tmp' must be an absolute path"),
        ("shm: {min: 1G}", "shm.min: unknown key (allowed: min_size)"),
        (
            "colour: blue",
            f"colour: unknown key (allowed: {', '.join(sorted(SCHEMA_KEYS))})",
        ),
        ("env: {A: 1}", "env.A: expected a string, got an integer"),
        ("env: {1A: x}", "'1A' is not a valid variable name"),
        ("nccl: {p2p: off}", "nccl.p2p: False is not one of: auto, disable, leave"),
        ("scratch: {/s: {mode: '700'}}", "scratch./s: 'size' is required"),
        ("disk_reserve: plenty", "disk_reserve: 'plenty' is not a size"),
        ("- a list", "expected a mapping of keys at the top, got a list"),
        ("env: {A: [unclosed", "invalid YAML at line 1"),
    ],
)
def test_errors_name_file_key_and_problem(fleet, content, expected):
    write(fleet / "vars/host_vars/a.yaml", content)
    with pytest.raises(SpecError) as error:
        load_pods()
    message = str(error.value)
    assert "host_vars/a.yaml" in message
    assert expected in message
    assert "\n" not in message


def test_error_names_the_file_that_set_the_bad_value():
    layers = [Layer("all.yaml", {"env": {"A": "x"}}), Layer("g.yaml", {"env": {"B": 2}})]
    with pytest.raises(SpecError, match=r"^g.yaml: env.B"):
        resolve(layers, "p")


def test_disk_reserve_is_a_size_and_defaults_to_2g():
    assert resolve([Layer("f", {})], "p")["disk_reserve"] == 2 << 30
    assert resolve([Layer("f", {"disk_reserve": "512M"})], "p")["disk_reserve"] == 512 << 20


def test_paths_are_normalized():
    state = resolve([Layer("f", {"dirs": {"TMPDIR": "/scratch//tmp/../tmp/"}})], "p")
    assert state["dirs"]["TMPDIR"] == "/scratch/tmp"


@pytest.mark.parametrize(
    "content,expected",
    [
        ("pods: {a: {ssh_port: x}}", "pods.a.ssh_port: expected a port number"),
        ("pods: {a: {colour: red}}", "pods.a.colour: unknown key"),
        ("pods: {'bad name': {}}", "pods.bad name: not a valid pod name"),
        ("pods: {a: {groups: trainers}}", "pods.a.groups: expected a list of group names"),
        ("hosts: {}", "hosts: unknown key (allowed: defaults, pods)"),
        ("pods: []", "pods: expected a mapping"),
    ],
)
def test_pods_file_errors(tmp_path, content, expected):
    path = write(tmp_path / "pods.yaml", content)
    with pytest.raises(SpecError, match=re.escape(expected)):
        read_pods_file(path)


def test_invalid_state_stops_pyinfra_before_any_connection(fleet):
    """The real pyinfra CLI, pointed at a listening socket: nothing may connect to it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    write(fleet / "pods.yaml", f"pods: {{a: {{ssh_hostname: 127.0.0.1, ssh_port: {port}}}}}\n")
    write(fleet / "vars/host_vars/a.yaml", "shm: {min_size: lots}\n")
    result = subprocess.run(
        [str(PYINFRA), "-y", "inventories/pods.py", "deploy/pod.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ),
        timeout=60,
    )
    assert result.returncode == 1
    assert "host_vars/a.yaml: shm.min_size: 'lots' is not a size" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()


def test_missing_pods_file_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PODSTATE_PODS", str(tmp_path / "nope.yaml"))
    with pytest.raises(SpecError, match="copy inventories/pods.example.yaml"):
        load_pods()
