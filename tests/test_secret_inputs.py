"""Secret inputs without a pod: what the desired state's messages say (the key, never a
value nor a token pasted where a name goes), URLs with credentials refused, and the pod-side
scripts that compare and install the secrets file, run by the local shells."""

import base64
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from podstate.desired.errors import Layer, SpecError
from podstate.desired.load import VarsDir
from podstate.desired.secret import Secret, render
from podstate.desired.spec import resolve
from podstate.facts import probe as probe_fact
from podstate.facts import secrets as secret_facts
from podstate.facts.secrets import SecretsState
from podstate.operations import repos as repo_ops
from podstate.paths import SECRETS_FILE
from podstate.shell import script
from roles import secrets as secrets_role
from tests.e2e import write_vars

TOKEN = "hf_AbCdEf123456ghIJ"  # shaped like a pasted token: a valid variable name, no spaces
SHELLS = [s for s in ("dash", "bash", "busybox") if shutil.which(s)]


def error(state: dict) -> str:
    """Return the one-line SpecError ``state`` gives."""
    with pytest.raises(SpecError) as raised:
        resolve([Layer("f.yaml", state)], "p")
    message = str(raised.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    "source,expected",
    [
        (
            {"from_env": TOKEN},
            "secrets.X.from_env: the environment variable it names is not set; this does not "
            "look like a variable name: did you paste the value itself?",
        ),
        ({"from_file": TOKEN}, "secrets.X.from_file: cannot read the file it names: No such"),
        (
            {"from_env": TOKEN, "from_file": TOKEN},
            "secrets.X: give only one of: from_env, from_file",
        ),
        ({}, "secrets.X: give one of: from_env, from_file"),
        ({TOKEN: "x"}, "secrets.X: unknown key (allowed: from_env, from_file)"),
        ({TOKEN: None}, "secrets.X: give one of: from_env, from_file"),  # a null drops a key
        ({"from_env": TOKEN, "value": TOKEN}, "secrets.X: "),
        (TOKEN, "secrets.X: expected a mapping, got a string"),
        ({"from_env": f"{TOKEN} x"}, "secrets.X.from_env: the value is not an environment"),
        ({"from_file": f"{TOKEN}\tx"}, "secrets.X.from_file: the value is not a file name"),
        ({"from_env": [TOKEN]}, "secrets.X.from_env: expected a string, got a list"),
    ],
)
def test_a_secrets_message_names_the_key_never_the_value(source, expected):
    message = error({"secrets": {"X": source}})
    assert expected in message and TOKEN not in message


@pytest.mark.parametrize("where", ["secrets.X", "repos./root/r.ssh_key"])
def test_a_missing_variable_named_as_variables_are_is_named(monkeypatch, where):
    """A name shaped like a variable (upper case, digits, _) cannot be a pasted token."""
    monkeypatch.delenv("BAR_SECRET", raising=False)
    source = {"from_env": "BAR_SECRET"}
    item = {"url": "git@github.com:o/r.git", "ref": "main", "ssh_key": source}
    state = {"repos": {"/root/r": item}} if "repos" in where else {"secrets": {"X": source}}
    assert f"{where}.from_env: the environment variable BAR_SECRET is not set" in error(state)


def test_a_number_read_from_yaml_under_a_secret_is_never_echoed(tmp_path):
    """A value YAML reads as no string is named as written, except a secret's source."""
    write_vars(tmp_path, "group_vars/all.yaml", "secrets: {X: {from_env: 0x4711}}\n")
    with pytest.raises(SpecError) as raised:
        resolve(VarsDir(tmp_path).layers([], "p"), "p")
    assert "secrets.X.from_env: expected a string" in str(raised.value)
    assert "4711" not in str(raised.value)


def test_a_deploy_keys_message_names_the_key_never_the_value():
    item = {"url": "git@github.com:o/r.git", "ref": "main", "ssh_key": {"from_env": TOKEN}}
    message = error({"repos": {"/root/r": item}})
    assert "repos./root/r.ssh_key.from_env: the environment variable it names" in message
    assert TOKEN not in message


def test_a_file_that_is_not_text_is_named_by_its_key(tmp_path):
    (tmp_path / TOKEN).write_bytes(b"\xff")
    with pytest.raises(SpecError) as raised:
        resolve([Layer("f.yaml", {"secrets": {"X": {"from_file": TOKEN}}}, tmp_path)], "p")
    assert "secrets.X.from_file: the file it names is not UTF-8 text" in str(raised.value)
    assert TOKEN not in str(raised.value)


