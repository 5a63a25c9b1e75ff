"""End to end: the profile reaches every kind of shell, whatever root's login shell is.

pod-1 keeps bash; pod-2's root logs in with zsh (as oh-my-zsh images set it up); pod-3's
with fish, which podstate cannot hook and must report instead of calling the pod ok.
"""

import shutil

import pytest

from tests.e2e import apply, check

SANDBOX = {"pods": 3}
VALUES = 'echo "$TMPDIR|$PIP_CACHE_DIR|$UV_CACHE_DIR|$PYTHONUNBUFFERED"'
EXPECTED = "/scratch/tmp|/scratch/pip|/scratch/uv|1"
SHELLS = {
    "bash": {
        "ssh pod CMD": "{}",
        "bash -lc": "bash -lc '{}'",
        "bash -ic": "bash -ic '{}' 2>/dev/null",
    },
    "zsh": {
        "ssh pod CMD": "{}",
        "zsh -lc": "zsh -lc '{}'",
        "zsh -ic": "zsh -ic '{}' 2>/dev/null",
        "bash -ic": "bash -ic '{}' 2>/dev/null",
    },
}
POD = {"bash": "pod-1", "zsh": "pod-2"}

pytestmark = pytest.mark.skipif(
    not (shutil.which("zsh") and shutil.which("fish")), reason="needs zsh and fish installed"
)


def login_shell(fleet, pod: str, shell: str) -> None:
    """Make ``shell`` root's login shell on ``pod``, as ``chsh`` would."""
    fleet.out(pod, f"sed -i 's|^\\(root:.*:\\)[^:]*$|\\1{shell}|' /etc/passwd")
    assert fleet.out(pod, "getent passwd root").strip().endswith(f":{shell}")


@pytest.fixture(scope="module")
def converged(fleet):
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    login_shell(fleet, "pod-2", shutil.which("zsh"))
    login_shell(fleet, "pod-3", shutil.which("fish"))
    assert fleet.out("pod-2", "echo $0").strip().endswith("zsh")
    return apply(fleet)


def test_only_the_fish_pod_fails(converged):
    assert converged.returncode == 1
    assert converged.hosts("error") == {"pod-3"}
    assert "Traceback" not in converged.stderr


def test_fish_is_named_with_what_to_do(converged):
    line = next(line for line in converged.stderr.splitlines() if "violation" in line)
    assert "[pod-3]" in line
    assert "the login shell of root is " + shutil.which("fish") in line
    assert "chsh -s /bin/bash root" in line


@pytest.mark.parametrize(
    "shell, kind", [(shell, kind) for shell, kinds in SHELLS.items() for kind in kinds]
)
def test_every_shell_kind_sees_the_profile(fleet, converged, shell, kind):
    command = SHELLS[shell][kind].format(VALUES)
    assert fleet.out(POD[shell], command).strip().splitlines()[-1] == EXPECTED


def test_zshenv_has_the_hook_first_and_last(fleet, converged):
    zshenv = fleet.out("pod-2", "cat ~/.zshenv")
    assert zshenv.startswith("# >>> podstate >>>") and zshenv.endswith("# <<< podstate <<<\n")
    assert zshenv.count(". /etc/profile.d/podstate.sh") == 2


def test_second_apply_is_quiet_and_check_reports_fish(fleet, converged, tmp_path):
    again = apply(fleet)
    assert again.hosts("success") == set()
    result = check(fleet)
    lines = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()[:3]}
    assert lines == {"pod-1": "ok", "pod-2": "ok", "pod-3": "violation"}
    assert result.returncode == 1


def test_a_set_e_script_sourcing_bashrc_survives_a_missing_profile(fleet, converged):
    """A script under ``set -e`` that sources ~/.bashrc goes on when the profile is gone (a
    restart without the boot hook wipes /etc/profile.d, not the hooks of a ~/.bashrc on the
    volume): podstate's hook must not be the failing command that stops it."""
    profile = "/etc/profile.d/podstate.sh"
    fleet.out("pod-1", f"mv {profile} /root/profile.moved")
    try:
        result = fleet.ssh("pod-1", "bash -ec '. ~/.bashrc; echo survived'")
    finally:
        fleet.out("pod-1", f"mv /root/profile.moved {profile}")
    assert (result.returncode, result.stdout.strip()) == (0, "survived"), result.stderr
