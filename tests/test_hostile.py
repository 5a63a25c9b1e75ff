"""Hostile values arrive literally in every shell kind, and nothing in them ever runs."""

import base64
from pathlib import Path
from shlex import quote

import pytest

from podstate.sandbox import inside
from tests.e2e import apply
from tests.test_notebooks import IPYTHON

EVIL = {
    "SUBST": "$(touch /tmp/owned-subst)",
    "BACKTICK": "`touch /tmp/owned-backtick`",
    "QUOTES": "a\"b'c",
    "SEMICOLON": "x; touch /tmp/owned-semicolon",
    "NEWLINE": "line 1\nline 2 $(touch /tmp/owned-newline)\n",
    "LONG": ("'\"$`\\" * 2000) + "$(touch /tmp/owned-long)",
    "EMPTY": "",
}
SHELLS = ["{}", "bash -lc '{}'", "bash -ic '{}' 2>/dev/null"]
OWNED = "ls /tmp/owned-* 2>/dev/null | wc -l"


@pytest.fixture(scope="module")
def hostile(fleet):
    """The fleet converged with hostile env values and a PATH entry with a space."""
    for pod in fleet.pods:
        fleet.host_vars(
            pod,
            {
                "env": EVIL,
                "path": ["/opt/my tools/bin", "/opt/venv/bin"],
                "shm": {"min_size": "32M"},
            },
        )
    run = apply(fleet)
    assert run.returncode == 0, run.stderr
    return fleet


@pytest.mark.parametrize("pod", ["pod-1", "pod-4"])
@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("name", EVIL)
def test_values_arrive_byte_for_byte(hostile, pod, shell, name):
    command = shell.format(f'printf %s "${name}" | base64 -w0')
    printed = hostile.out(pod, command).strip().splitlines()[-1:] or [""]
    assert base64.b64decode(printed[0]).decode() == EVIL[name]


@pytest.mark.parametrize("pod", ["pod-1", "pod-2", "pod-3", "pod-4", "pod-5"])
def test_nothing_ran_on_the_pod(hostile, pod):
    for shell in SHELLS:
        hostile.out(pod, shell.format("true"))
    assert hostile.out(pod, OWNED).strip() == "0"
    assert inside.pod_exec(pod, OWNED).stdout.strip() == "0"


def test_nothing_ran_on_the_control_machine(hostile):
    assert not list(Path("/tmp").glob("owned-*"))


@pytest.mark.parametrize("shell", SHELLS)
def test_path_entries_are_prepended_once_in_order(hostile, shell):
    path = hostile.out("pod-2", shell.format('echo "$PATH"')).strip().splitlines()[-1]
    entries = path.split(":")
    assert entries[:2] == ["/opt/my tools/bin", "/opt/venv/bin"]
    assert entries.count("/opt/venv/bin") == 1
    assert "/usr/bin" in entries


def test_second_apply_is_quiet(hostile):
    again = apply(hostile)
    assert again.returncode == 0
    assert again.hosts("success") == set()


@pytest.fixture(scope="module")
def kernels(hostile):
    """IPython on pod-1, as tests/test_notebooks.py installs it."""
    from tests.test_notebooks import ipython_tarball

    hostile.out("pod-1", "mkdir -p /opt/ipython && tar -xzf - -C /opt/ipython", ipython_tarball())
    return hostile


@pytest.mark.parametrize("name", EVIL)
def test_values_arrive_byte_for_byte_in_a_notebook_kernel(kernels, name):
    """A kernel started with none of them gets them from podstate's startup file."""
    code = (
        f"import base64, os; print('=' + base64.b64encode(os.environ[{name!r}].encode()).decode())"
    )
    command = f"env -i HOME=/root {IPYTHON} -c {quote(code)}"
    encoded = kernels.out("pod-1", command).strip().splitlines()[-1]
    assert encoded.startswith("=") and base64.b64decode(encoded[1:]).decode() == EVIL[name]
    assert kernels.out("pod-1", OWNED).strip() == "0"
