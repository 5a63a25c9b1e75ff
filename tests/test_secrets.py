"""End to end: secrets reach every shell kind from a root-only file, and their values appear
nowhere else: not in pyinfra's output at -vvv, not in any report of the check, not in a
command line on the pod while the run goes on, not in any other file on the pod, not in
what podstate keeps on the control machine. Nor does anything from which a guess at a value
could be tested offline (a digest of it, salted or not). A token pasted where a name goes,
or in a repository's URL, is refused before any pod is contacted, and never printed.
"""

import base64
import hashlib
import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from podstate.paths import SECRETS_FILE
from podstate.sandbox import inside
from tests.e2e import BIN, ROOT, apply, check, exec_count

SANDBOX = {"pods": 3}
MARKER = f"podstate-marker-{uuid.uuid4().hex}"
TOKEN_VAR = "PODSTATE_TEST_TOKEN"
# Shaped like the tokens people paste where a variable or file name goes: no spaces, a
# valid variable name, so only podstate's own care keeps it out of every message.
PASTED = f"hf_{uuid.uuid4().hex[:20]}AbC"
SHELLS = {
    "ssh pod CMD": "{}",
    "bash -lc": "bash -lc '{}'",
    "bash -ic": "bash -ic '{}' 2>/dev/null",
}


@pytest.fixture(scope="module")
def secrets(fleet, tmp_path_factory):
    """The fleet after a first apply at -vvv with two secrets, sampled while it ran."""
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    (fleet.vars_dir / "wandb_key").write_text(f"{MARKER}-file\n")
    secrets = {"HF_TOKEN": {"from_env": TOKEN_VAR}, "WANDB_API_KEY": {"from_file": "wandb_key"}}
    fleet.group_vars("all", {"secrets": secrets}, merge=True)
    os.environ[TOKEN_VAR] = f"{MARKER}-env 'quoted' $(not run)"
    for pod in fleet.pods:
        fleet.out(pod, "touch /tmp/.before-secrets")
    with inside.execs(*fleet.pods) as started:
        run = apply(fleet, "-vvv")
    yield run, started
    os.environ.pop(TOKEN_VAR, None)


def test_first_apply_succeeds(secrets):
    run, _ = secrets
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("pod", ["pod-1", "pod-2", "pod-3"])
@pytest.mark.parametrize("shell", SHELLS)
def test_every_shell_kind_sees_the_secrets(fleet, secrets, pod, shell):
    command = SHELLS[shell].format('echo "$HF_TOKEN|$WANDB_API_KEY"')
    assert fleet.out(pod, command).strip().splitlines()[-1] == (
        f"{MARKER}-env 'quoted' $(not run)|{MARKER}-file"
    )


@pytest.mark.parametrize("pod", ["pod-1", "pod-2", "pod-3"])
def test_the_secrets_file_is_root_only(fleet, secrets, pod):
    assert fleet.out(pod, f"stat -c '%U %a' {SECRETS_FILE}").strip() == "root 600"
    assert fleet.out(pod, f"stat -c '%U %a' {os.path.dirname(SECRETS_FILE)}").strip() == "root 700"


def _tokens(text: str) -> set[str]:
    """Return the words of ``text`` a digest could be written as (hex, base64), and those of
    what each base64 word decodes to: the probe sends much of what it reads as base64."""
    words = set(re.findall(r"[A-Za-z0-9+/=_-]{8,}", text))
    for word in list(words):
        try:
            decoded = base64.b64decode(word, validate=True).decode("utf-8")
        except ValueError:
            continue
        words |= set(re.findall(r"[A-Za-z0-9+/=_-]{8,}", decoded))
    return words


def guessable(text: str, values: list[str]) -> list[str]:
    """Return what in ``text`` would let a guess at one of ``values`` be checked offline: the
    value, its base64, or its digest by SHA-256, SHA-1, MD5, SHA-512 or BLAKE2b (hex or
    base64), alone or with any long word of ``text`` (a salt) before or after it."""
    tokens = _tokens(text)
    salts = [b""] + [w.encode() for w in tokens if len(w) >= 16]
    found = []
    for value in values:
        data = value.encode("utf-8", "surrogateescape")
        if value in text or base64.b64encode(data).decode() in tokens:
            found.append(f"the value {value[:12]}... itself")
        for salt in salts:
            for algorithm in ("sha256", "sha1", "md5", "sha512", "blake2b"):
                for message in (salt + data, data + salt):
                    digest = hashlib.new(algorithm, message)
                    shown = {digest.hexdigest(), base64.b64encode(digest.digest()).decode()}
                    shown.add(base64.b64encode(digest.digest()).decode().rstrip("="))
                    if shown & tokens:
                        found.append(f"{algorithm} of the value with salt {salt[:16]!r}")
    return found


