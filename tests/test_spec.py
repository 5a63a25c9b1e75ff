"""The desired state: merge order, validation messages, and the pods file."""

import datetime
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from podstate.desired.errors import Layer, SpecError
from podstate.desired.load import merge
from podstate.desired.spec import resolve
from podstate.inventory.fleet import desired, load_pods
from podstate.inventory.podsfile import read_pods_file
from tests.e2e import write_vars

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
    write_vars(
        tmp_path / "vars",
        "group_vars/all.yaml",
        {
            "scratch": {"/scratch": {"size": "8G"}},
            "env": {"A": "all", "B": "all"},
            "nccl": {"p2p": "auto", "ib": "auto"},
        },
    )
    write_vars(tmp_path / "vars", "group_vars/secure.yaml", "env: {A: secure}\nnccl: {ib: leave}\n")
    write_vars(tmp_path / "vars", "group_vars/trainers.yaml", "env: {A: trainers}\n")
    write_vars(tmp_path / "vars", "host_vars/b.yaml", "scratch: {/scratch: {mode: '700'}}\n")
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
    write_vars(fleet / "vars", "group_vars/community.yaml", "env: {B: community}\n")
    pods = {pod.name: pod for pod in load_pods()}
    c, b = pods["c"].data["podstate"], pods["b"].data["podstate"]
    assert c["env"] == {"A": "all", "B": "community"} == b["env"]
    assert c["scratch"]["/scratch"]["mode"] == "1777"  # b's host_vars are b's alone
    c["env"]["A"] = "changed"
    assert b["env"]["A"] == "all"
    write_vars(fleet / "vars", "group_vars/community.yaml", "env: {B: 2}\n")
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
        (
            "env: {A: 1}",
            'env.A: 1 must be a string without NUL bytes (quote numbers: "1"); YAML read 1 as '
            "an integer: quote it",
        ),
        ("env: {A: yes}", "env.A: yes must be a string without NUL bytes"),
        ("env: {A: 0x1F}", "; YAML read 0x1F as an integer: quote it"),
        ("packages: {apt: [vim, 1.10]}", "packages.apt.1: 1.10 is not a Debian package name"),
        ("env: {1A: x}", "'1A' is not a valid variable name"),
        (
            "nccl: {p2p: off}",
            "nccl.p2p: off is not one of: auto, disable, leave; YAML read off as false: quote it",
        ),
        ("nccl: {<<: {p2p: On}, ib: auto}", "nccl.p2p: On is not one of: auto, disable, leave;"),
        ("scratch: {/s: {mode: '700'}}", "scratch./s: 'size' is required"),
        (
            "scratch: {/s: {size: 1G}, /s/../s/: {size: 2G}}",
            "scratch: /s/../s/ is /s again: name each path once",
        ),
        ("disk_reserve: plenty", "disk_reserve: 'plenty' is not a size"),
        (
            "processes: {inert: [jupyter-lab], matter: [jupyter-lab]}",
            "processes: jupyter-lab is listed both in inert and in matter; keep one",
        ),
        ("processes: {inert: [a-name-over-15-chars]}", "processes.inert.0: 'a-name-over-15"),
        ("- a list", "expected a mapping of keys at the top, got a list"),
        ("env: {A: [unclosed", "invalid YAML at line 1"),
    ],
)
def test_errors_name_file_key_and_problem(fleet, content, expected):
    write_vars(fleet / "vars", "host_vars/a.yaml", content)
    with pytest.raises(SpecError) as error:
        load_pods()
    message = str(error.value)
    assert "host_vars/a.yaml" in message
    assert expected in message
    assert "\n" not in message


def test_a_deploy_files_wrong_type_gets_the_schemas_hint():
    with pytest.raises(SpecError) as error:
        desired({"env": {"A": 1}})
    assert str(error.value) == (
        'a deploy file: env.A: 1 must be a string without NUL bytes (quote numbers: "1") (pod any)'
    )


def test_error_names_the_file_that_set_the_bad_value():
    layers = [Layer("all.yaml", {"env": {"A": "x"}}), Layer("g.yaml", {"env": {"B": 2}})]
    with pytest.raises(SpecError, match=r"^g.yaml: env.B"):
        resolve(layers, "p")