def test_a_secret_shows_its_key_never_its_value_or_source(monkeypatch):
    monkeypatch.setenv(TOKEN, "the-value")
    state = resolve([Layer("f.yaml", {"secrets": {"X": {"from_env": TOKEN}}})], "p")
    shown = str(state["secrets"]["X"]) + repr(state["secrets"]["X"])
    assert "secrets.X.from_env" in shown and TOKEN not in shown and "the-value" not in shown


@pytest.mark.parametrize(
    "state,key",
    [
        (
            {"repos": {"/r": {"url": f"https://{TOKEN}@github.com/o/r", "ref": "v1"}}},
            "repos./r.url",
        ),
        ({"repos": {"/r": {"url": f"https://u:{TOKEN}@h/o/r", "ref": "v1"}}}, "repos./r.url"),
        ({"repos": {"/r": {"url": f"ssh://git:{TOKEN}@h/o/r", "ref": "v1"}}}, "repos./r.url"),
        ({"download": {"url": f"https://{TOKEN}@h/f", "min_mbps": 1}}, "download.url"),
        ({"venv": {"path": "/v", "index_url": f"https://{TOKEN}@h/simple"}}, "venv.index_url"),
        (
            {"venv": {"path": "/v", "extra_index_urls": ["https://h/s", f"https://t:{TOKEN}@h/s"]}},
            "venv.extra_index_urls: entry 2",
        ),
        (
            {"venv": {"path": "/v", "find_links": [f"https://{TOKEN}@h/w"]}},
            "venv.find_links: entry 1",
        ),
        (
            {"venv": {"path": "/v", "packages": [f"x @ git+https://{TOKEN}@github.com/o/x"]}},
            "venv.packages: entry 1",
        ),
    ],
)
def test_a_url_with_a_credential_is_refused_without_showing_it(state, key):
    message = error(state)
    assert f"{key}: the URL holds a credential" in message and TOKEN not in message
    assert ("ssh_key" in message) == key.startswith("repos")


def test_a_requirements_line_with_a_credential_is_refused(tmp_path):
    (tmp_path / "req.txt").write_text(f"numpy\nx @ https://{TOKEN}@h/x.whl\n")
    with pytest.raises(SpecError) as raised:
        resolve([Layer("f", {"venv": {"path": "/v", "requirements": "req.txt"}}, tmp_path)], "p")
    assert "venv.requirements: req.txt line 2: the URL holds a credential" in str(raised.value)
    assert TOKEN not in str(raised.value)


def test_a_url_that_is_invalid_otherwise_is_quoted_without_its_credential():
    message = error({"repos": {"/r": {"url": f"https://{TOKEN}@h/o/r x", "ref": "v1"}}})
    assert "'https://***@h/o/r x' is not a git URL" in message


def test_plain_urls_and_ssh_users_stay_valid():
    repos = {
        "/a": {"url": "git@github.com:org/repo.git", "ref": "main"},
        "/b": {"url": "https://github.com/org/repo", "ref": "v1"},
        "/c": {"url": "ssh://git@github.com/org/repo.git", "ref": "v1"},
        "/d": {"url": "file:///srv/git/x.git", "ref": "v1"},
    }
    assert set(resolve([Layer("f", {"repos": repos})], "p")["repos"]) == set(repos)


def test_reports_mask_a_token_in_an_origin_set_by_hand():
    assert repo_ops.shown_url(f"https://{TOKEN}@github.com/o/r") == "https://***@github.com/o/r"
    assert repo_ops.shown_url(f"https://x:{TOKEN}@h/o/r") == "https://***@h/o/r"
    assert repo_ops.shown_url("ssh://git@h/o/r") == "ssh://git@h/o/r"
    assert repo_ops.shown_url("git@h:o/r") == "git@h:o/r"


def test_the_probes_stdin_is_hidden_wherever_pyinfra_prints_it():
    lines = secret_facts.probe_stdin({"A": Secret("k", "v")})
    assert str(lines) == repr(lines) == f"{lines}" == "(hidden)"
    assert list(lines) == [
        base64.b64encode(render({"A": Secret("k", "v")}).encode()).decode(),
        "dg==",
    ]


# Values a shell could mangle, and names that are variables of the scripts themselves.
VALUES = {
    "A": "x 'q' $(no) `no` \\ \"\n\n",
    "B": "é\udcff",
    "EMPTY": "",
    "e": "E",
    "w": "W",
    "n": "N",
    "f": "F",
    "IFS": "ab",
    "UNSET": "u",
}