def secret_values(fleet) -> list[str]:
    """Return the secrets of this module's state as the control machine reads them, and the
    secrets file they make (what a digest could be of)."""
    from podstate.desired.secret import Secret, render

    env = os.environ[TOKEN_VAR]
    file = (fleet.vars_dir / "wandb_key").read_text().removesuffix("\n")
    rendered = render({"HF_TOKEN": Secret("", env), "WANDB_API_KEY": Secret("", file)})
    return [env, file, rendered]


def test_the_guess_test_finds_a_salted_digest():
    salt = uuid.uuid4().hex
    text = f"salt {salt} value {hashlib.sha256((salt + 'hunter2').encode()).hexdigest()}\n"
    assert guessable(text, ["hunter2"]) and not guessable(text, ["hunter3"])
    assert guessable(base64.b64encode(text.encode()).decode(), ["hunter2"])


def test_nothing_to_test_a_guess_against_in_pyinfras_output_at_vvv(fleet, secrets):
    run, _ = secrets
    output = run.stdout + run.stderr
    # -vvv shows each fact's command and output: the probe's command line (its program, with
    # the wanted file and values, comes on stdin, shown as "(hidden)") and its answer
    assert ". /dev/stdin" in output and "secrets.file absent" in output
    assert MARKER not in output
    assert guessable(output, secret_values(fleet)) == []
    assert re.findall(r"\b[0-9a-f]{64}\b", output) == []  # no SHA-256 at all, salted or not


def test_nothing_to_test_a_guess_against_in_a_check_at_vvv(fleet, secrets, tmp_path):
    run = apply(fleet, "-vvv", dry=True)
    assert run.returncode == 0, run.stderr
    output = run.stdout + run.stderr
    assert "secrets.value HF_TOKEN same" in output  # the probe's answer: nothing more
    reports = {k: tmp_path / f"r.{k}" for k in ("json", "xml", "md")}
    fleet.out("pod-2", f"sed -i 's/-env/-edited/' {SECRETS_FILE}")
    try:
        result = check(
            fleet,
            "--diff",
            *("--json", str(reports["json"]), "--junit", str(reports["xml"])),
            *("--markdown", str(reports["md"])),
        )
        again = apply(fleet, "-vvv", dry=True)
    finally:
        assert apply(fleet).returncode == 0
    assert result.returncode == 2 and "secrets.value HF_TOKEN differs" in again.stderr
    outputs = [output, result.stdout, result.stderr, again.stdout, again.stderr]
    text = "\n".join(outputs + [p.read_text() for p in reports.values()])
    assert MARKER not in text
    assert guessable(text, secret_values(fleet)) == []
    assert re.findall(r"\b[0-9a-f]{64}\b", text) == []


def test_no_value_in_any_command_line_while_it_ran(fleet, secrets):
    run, started = secrets  # every program started on the pods, with its arguments whole
    installs = [line for line in started if "install_secret" in line]
    assert len(installs) >= len(fleet.pods), "every pod had its secrets file installed"
    assert [line for line in started if MARKER in line] == []
    # The file travels base64-encoded on a command's stdin: not on a command line either,
    # nor in pyinfra's output.
    encoded = base64.b64encode(fleet.out("pod-1", f"cat {SECRETS_FILE}").encode()).decode()
    assert MARKER in base64.b64decode(encoded).decode()
    assert [line for line in started if encoded in line] == []
    assert encoded not in run.stdout + run.stderr
    assert guessable("\n".join(started), secret_values(fleet)) == []


@pytest.mark.parametrize("pod", ["pod-1", "pod-2", "pod-3"])
def test_no_value_in_any_other_file_on_the_pod(fleet, secrets, pod):
    found = fleet.out(
        pod,
        "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f "
        "-newer /tmp/.before-secrets -print0 2>/dev/null "
        f"| xargs -0 -r grep -l -F -e {MARKER} 2>/dev/null; true",
    )
    assert found.split() == [SECRETS_FILE]


def test_no_value_in_what_podstate_keeps_on_the_control_machine(secrets):
    places = [Path.home() / ".cache" / "podstate", Path.home() / ".local/state/podstate"]
    for place in filter(Path.exists, places):
        result = subprocess.run(["grep", "-rlF", MARKER, str(place)], capture_output=True)
        assert result.stdout == b"", result.stdout


def test_second_apply_is_quiet_and_check_costs_one_command(fleet, secrets):
    again = apply(fleet)
    assert again.returncode == 0, again.stderr
    assert again.hosts("success") == set()
    before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
    assert check(fleet).returncode == 0
    assert {p: exec_count(fleet, p) - before[p] for p in fleet.pods} == {p: 1 for p in fleet.pods}