def test_a_state_the_schema_passed_is_not_checked_again_and_a_failing_one_always_is(
    tmp_path, monkeypatch
):
    """A state the schema passed is named in the cache and not validated again (nor is
    jsonschema imported for it); one that failed is refused at every run, and a cache that
    cannot be read, or names a state under another schema, passes nothing by itself."""
    from podstate.desired import passed, spec

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    good, bad = {"env": {"A": "x"}}, {"env": {"A": 2}}
    calls: list[dict] = []
    real = spec._validator()

    class Counting:
        def iter_errors(self, state):
            calls.append(state)
            return real.iter_errors(state)

    monkeypatch.setattr(spec, "_validator", Counting)
    for _ in range(2):
        assert resolve([Layer("f", good)], "p")["env"] == {"A": "x"}
        with pytest.raises(SpecError, match=r"^f: env.A"):
            resolve([Layer("f", bad)], "p")
    assert calls == [good, bad, bad]
    names = (tmp_path / "podstate/passed-states").read_text().split()
    assert names == [passed.name(spec._schema(), good)]
    assert passed.name(spec._schema() + " ", good) not in names  # another schema: checked
    (tmp_path / "podstate/passed-states").write_bytes(b"\xff\x00")
    assert resolve([Layer("f", good)], "p")["env"] == {"A": "x"}
    assert len(calls) == 4
    with pytest.raises(SpecError):
        resolve([Layer("f", bad)], "p")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "podstate/passed-states"))
    for _ in range(2):  # a cache that cannot be made (a file in its way): checked each run
        assert resolve([Layer("f", good)], "p")["env"] == {"A": "x"}
    assert len(calls) == 7
    assert passed.name(spec._schema(), {"when": datetime.date.today()}) is None


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
        ("pods: {a: {ssh_prot: 1}}", "pods.a.ssh_prot: unknown key (did you mean ssh_port? "),
        ("pods: {a: {ssh_host: x}}", "pods.a.ssh_host: unknown key (did you mean ssh_hostname?"),
        ("defaults: {ssh_usr: root}\npods: {a: {}}", "defaults.ssh_usr: unknown key (did you"),
        ("pods: {a: {cloud: SECRUE}}", "pods.a.cloud: 'SECRUE' is not one of: COMMUNITY, SECURE"),
        ("defaults: {cloud: 1}\npods: {a: {}}", "defaults.cloud: 1 is not one of: COMMUNITY"),
    ],
)
def test_pods_file_errors(tmp_path, content, expected):
    path = write(tmp_path / "pods.yaml", content)
    with pytest.raises(SpecError, match=re.escape(expected)):
        read_pods_file(path)


def test_pods_file_takes_every_key_of_the_ssh_connector_and_either_cloud(tmp_path):
    path = write(
        tmp_path / "pods.yaml",
        """\
        defaults: {ssh_connect_retries: 2, ssh_file_transfer_protocol: scp, ssh_allow_agent: no}
        pods:
          a: {ssh_hostname: 127.0.0.1, ssh_port: 1, cloud: secure}
          b: {ssh_hostname: 127.0.0.1, ssh_config_file: ~/.ssh/config, cloud: COMMUNITY}
        """,
    )
    a, b = read_pods_file(path)
    assert (a.data["cloud"], a.groups, b.data["cloud"]) == ("SECURE", ["secure"], "COMMUNITY")
    assert a.data["ssh_connect_retries"] == 2 and b.data["ssh_file_transfer_protocol"] == "scp"


def test_invalid_state_stops_pyinfra_before_any_connection(fleet):
    """The real pyinfra CLI, pointed at a listening socket: nothing may connect to it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    write(fleet / "pods.yaml", f"pods: {{a: {{ssh_hostname: 127.0.0.1, ssh_port: {port}}}}}\n")
    write_vars(fleet / "vars", "host_vars/a.yaml", "shm: {min_size: lots}\n")
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


# --- bounded input: aliases, duplicate keys, sizes -------------------------------------------


def _bomb(levels: int) -> str:
    """Return a few hundred bytes of YAML whose aliases expand to 10 ** levels values."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_from_what_the_file_holds(tmp_path, monkeypatch):
    """Nine levels (10 ** 9 values) are refused in one line naming the line where the
    expansion passed the bound, after composing only the nodes the file itself holds up to
    there: each alias is counted by the size of what it names, never expanded."""
    from podstate.desired import load

    composed = []
    compose = load._Loader.compose_node
    monkeypatch.setattr(
        load._Loader, "compose_node", lambda self, *a: composed.append(1) or compose(self, *a)
    )
    text = _bomb(9)
    assert len(text) < 600
    with pytest.raises(SpecError) as error:
        load.load_yaml(write(tmp_path / "all.yaml", text), "group_vars/all.yaml")
    assert str(error.value) == (
        "group_vars/all.yaml: line 4: aliases expand to more than 10000 values; "
        "write the values out, or use fewer aliases"
    )
    assert len(composed) <= 13 + 3 * 12  # at most lines 1 to 4: root, keys, lists, items, aliases


def test_anchors_for_shared_settings_and_merge_keys_load(fleet):
    """Aliases within the bound work as YAML says, merge keys too (overriding a merged key
    is what a merge is for, not a key given twice)."""
    write_vars(
        fleet / "vars",
        "host_vars/a.yaml",
        textwrap.dedent(
            """\
            scratch:
              /scratch: &fast {size: 1G, mode: '700'}
              /scratch2: {<<: *fast, mode: '755'}
              /scratch3: *fast
            """
        ),
    )
    scratch = {pod.name: pod for pod in load_pods()}["a"].data["podstate"]["scratch"]
    assert scratch == {
        "/scratch": {"size": 1 << 30, "mode": "700"},
        "/scratch2": {"size": 1 << 30, "mode": "755"},
        "/scratch3": {"size": 1 << 30, "mode": "700"},
    }


