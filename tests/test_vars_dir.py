"""The vars directory: a wrong PODSTATE_VARS is refused, ``.yml`` is read as ``.yaml``, and
``groups.yaml`` groups pods of a pods file as it groups RunPod's."""

import pytest

from podstate.desired.errors import SpecError
from podstate.inventory.fleet import load_pods
from tests.e2e import write_vars
from tests.test_spec import write


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    """A pods file of two pods and a vars dir with group_vars/all.yaml, in tmp_path."""
    write(
        tmp_path / "pods.yaml",
        """\
        pods:
          trainer-1: {ssh_hostname: 127.0.0.1, ssh_port: 1}
          box: {ssh_hostname: 127.0.0.1, ssh_port: 2}
        """,
    )
    write_vars(tmp_path / "vars", "group_vars/all.yaml", {"env": {"ROLE": "all"}})
    monkeypatch.setenv("PODSTATE_PODS", str(tmp_path / "pods.yaml"))
    monkeypatch.setenv("PODSTATE_VARS", str(tmp_path / "vars"))
    monkeypatch.delenv("PODSTATE_INVENTORY", raising=False)
    return tmp_path


def states() -> dict[str, dict]:
    return {pod.name: pod.data["podstate"] for pod in load_pods()}


def test_a_vars_dir_without_a_vars_file_is_refused_naming_what_was_looked_for(fleet, monkeypatch):
    """An empty desired state is met by every pod: a wrong PODSTATE_VARS must not be green."""
    (fleet / "empty").mkdir()
    monkeypatch.setenv("PODSTATE_VARS", str(fleet / "empty"))
    with pytest.raises(SpecError) as error:
        load_pods()
    assert "empty: no vars file in it (looked for group_vars/*.yaml and host_vars/*.yaml" in str(
        error.value
    )


def test_a_vars_dir_one_level_too_deep_says_so(fleet, monkeypatch):
    monkeypatch.setenv("PODSTATE_VARS", str(fleet / "vars/group_vars"))
    with pytest.raises(SpecError, match=r"no vars file in it .* holds all.yaml: is it group_vars/"):
        load_pods()


def test_a_vars_file_that_declares_nothing_takes_the_shipped_defaults(fleet):
    write_vars(fleet / "vars", "group_vars/all.yaml", "{}\n")
    assert states()["box"]["dirs"]["TMPDIR"] == "/scratch/tmp"
    write_vars(fleet / "vars", "group_vars/all.yaml", {})  # each shipped key dropped: null
    assert states()["box"] == {"disk_reserve": 2 << 30}


def test_yml_vars_files_are_read_as_yaml(fleet):
    (fleet / "vars/group_vars/all.yaml").unlink()
    write_vars(fleet / "vars", "group_vars/all.yml", {"env": {"ROLE": "all"}})
    write_vars(fleet / "vars", "host_vars/box.yml", "env: {ROLE: box}\n")
    found = states()
    assert found["trainer-1"]["env"] == {"ROLE": "all"}
    assert found["box"]["env"] == {"ROLE": "box"}
    write_vars(fleet / "vars", "group_vars/all.yml", "envv: 1\n")
    with pytest.raises(SpecError, match=r"group_vars/all.yml: envv: unknown key"):
        load_pods()


@pytest.mark.parametrize("stem", ["group_vars/all", "group_vars/nobody", "host_vars/box"])
def test_one_file_in_both_spellings_is_refused(fleet, stem):
    write_vars(fleet / "vars", f"{stem}.yaml", "{}\n")
    write_vars(fleet / "vars", f"{stem}.yml", "{}\n")
    name = stem.split("/")[1]
    with pytest.raises(SpecError, match=rf"{stem}.yaml and {name}.yml are both there"):
        load_pods()


@pytest.mark.parametrize("spelling", ["groups.yaml", "groups.yml"])
def test_groups_yaml_groups_the_pods_of_a_pods_file(fleet, spelling):
    write_vars(fleet / "vars", spelling, 'trainers: ["trainer-*"]\n')
    write_vars(fleet / "vars", "group_vars/trainers.yaml", "env: {ROLE: trainer}\n")
    pods = {pod.name: pod for pod in load_pods()}
    assert pods["trainer-1"].groups == ["community", "trainers"]
    assert pods["trainer-1"].data["podstate"]["env"] == {"ROLE": "trainer"}
    assert pods["box"].groups == ["community"]


@pytest.mark.parametrize(
    "text,message",
    [
        ("trainers: trainer-*\n", "groups.yaml: trainers: expected a list of pod name globs"),
        ("secure: [box]\n", "groups.yaml: secure: set from the providers' data"),
        ("trainers: [unclosed\n", "groups.yaml: invalid YAML"),
    ],
)
def test_a_bad_groups_yaml_is_refused_with_a_pods_file(fleet, text, message):
    write_vars(fleet / "vars", "groups.yaml", text)
    with pytest.raises(SpecError, match=message):
        load_pods()