def test_a_hand_edit_is_drift_on_that_pod_alone_without_the_value(fleet, secrets, tmp_path):
    fleet.out("pod-2", f"sed -i 's/-env/-edited/' {SECRETS_FILE}")
    reports = {k: tmp_path / f"r.{k}" for k in ("json", "xml", "md")}
    result = check(
        fleet,
        "--diff",
        "--json",
        str(reports["json"]),
        "--junit",
        str(reports["xml"]),
        "--markdown",
        str(reports["md"]),
    )
    pods = json.loads(reports["json"].read_text())["pods"]
    assert result.returncode == 2
    assert {name: pod["status"] for name, pod in pods.items()} == {
        "pod-1": "ok",
        "pod-2": "drift",
        "pod-3": "ok",
    }
    assert pods["pod-2"]["changes"] == [
        {
            "role": "Secrets",
            "operation": "HF_TOKEN differs",
            "file": "deploy/pod.py",
            "secret": True,
        }
    ]
    assert "would change: Secrets | HF_TOKEN differs" in result.stdout
    outputs = [result.stdout, result.stderr] + [p.read_text() for p in reports.values()]
    assert [out for out in outputs if MARKER in out] == []


def test_rotating_a_secret_is_drift_everywhere_until_applied(fleet, secrets, tmp_path):
    os.environ[TOKEN_VAR] = f"{MARKER}-rotated"
    report = tmp_path / "r.json"
    result = check(fleet, "--diff", "--json", str(report), "--markdown", str(tmp_path / "r.md"))
    assert result.returncode == 2
    pods = json.loads(report.read_text())["pods"]
    assert {name: pod["status"] for name, pod in pods.items()} == dict.fromkeys(pods, "drift")
    assert MARKER not in result.stdout + report.read_text() + (tmp_path / "r.md").read_text()
    run = apply(fleet, "-vvv")
    assert run.returncode == 0, run.stderr
    assert MARKER not in run.stdout + run.stderr
    assert fleet.out("pod-1", "echo $HF_TOKEN").strip() == f"{MARKER}-rotated"
    assert check(fleet).returncode == 0


def test_a_missing_variable_stops_the_run_before_contact_naming_it(fleet, secrets):
    value = os.environ.pop(TOKEN_VAR)
    try:
        before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
        run = apply(fleet)
        result = check(fleet)
        assert {pod: exec_count(fleet, pod) for pod in fleet.pods} == before
    finally:
        os.environ[TOKEN_VAR] = value
    line = f"secrets.HF_TOKEN.from_env: the environment variable {TOKEN_VAR} is not set"
    assert run.returncode != 0 and line in run.stderr + run.stdout
    assert result.returncode == 1 and line in result.stdout + result.stderr
    assert "Traceback" not in run.stderr + result.stderr


def test_a_missing_file_stops_the_run_before_contact_naming_it(fleet, secrets):
    key = fleet.vars_dir / "wandb_key"
    text = key.read_text()
    key.unlink()
    try:
        run = apply(fleet)
    finally:
        key.write_text(text)
    assert run.returncode != 0
    line = "secrets.WANDB_API_KEY.from_file: cannot read the file it names: No such file"
    assert line in run.stderr + run.stdout
    assert MARKER not in run.stderr + run.stdout and "Traceback" not in run.stderr


def refused(fleet, pod_vars: dict) -> tuple[str, list[str]]:
    """Return the output of an apply and of a check with ``pod_vars`` as pod-1's host vars,
    and pod-1's error lines; assert that both failed before any pod was contacted."""
    fleet.host_vars("pod-1", pod_vars)
    try:
        before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
        run = apply(fleet)
        result = check(fleet)
        assert {pod: exec_count(fleet, pod) for pod in fleet.pods} == before
    finally:
        fleet.host_vars("pod-1", None)
    assert run.returncode != 0 and result.returncode == 1
    output = run.stdout + run.stderr + result.stdout + result.stderr
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if "host_vars/pod-1.yaml" in line]
    assert len(lines) == 2, lines  # one line from each
    return output, lines