@pytest.mark.parametrize(
    "content,expected",
    [
        (
            "env:\n  A: x\nshm: {min_size: 1G}\nenv:\n  B: y\n",
            "key env appears twice (lines 1 and 4): keep one",
        ),
        ("env: {A: x, 'A': y}\n", "key A appears twice (both on line 1): keep one"),
        (
            "scratch: &s {/s: {size: 1G, x: *s}}\n",
            "line 1: alias *s is inside the value it names, which would hold itself for ever: "
            "write the value out",
        ),
    ],
)
def test_a_key_twice_or_an_alias_in_itself_is_one_line_with_its_lines(fleet, content, expected):
    write_vars(fleet / "vars", "host_vars/a.yaml", content)
    with pytest.raises(SpecError) as error:
        load_pods()
    assert str(error.value) == f"{fleet}/vars/host_vars/a.yaml: {expected}"


def test_a_pod_listed_twice_is_refused_naming_both_lines(tmp_path):
    """pyinfra would only ever contact the second: the first one is never managed."""
    path = write(
        tmp_path / "pods.yaml",
        """\
        pods:
          trainer-1: {ssh_hostname: 203.0.113.7, ssh_port: 40122}
          trainer-2: {ssh_hostname: 203.0.113.8, ssh_port: 40122}
          trainer-1: {ssh_hostname: 203.0.113.9, ssh_port: 40122}
        """,
    )
    with pytest.raises(SpecError) as error:
        read_pods_file(path, "pods.yaml")
    assert str(error.value) == "pods.yaml: key trainer-1 appears twice (lines 2 and 4): keep one"


def test_an_oversized_vars_file_is_refused_by_its_size_unread(fleet):
    """A sparse file of 64 GiB: reading it whole would take minutes and all memory."""
    path = write_vars(fleet / "vars", "host_vars/a.yaml", "env: {A: x}\n")
    os.truncate(path, 64 << 30)
    with pytest.raises(SpecError) as error:
        load_pods()
    assert str(error.value).startswith(
        f"{path}: {64 << 30} bytes, more than the {1 << 20} podstate reads of a YAML file: "
    )


@pytest.mark.parametrize("kind", ["sparse", "fifo"])
def test_files_src_and_requirements_are_looked_at_before_they_are_read(tmp_path, kind):
    """A src or requirements file far too large is refused by its size; a FIFO, which would
    block the run waiting for a writer, is no regular file."""
    source = tmp_path / "big"
    if kind == "sparse":
        source.write_bytes(b"")
        os.truncate(source, 64 << 30)
    else:
        os.mkfifo(source)
    expected = {
        "sparse": (
            f"files: /x: {64 << 30} bytes, more than the 65536 podstate writes",
            f"venv.requirements: big: {64 << 30} bytes, more than the {1 << 20} podstate reads",
        ),
        "fifo": ("files: /x: cannot read src big (", "venv.requirements: cannot read big ("),
    }[kind]
    for data, message in zip(
        ({"files": {"/x": {"src": "big"}}}, {"venv": {"path": "/opt/venv", "requirements": "big"}}),
        expected,
        strict=True,
    ):
        with pytest.raises(SpecError) as error:
            resolve([Layer("f.yaml", data, tmp_path)], "p")
        assert str(error.value).startswith(f"f.yaml: {message}"), str(error.value)
        if kind == "fifo":
            assert "not a regular file" in str(error.value)


@pytest.mark.parametrize("tool", ["pyinfra", "podstate check"])
@pytest.mark.parametrize("problem", ["pod twice", "alias bomb"])
def test_bounded_input_errors_are_one_line_from_either_command(fleet, tool, problem):
    """The real commands: the error is podstate's one line on stderr, and no traceback."""
    if problem == "pod twice":
        path = write(
            fleet / "pods.yaml",
            "pods:\n  a: {ssh_hostname: 127.0.0.1, ssh_port: 1}\n  a: {ssh_port: 2}\n",
        )
        line = f"podstate: {path}: key a appears twice (lines 2 and 3): keep one"
    else:
        path = write_vars(fleet / "vars", "host_vars/a.yaml", _bomb(9))
        line = f"podstate: {path}: line 4: aliases expand to more than 10000 values; "
    command = {
        "pyinfra": [str(PYINFRA), "-y", "inventories/pods.py", "deploy/pod.py"],
        "podstate check": [str(PYINFRA.parent / "podstate"), "check"],
    }[tool]
    result = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ),
        timeout=60,
    )
    assert result.returncode == 1
    assert line in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
