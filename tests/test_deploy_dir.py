"""End to end: deploy/ is a directory of deploy files, run together, with podstate's lock and
report spanning them; a team's own files are part of the drift check.

The project is a copy of the working tree (as a clone has it) with two team files:
``deploy/00-team.py`` sorts before podstate's ``deploy/pod.py``, ``deploy/zz-team.py`` after.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml

from tests.e2e import ROOT, apply, check, exec_count

SANDBOX = {"pods": 3}
TEAM_FIRST = '''"""A team's own operations, before podstate's."""
from pyinfra.operations import files

files.line(name="Team config", path="/etc/team.conf", line="team=ml")
'''
TEAM_LAST = '''"""A team's own operations, after podstate's."""
from pyinfra.operations import files

files.directory(name="Team workdir", path="/opt/team", mode="750")
'''
LOCK_SEEN = """from pyinfra.operations import server

server.shell(
    name="Lock seen {0}",
    commands=["cat /run/podstate.lock/owner > /root/lock-{0} 2>&1 || echo none > /root/lock-{0}"],
)
"""
BROKEN = """from pyinfra import host
from pyinfra.operations import files

if host.name == "pod-2":
    raise RuntimeError("no team config for this pod")
files.directory(name="Broken team dir", path="/opt/broken")
"""


def copy_project(target: Path) -> Path:
    """Copy the files a clone of the working tree has (tracked and new, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


@pytest.fixture(scope="module")
def project(fleet, tmp_path_factory):
    root = copy_project(tmp_path_factory.mktemp("project"))
    (root / "deploy" / "00-team.py").write_text(TEAM_FIRST)
    (root / "deploy" / "zz-team.py").write_text(TEAM_LAST)
    fleet.host_vars("pod-3", {"shm": {"min_size": "32M"}})
    return root


@pytest.fixture(scope="module")
def applied(fleet, project):
    run = apply(fleet, cwd=project)
    assert run.returncode == 0, run.stderr
    return run


def operation_names(run) -> list[str]:
    return [op["name"] for op in run.json["plan"]]


def test_every_file_runs_in_name_order_between_the_lock_and_the_report(applied):
    names = operation_names(applied)
    assert names[0] == "Pod lock for other deploy files"
    assert names[-2:] == ["Release the pod lock", "Report what apply cannot fix"]
    team_first, team_last = names.index("Team config"), names.index("Team workdir")
    podstate = [i for i, name in enumerate(names) if name.startswith("Environment | ")]
    assert team_first < min(podstate) and max(podstate) < team_last


def test_team_changes_reached_every_pod_and_no_lock_is_left(fleet, applied):
    for pod in fleet.pods:
        assert fleet.out(pod, "cat /etc/team.conf") == "team=ml\n"
        assert fleet.out(pod, "stat -c %a /opt/team").strip() == "750"
        assert fleet.ssh(pod, "test -e /run/podstate.lock").returncode == 1


def test_converged_apply_costs_the_probe_and_the_team_facts(fleet, project, applied):
    before = {pod: exec_count(fleet, pod) for pod in fleet.pods}
    again = apply(fleet, cwd=project)
    assert again.returncode == 0, again.stderr
    assert again.hosts("success") == set()
    # podstate's probe, then one fact for each team operation (files.line, files.directory)
    assert {pod: exec_count(fleet, pod) - before[pod] for pod in fleet.pods} == {
        pod: 3 for pod in fleet.pods
    }


def test_check_plans_every_deploy_file_by_default(fleet, project, applied, tmp_path):
    result = check(fleet, "--json", str(tmp_path / "r.json"), cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    statuses = {
        n: p["status"] for n, p in json.loads((tmp_path / "r.json").read_text())["pods"].items()
    }
    assert statuses == {pod: "ok" for pod in fleet.pods}


def test_a_team_change_reverted_by_hand_is_drift_on_that_pod_alone(
    fleet, project, applied, tmp_path
):
    fleet.out("pod-2", "rm /etc/team.conf")
    report, xml = tmp_path / "r.json", tmp_path / "r.xml"
    result = check(fleet, "--json", str(report), "--junit", str(xml), "--diff", cwd=project)
    assert result.returncode == 2, result.stdout + result.stderr
    pods = json.loads(report.read_text())["pods"]
    assert {n: p["status"] for n, p in pods.items()} == {
        "pod-1": "ok",
        "pod-2": "drift",
        "pod-3": "ok",
    }
    assert pods["pod-2"]["changes"] == [
        {"role": "deploy/00-team.py", "operation": "Team config", "file": "deploy/00-team.py"}
    ]
    assert "would change: deploy/00-team.py | Team config" in result.stdout
    failed = [
        (case.classname, case.name)
        for suite in JUnitXml.fromfile(str(xml))
        for case in suite
        if any(isinstance(r, Failure) for r in case.result)
    ]
    assert failed == [("pod-2", "deploy/00-team.py")]
    assert apply(fleet, cwd=project).hosts("success") == {"pod-2"}


def test_the_lock_covers_changes_of_files_before_and_after_podstates(
    fleet, project, applied, tmp_path
):
    for where in ("first", "last"):
        (tmp_path / f"{where}.py").write_text(LOCK_SEEN.format(where))
    run = apply(
        fleet,
        deploys=[str(tmp_path / "first.py"), "deploy/pod.py", str(tmp_path / "last.py")],
        cwd=project,
    )
    assert run.returncode == 0, run.stderr
    for pod in fleet.pods:
        seen = fleet.out(pod, "cat /root/lock-first /root/lock-last").splitlines()
        assert len(seen) == 2 and all(" pid " in line for line in seen), seen
        assert fleet.ssh(pod, "test -e /run/podstate.lock").returncode == 1


def test_a_team_file_failing_on_one_pod_fails_only_that_pod(fleet, project, applied, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(BROKEN)
    report = tmp_path / "r.json"
    deploys = ["--deploy", "deploy/pod.py", "--deploy", str(broken)]
    result = check(fleet, *deploys, "--json", str(report), cwd=project)
    pods = json.loads(report.read_text())["pods"]
    assert pods["pod-2"]["status"] == "error"
    assert pods["pod-2"]["error"] == (
        f"{broken}, line 5: RuntimeError: no team config for this pod"
    )
    assert pods["pod-1"]["status"] == pods["pod-3"]["status"] == "drift"
    assert "Traceback" not in result.stdout + result.stderr
    # The apply plans every file before it changes anything: it stops, and no pod is touched.
    run = apply(fleet, deploys=["deploy/pod.py", str(broken)], cwd=project)
    assert run.returncode != 0 and "no team config for this pod" in run.stderr
    for pod in fleet.pods:
        assert fleet.ssh(pod, "test -e /opt/broken").returncode == 1


def test_operations_ordered_both_ways_fail_the_check_as_they_fail_the_apply(
    fleet, project, applied, tmp_path
):
    """A team file that plans two operations in one order on pod-1 and the other on pod-2:
    pyinfra cannot order the run (a cycle), so the apply fails; the check says so too, on
    every pod, rather than that they would change."""
    both_ways = tmp_path / "both_ways.py"
    both_ways.write_text(
        "from pyinfra import host\nfrom pyinfra.operations import server\n"
        "first = lambda: server.shell(name='first', commands=['true'])\n"
        "second = lambda: server.shell(name='second', commands=['true'])\n"
        "for call in ([first, second] if host.name == 'pod-1' else [second, first]):\n"
        "    call()\n"
    )
    report = tmp_path / "r.json"
    deploys = ["--deploy", "deploy/pod.py", "--deploy", str(both_ways)]
    result = check(fleet, *deploys, "--json", str(report), cwd=project)
    pods = json.loads(report.read_text())["pods"]
    assert {p["status"] for p in pods.values()} == {"error"}, pods
    assert "Cycle detected in operation ordering" in pods["pod-1"]["error"]
    assert result.returncode != 0 and "Traceback" not in result.stdout + result.stderr
    run = apply(fleet, deploys=["deploy/pod.py", str(both_ways)], cwd=project)
    assert run.returncode != 0 and "Cycle detected" in run.stdout + run.stderr


def test_a_regular_install_runs_the_deploy_and_the_check_from_a_clone(fleet, project, tmp_path):
    """``pip install .`` (a built wheel, not editable) into a fresh venv; its pyinfra and
    podstate run from the copy of the repository."""
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # The dependencies come from the test environment, which holds podstate only as an
    # editable finder: the fresh venv sees the dependencies, not this checkout's podstate.
    site = next((venv / "lib").glob("python*/site-packages"))
    deps = next(Path(p) for p in sys.path if p.endswith("site-packages"))
    (site / "deps.pth").write_text(f"{deps}\n")
    wheel = next(wheels.glob("podstate-*.whl"))
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    launcher = venv / "bin" / "pyinfra"  # pyinfra's own script, for the fresh interpreter
    launcher.write_text(
        f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom pyinfra_cli.main import main\n"
        "sys.exit(main())\n"
    )
    launcher.chmod(0o755)
    where = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import podstate.roles, podstate.desired.spec as s; print(s.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert str(site) in where.stdout, where.stderr
    run = apply(fleet, cwd=project, bin_dir=venv / "bin")
    assert run.returncode == 0, run.stderr
    result = check(fleet, cwd=project, bin_dir=venv / "bin")
    assert result.returncode == 0, result.stdout + result.stderr