def probe(shell: str, path: Path, wanted: dict[str, Secret]) -> SecretsState:
    """Return what the probe's secrets lines say of ``path``, run by ``shell`` from its stdin
    with ``wanted``, as the probe runs them (``b64`` as scripts/enc.sh defines it)."""
    lines = secret_facts.probe_lines(sorted(wanted))
    program = "\n".join([script("enc.sh"), *lines]).replace(SECRETS_FILE, str(path))
    stdin = probe_fact.sourced(program, secret_facts.probe_stdin(wanted))
    command = [shell, "sh"] if shell == "busybox" else [shell]
    done = subprocess.run(
        [*command, "-c", probe_fact.READER],
        input="".join(line + "\n" for line in stdin),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stderr == ""
    return secret_facts.parse(done.stdout.splitlines())


@pytest.mark.parametrize("shell", SHELLS)
def test_the_probe_says_which_values_differ_and_nothing_else(shell, tmp_path):
    wanted = {name: Secret("k", value) for name, value in VALUES.items()}
    on_pod = {n: v for n, v in wanted.items() if n != "UNSET"} | {"e": Secret("k", "other")}
    path = tmp_path / "env.sh"
    path.write_bytes(render(on_pod).encode("utf-8", "surrogateescape"))
    path.chmod(0o600)
    found = probe(shell, path, wanted)
    assert found.same is False and (found.owner, found.mode) == (os.getuid(), "600")
    assert found.values == {n: n != "e" for n in VALUES if n != "UNSET"}
    if os.getuid() == 0:
        assert secrets_role.drift(wanted, found) == "UNSET missing, e differs"
    path.write_bytes(render(wanted).encode("utf-8", "surrogateescape"))
    assert probe(shell, path, wanted).same is True


@pytest.mark.parametrize("shell", SHELLS)
def test_the_probe_reads_no_value_from_a_file_anyone_else_may_read(shell, tmp_path):
    path = tmp_path / "env.sh"
    path.write_text(render({"A": Secret("k", "a")}))
    path.chmod(0o644)
    found = probe(shell, path, {"A": Secret("k", "a")})
    assert (found.same, found.mode, found.values) == (True, "644", {})
    path.unlink()
    assert probe(shell, path, {"A": Secret("k", "a")}).state == "absent"


@pytest.mark.parametrize("shell", SHELLS)
def test_the_probe_names_copies_an_interrupted_upload_left(shell, tmp_path):
    wanted = {"A": Secret("k", "a")}
    path = tmp_path / "env.sh"
    path.write_text(render(wanted))
    path.chmod(0o600)
    assert probe(shell, path, wanted).leftovers == ()
    Path(f"{path}.podstate-check").write_text(render(wanted))
    found = probe(shell, path, wanted)
    assert found.leftovers == (f"{SECRETS_FILE}.podstate-check",)
    if os.getuid() == 0:
        assert secrets_role.drift(wanted, found) == (
            "copies left by an interrupted run (env.sh.podstate-check)"
        )
    path.unlink()
    Path(f"{path}.podstate-upload").symlink_to(tmp_path / "nowhere")
    found = probe(shell, path, wanted)
    assert found.state == "absent"
    assert found.leftovers == (
        f"{SECRETS_FILE}.podstate-upload",
        f"{SECRETS_FILE}.podstate-check",
    )


@pytest.mark.skipif(os.getuid() != 0, reason="the install makes the file root's")
def test_the_install_proves_the_content_against_its_second_copy(tmp_path):
    dest, upload, check = (tmp_path / n for n in ("env.sh", "env.sh.up", "env.sh.check"))

    def install() -> subprocess.CompletedProcess:
        words = [str(upload), str(check), str(dest)]
        command = ["sh", "-c", script("install_secret.sh"), "install_secret", *words]
        return subprocess.run(command, capture_output=True, text=True)

    upload.write_text("export A=a\n")
    check.write_text("export A=a\n")
    assert install().returncode == 0
    assert dest.read_text() == "export A=a\n" and oct(dest.stat().st_mode)[-3:] == "600"
    upload.write_text("export A=b\n")
    check.write_text("export A=c\n")
    failed = install()
    assert failed.returncode == 1
    assert failed.stderr == f"podstate: {dest}: does not hold the content podstate uploaded\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env.sh"]
