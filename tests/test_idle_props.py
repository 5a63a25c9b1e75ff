"""Work of any kind a user starts is never read idle: generated combinations of a job (a CPU
loop, a sleeping process, another user's, one that daemonises, one that wrote a file, a
burst that ends before the next probe), how it is detached from its SSH session (nohup,
setsid, a plain ``&``) and the namespaces it enters (``unshare`` of a user namespace alone
or with a mount, network, UTS, IPC or pid namespace), each started on a pod whose idle
period a check has just found quiet. The check after it must say in use, or unknown (for
what podstate cannot read): never idle, so the watch never stops the pod under it.

The pod is a sandbox pod in a pid namespace of its own, as a container is: its /proc lists
every process of the pod, whatever namespace it entered.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st

from podstate.sandbox import inside
from tests.e2e import check

SANDBOX = {"pods": 1}
POD = "pod-1"  # no CAP_SYS_ADMIN: namespaces come with a user namespace, as in a container
TAG = "podstate-idle-prop"
SLEEP = "sleep 6061"
# what each job runs (``sh -c JOB TAG``: every process of it carries TAG or SLEEP)
JOBS = {
    "cpu": "while :; do :; done",
    "sleep": f"{SLEEP}; :",
    "daemon": f"({SLEEP} &) &",
    "other user": f"setpriv --reuid=65534 --regid=65534 --clear-groups {SLEEP}",
    "wrote": f"head -c 50000000 /dev/zero > /tmp/wrote-{TAG[::-1]}; {SLEEP}",
    # a few seconds of CPU, then it ends: it is gone before the check (its CPU is its
    # reaper's)
    "burst": "i=0; while [ $i -lt 5000000 ]; do i=$((i + 1)); done",
}
NAMESPACES = ["", "unshare -Ur", "unshare -Urm", "unshare -Urn", "unshare -Uru", "unshare -Uri",
              "unshare -Urpf", "unshare -Urpf --mount-proc"]  # fmt: skip
DETACH = ["nohup", "setsid", ""]
STARTED = f"[{SLEEP[0]}]{SLEEP[1:]}|[w]hile :"


def _entry(fleet, tmp_path) -> dict:
    report = tmp_path / "r.json"
    result = check(fleet, "--json", str(report))
    assert report.exists(), result.stdout + result.stderr
    return json.loads(report.read_text())["pods"][POD]


def _quiet(fleet, tmp_path) -> None:
    """Return once a check found the pod idle (the checks before begin its period anew for
    what the last example left)."""
    for _ in range(4):
        entry = _entry(fleet, tmp_path)
        if entry["idle"] is True:
            return
    raise AssertionError(entry["activity"])


def _end_all() -> None:
    """End every process the examples started, and wait until none is left."""
    match = f"-f '[{TAG[0]}]{TAG[1:]}|{STARTED}'"
    inside.pod_exec(
        POD, f"pkill -9 {match}; while pgrep {match} >/dev/null; do sleep 0.05; done; "
        f"rm -f /tmp/wrote-{TAG[::-1]}",
    )  # fmt: skip


def test_the_pod_reads_quiet_with_nothing_started(fleet, tmp_path):
    inside.gpus_idle(POD)
    _quiet(fleet, tmp_path)
    assert _entry(fleet, tmp_path)["idle"] is True  # the property below can fail


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # each example takes seconds
)
@given(job=st.sampled_from(sorted(JOBS)), namespace=st.sampled_from(NAMESPACES),
       detach=st.sampled_from(DETACH))  # fmt: skip
# the audit's: a job in a mount namespace of its own was not counted, and the pod was idle
@example(job="sleep", namespace="unshare -Urm", detach="nohup")
@example(job="cpu", namespace="unshare -Urm", detach="setsid")
def test_work_of_any_kind_is_never_read_idle(fleet, tmp_path, job, namespace, detach):
    # a job that daemonises as the first process of a pid namespace ends with it at once;
    # in a user namespace that maps root alone there is no other user to become
    assume(not (job == "daemon" and "pf" in namespace))
    assume(not (job == "other user" and "-U" in namespace))
    inside.gpus_idle(POD)
    _quiet(fleet, tmp_path)
    try:
        command = f"{detach} {namespace} sh -c '{JOBS[job]}' {TAG}".strip()
        pid = fleet.out(POD, f"{command} </dev/null >/dev/null 2>&1 & echo $!").strip()
        if job == "burst":  # the check comes once it has ended
            fleet.out(POD, f"while [ -e /proc/{pid} ]; do sleep 0.05; done")
        else:  # once it runs (this fails where the job could not start)
            fleet.out(POD, f"i=0; until pgrep -f '{STARTED}' >/dev/null; do sleep 0.05; "
                           "i=$((i + 1)); [ $i -lt 200 ] || exit 1; done")  # fmt: skip
        entry = _entry(fleet, tmp_path)
    finally:
        _end_all()
    wanted = None if job == "other user" else False
    assert entry["idle"] is wanted, (command, entry["activity"])
