"""A repository of the user's own: what ``podstate init`` writes (and refuses to write over),
podstate's shipped defaults under the user's vars, ``podstate show``, and starter files that
age. No sandbox pod: tests/test_new_user.py takes the whole path on pods, from a wheel."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from podstate import cli
from podstate.commands.show import traced
from podstate.desired.errors import Layer
from podstate.desired.load import VarsDir, merge, shipped
from podstate.desired.spec import resolve
from podstate.repository import starter
from tests.e2e import write_vars

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Each starter file's version, and the hash of its text: a text that changes without its
# version reaches no user's repository, since `podstate init --update` rewrites only the
# older versions. Change both here when you change a starter file.
STARTER_TEXTS = {
    "config.py": (1, "a7107e6079a0"),
    "inventories/pods.py": (1, "89e2a7f0bd46"),
    "deploy/pod.py": (1, "5fc1ab04b18d"),
}


def listing(root: Path) -> dict[str, bytes]:
    """Return every file below ``root`` and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def init(*args: str) -> int:
    return cli.main(["init", *args])


def test_init_writes_a_repository_and_a_dry_run_only_says_what(tmp_path, capsys):
    target = tmp_path / "fleet"
    assert init("--dry-run", str(target)) == 0
    said = capsys.readouterr().out
    assert not target.exists()
    wanted = starter.repository()
    assert [line.split()[-1] for line in said.splitlines()] == [str(target / p) for p in wanted]
    assert init(str(target)) == 0
    assert listing(target) == {path: text.encode() for path, text in wanted.items()}
    assert f"podstate=={starter.version()}" in (target / "requirements.txt").read_text()
    check = yaml.safe_load((target / ".github/workflows/podstate-check.yml").read_text())
    steps = [step.get("run") for step in check["jobs"]["check"]["steps"]]
    assert "pip install -r requirements.txt" in steps and "pip install ." not in steps
    assert "requirements.txt" in check[True]["push"]["paths"]  # YAML 1.1 reads `on` as true


@pytest.mark.parametrize("there", [".gitignore", "deploy", "inventories/group_vars/all.yaml"])
def test_init_writes_over_nothing_and_names_what_is_there(tmp_path, capsys, there):
    """A file where init would write one, or a file where it needs a folder: one line naming
    it, exit 1, and nothing written, in a dry run too."""
    (tmp_path / there).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / there).write_text("mine\n")
    (tmp_path / "README.md").write_text("a file init does not write\n")
    before = listing(tmp_path)
    for dry in ([], ["--dry-run"]):
        assert init(*dry, str(tmp_path)) == 1
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith(f"podstate: {tmp_path} already has ") and there in err
        assert listing(tmp_path) == before


def test_this_repository_is_made_as_init_makes_one():
    """The demo's and the tests' inventories/, deploy/ and config.py are init's own."""
    wanted = starter.repository()
    for path in [
        *starter.MANAGED,
        "inventories/group_vars/all.yaml",
        "inventories/pods.example.yaml",
    ]:
        assert (ROOT / path).read_text() == wanted[path], path
    assert starter.aged(ROOT) == []


def test_a_starter_file_changes_only_with_its_version():
    found = {
        path: (number, hashlib.sha256(text.encode()).hexdigest()[:12])
        for path, (number, text) in starter.MANAGED.items()
    }
    assert found == STARTER_TEXTS


def test_a_null_drops_a_key_in_a_mapping_no_earlier_file_has():
    """Found by the property below: a null was kept where nothing was under it."""
    assert merge({}, {"env": {"X": None, "Y": "1"}}) == {"env": {"Y": "1"}}


def test_the_starter_all_yaml_sets_nothing_and_shows_every_shipped_line():
    text = starter.all_yaml()
    assert yaml.safe_load(text) is None
    lines = text.splitlines()
    body = (ROOT / "podstate/desired/defaults.yaml").read_text().split("\n\n", 1)[1]
    for line in body.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            assert f"# {line}" in lines


def _vars(root: Path, all_yaml: str) -> list[Layer]:
    write_vars(root, "group_vars/all.yaml", all_yaml)
    write_vars(root, "host_vars/pod-1.yaml", "env: {HOST: one}\n")
    return VarsDir(root).layers(["community"], "pod-1")


def test_a_key_no_file_sets_takes_the_shipped_default_and_a_null_drops_one(tmp_path):
    state = resolve(_vars(tmp_path, "env: {TEAM: ml}\nscratch: {/scratch: null}\n"), "pod-1")
    assert state["env"] == {**shipped().data["env"], "TEAM": "ml", "HOST": "one"}
    assert state["dirs"] == shipped().data["dirs"]
    assert state["scratch"] == {}  # /scratch declared by no layer now: it leaves the pod
    assert resolve(_vars(tmp_path, "nccl: null\n"), "pod-1")["scratch"] == {
        "/scratch": {"size": 16 << 30, "mode": "1777"}
    }


def test_this_repositorys_state_is_the_shipped_defaults():
    """The demo's all.yaml sets nothing: its pods take the defaults, as all.yaml gave them."""
    state = resolve(VarsDir(ROOT / "inventories").layers(["community"], "pod-1"), "pod-1")
    assert state == resolve([shipped()], "pod-1")
    assert state["shm"] == {"min_size": 16 << 30} and state["disk_reserve"] == 2 << 30


