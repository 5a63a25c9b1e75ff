"""A process the probe cannot read is another container's only when its mount table or its
capabilities say so (scripts/work.sh's work_other); else it makes idle unknown.

work_other reads the process's files from the folder it is given, so these tests hand it
folders shaped like /proc/PID: a mountinfo and a status. The probe's own root and first
mount (``w_root``, ``w_first``) are set as work() sets them from its own mountinfo.
"""

from __future__ import annotations

import subprocess

import pytest

from podstate.shell import script

OURS = "0:43 / /"  # the container's overlay, its first mount, at /
OUR_ROOT = "0:43 /"
BOUNDS = "00000000a80425fb"  # Docker's default capabilities
ROOT_LINE = "113 67 0:43 / / rw,relatime - overlay overlay rw"
HOST_FIRST = "22 27 0:21 / /proc rw,relatime - proc proc rw"
HOST_ROOT = "27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw"


def _other(shell: str, folder, mountinfo: list[str], caps: str = BOUNDS, first: str = OURS):
    """Return work_other's answer (0: another container's, 1: not known to be) for a process
    whose /proc folder holds ``mountinfo`` and a status with CapBnd ``caps``, and the number
    of reads the shell made of a redirected file (on its stdin, fd 0)."""
    (folder / "mountinfo").write_text("".join(f"{line}\n" for line in mountinfo))
    (folder / "status").write_text(f"Name:\tsleep\nCapEff:\t0\nCapBnd:\t{caps}\nSeccomp:\t2\n")
    program = "\n".join(
        [
            script("enc.sh"),
            script("work.sh"),
            f"w_root='{OUR_ROOT}' w_first='{first}' w_bnd={BOUNDS}; work_other {folder}; echo $?",
        ]
    )
    done = subprocess.run(
        ["strace", "-e", "trace=read", "-o", str(folder / "trace"), shell, "-c", program],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    trace = (folder / "trace").read_text().splitlines()
    return int(done.stdout), sum(line.startswith("read(0,") for line in trace)


@pytest.fixture
def folder(tmp_path):
    process = tmp_path / "proc-1234"
    process.mkdir()
    return process


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_another_first_mount_is_another_containers_without_reading_the_rest(shell, folder):
    mounts = [f"{30 + i} 27 0:{50 + i} / /mnt/{i} rw - tmpfs t rw" for i in range(40)]
    long_table = [HOST_FIRST, HOST_ROOT, *mounts]
    answer, read = _other(shell, folder, long_table)
    assert answer == 0
    if shell == "dash":  # which reads a byte at a time: the first line, none of the rest
        assert read == len(HOST_FIRST) + 1, read


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_a_table_copied_from_ours_is_read_whole(shell, folder):
    # our first mount first, as a namespace copied from ours has it, then another root over it
    assert _other(shell, folder, [ROOT_LINE, HOST_ROOT])[0] == 0
    # our first mount and root, capabilities within ours: not known to be another's
    assert _other(shell, folder, [ROOT_LINE, HOST_FIRST])[0] == 1
    # our root, a capability out of our bounding set: another's
    assert _other(shell, folder, [ROOT_LINE], caps="000001ffffffffff")[0] == 0


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_where_our_first_mount_is_not_our_root_the_whole_table_decides(shell, folder):
    """A container whose first mount is not its root (a mount over /) cannot tell another's
    from the first mount: a table that ends in our root is not known to be another's."""
    answer, _ = _other(shell, folder, [HOST_FIRST, ROOT_LINE], first="0:21 / /proc")
    assert answer == 1