@pytest.mark.parametrize(
    "source,key,message",
    [
        ({"from_env": PASTED}, "X.from_env", "the environment variable it names is not set"),
        ({"from_file": PASTED}, "X.from_file", "cannot read the file it names"),
        ({"from_env": PASTED, "from_file": PASTED}, "X", "give only one of: from_env, from_file"),
        ({PASTED: "x"}, "X", "unknown key (allowed: from_env, from_file)"),
        ({"from_env": f"{PASTED} oops"}, "X.from_env", "the value is not an environment variable"),
    ],
    ids=["from_env", "from_file", "both", "as_a_key", "with_a_space"],
)
def test_a_token_put_where_a_name_goes_is_never_echoed(fleet, secrets, source, key, message):
    output, lines = refused(fleet, {"secrets": {"X": source}})
    assert PASTED not in output
    assert lines and all(f"secrets.{key}: {message}" in line for line in lines), lines


def test_a_token_in_a_deploy_keys_source_is_never_echoed(fleet, secrets):
    url = "git@github.com:org/private.git"
    item = {"url": url, "ref": "main", "ssh_key": {"from_env": PASTED}}
    output, lines = refused(fleet, {"repos": {"/root/code/private": item}})
    assert PASTED not in output
    want = "repos./root/code/private.ssh_key.from_env: the environment variable it names"
    assert lines and all(want in line for line in lines), lines


@pytest.mark.parametrize(
    "url",
    [f"https://{PASTED}@github.com/org/r.git", f"https://x:{PASTED}@github.com/org/r"],
    ids=["as_user", "as_password"],  # the same names in every test process
)
def test_a_token_in_a_repository_url_is_refused_never_echoed(fleet, secrets, url):
    output, lines = refused(fleet, {"repos": {"/root/code/r": {"url": url, "ref": "main"}}})
    assert PASTED not in output
    want = "repos./root/code/r.url: the URL holds a credential"
    assert lines and all(want in line and "ssh_key" in line for line in lines), lines


def test_podstate_inventory_does_not_show_values(fleet, secrets):
    result = subprocess.run(
        [str(BIN / "podstate"), "inventory"],
        cwd=ROOT,
        env=fleet.env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert MARKER not in result.stdout + result.stderr


# A chown on pod-1's PATH (its container disk is its own) that stops install_secret.sh at
# its first command, writes the pids of that script's shell and its own, and waits: the test
# kills both, as an OOM kill or a dropped connection would, before the install could run its
# trap.
STOPPED = "/tmp/install-stopped"
STOPPING_CHOWN = f"""#!/bin/sh
case "$*" in
*.podstate-upload) echo "$PPID $$" >{STOPPED}.new && mv {STOPPED}.new {STOPPED}; exec sleep 600 ;;
esac
exec /usr/bin/chown "$@"
"""


def test_copies_left_by_a_run_killed_before_the_install_go_at_the_next_run(fleet, secrets):
    copies = f"{SECRETS_FILE}.podstate-upload {SECRETS_FILE}.podstate-check"
    assert apply(fleet, "--limit", "pod-1").returncode == 0
    fleet.out(
        "pod-1",
        "cat > /usr/local/sbin/chown && chmod 755 /usr/local/sbin/chown",
        STOPPING_CHOWN.encode(),
    )
    try:
        assert fleet.out("pod-1", "command -v chown").strip() == "/usr/local/sbin/chown"
        env = {**fleet.env(), TOKEN_VAR: f"{MARKER}-pasted-by-mistake"}
        run = subprocess.Popen(
            [
                str(BIN / "pyinfra"),
                "-y",
                "--limit",
                "pod-1",
                "inventories/pods.py",
                "deploy/pod.py",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        try:
            wait = (
                f"timeout 120 sh -c 'while [ ! -e {STOPPED} ]; do sleep 0.1; done'; cat {STOPPED}"
            )
            pids = fleet.out("pod-1", wait).split()
            assert len(pids) == 2, pids
            fleet.out("pod-1", f"kill -9 {' '.join(pids)}")  # the install dies untrapped
            _, stderr = run.communicate(timeout=300)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        assert run.returncode != 0, stderr
    finally:
        fleet.out("pod-1", f"rm -f /usr/local/sbin/chown {STOPPED}")
    assert fleet.ssh("pod-1", f"ls {copies}").returncode == 0  # the kill left both
    assert fleet.out("pod-1", "echo $HF_TOKEN").strip() != f"{MARKER}-pasted-by-mistake"
    # The state is as it was, so the next run has no secret to write; the copies (of a
    # value no longer wanted) are drift all the same, and go.
    result = check(fleet, "--limit", "pod-1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "copies left by an interrupted run" in result.stdout
    assert MARKER not in result.stdout + result.stderr
    again = apply(fleet, "--limit", "pod-1")
    assert again.returncode == 0, again.stderr
    assert fleet.out("pod-1", f"ls -A {SECRETS_FILE.rsplit('/', 1)[0]}").split() == ["env.sh"]
    assert check(fleet, "--limit", "pod-1").returncode == 0