def test_show_names_the_file_each_value_comes_from(tmp_path, monkeypatch, capsys):
    (tmp_path / "pods.yaml").write_text(
        "pods:\n  pod-1: {ssh_hostname: 127.0.0.1, ssh_port: 1, groups: [trainers]}\n"
    )
    write_vars(tmp_path, "group_vars/all.yaml", "env: {TEAM: ml}\n")
    write_vars(tmp_path, "group_vars/trainers.yaml", "shm: {min_size: 8G}\n")
    write_vars(tmp_path, "host_vars/pod-1.yaml", "env: {TEAM: vision}\nscratch: null\n")
    monkeypatch.setenv("PODSTATE_PODS", str(tmp_path / "pods.yaml"))
    monkeypatch.setenv("PODSTATE_VARS", str(tmp_path))
    monkeypatch.delenv("PODSTATE_INVENTORY", raising=False)
    assert cli.main(["show", "pod-1"]) == 0
    text = capsys.readouterr().out
    shown = yaml.safe_load(text)
    layers = VarsDir(tmp_path).layers(["community", "trainers"], "pod-1")
    state: dict = {}
    for layer in layers:
        state = merge(state, layer.data)
    assert shown == state and "scratch" not in shown
    lines = {line.split(":")[0].strip(): line.split("# ")[-1] for line in text.splitlines()[1:]}
    assert lines["TEAM"] == f"{tmp_path}/host_vars/pod-1.yaml"
    assert lines["min_size"] == f"{tmp_path}/group_vars/trainers.yaml"
    assert lines["TMPDIR"] == "shipped default"
    assert cli.main(["show", "pod-2"]) == 1
    assert capsys.readouterr().err.startswith("podstate: no pod pod-2 in the pods file")


names = st.sampled_from(["a", "b", "c"])
trees = st.recursive(
    st.none() | st.integers(0, 3) | st.lists(st.integers(0, 3), max_size=2),
    lambda inner: st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(names, trees, max_size=3), min_size=1, max_size=4))
def test_every_shown_value_is_the_merged_one_from_the_last_file_that_sets_it(datas):
    layers = [Layer(f"file-{i}", data) for i, data in enumerate(datas)]
    state: dict = {}
    for layer in layers:
        state = merge(state, layer.data)
    rebuilt: dict = {}
    for path, value, source in traced(layers):
        node = rebuilt
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
        index = int(source.split("-")[1])
        assert _get(layers[index].data, path) is not None
        if not isinstance(value, dict):  # an empty mapping: the file's may hold nulls
            assert _get(layers[index].data, path) == value
        assert all(_get(layer.data, path) is None for layer in layers[index + 1 :])
    assert rebuilt == state


def _get(data: dict, path: tuple[str, ...]):
    node = data
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def test_update_rewrites_only_podstates_aged_starter_files(tmp_path, capsys):
    assert init(str(tmp_path)) == 0
    (tmp_path / "inventories/pods.yaml").write_text("pods: {}\n")
    aged = tmp_path / "inventories/pods.py"
    aged.write_text(aged.read_text().replace("version 1 ", "version 0 ", 1) + "# mine\n")
    replaced = tmp_path / "config.py"
    replaced.write_text("# my own config.py\n")
    (tmp_path / "deploy/pod.py").unlink()
    capsys.readouterr()
    assert [(a.path, a.found) for a in starter.aged(tmp_path)] == [
        ("inventories/pods.py", 0),
        ("deploy/pod.py", None),
    ]
    before = listing(tmp_path)
    assert init("--update", "--dry-run", str(tmp_path)) == 0
    assert listing(tmp_path) == before
    assert capsys.readouterr().out.count("would update") == 2
    assert init("--update", str(tmp_path)) == 0
    after = listing(tmp_path)
    changed = {path for path in {*before, *after} if before.get(path) != after.get(path)}
    assert changed == {"inventories/pods.py", "deploy/pod.py"}
    assert after["inventories/pods.py"].decode() == starter.managed("inventories/pods.py")
    assert starter.aged(tmp_path) == []
    assert init("--update", str(tmp_path / "inventories")) == 1  # no repository of init's
    assert "none of podstate's starter files" in capsys.readouterr().err


def test_every_run_names_an_aged_starter_file_and_the_command_that_updates_it(tmp_path):
    """pyinfra imports the inventory file at every run: an aged starter file is one line."""
    assert init(str(tmp_path)) == 0
    aged = tmp_path / "inventories/pods.py"
    aged.write_text(aged.read_text().replace("version 1 ", "version 0 ", 1))
    (tmp_path / "inventories/pods.yaml").write_text(
        "pods:\n  pod-1: {ssh_hostname: 127.0.0.1, ssh_port: 9}\n"  # nothing listens: fails fast
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PODSTATE_", "RUNPOD_"))}
    run = subprocess.run(
        [str(BIN / "pyinfra"), "-y", "inventories/pods.py", "deploy/pod.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in run.stderr.splitlines() if "starter file" in line]
    assert lines == [
        f"podstate: inventories/pods.py is podstate's starter file version 0; podstate "
        f"{starter.version()} writes version 1: run `podstate init --update` to update it"
    ], run.stderr
