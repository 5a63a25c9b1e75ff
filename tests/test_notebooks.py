"""End to end: the declared environment reaches notebook kernels, and processes that were
running before the apply with RunPod's values are reported, never touched.

pod-1 runs a stand-in Jupyter server (a process named ``jupyter-lab``) started, as RunPod's
start script starts it, with the container's /workspace/.cache values; pod-2 runs nothing.
"""

import importlib.metadata
import io
import json
import re
import tarfile

import pytest

from tests.e2e import apply, check

SANDBOX = {"pods": 2}
STALE = "PIP_CACHE_DIR=/workspace/.cache/pip UV_CACHE_DIR=/workspace/.cache/uv TMPDIR=/tmp"
SERVER = (
    "cp /bin/sleep /tmp/jupyter-lab; {env} setsid /tmp/jupyter-lab infinity "
    ">/dev/null 2>&1 </dev/null & while ! pidof jupyter-lab >/dev/null; do sleep 0.05; done; "
    "pidof jupyter-lab"
)
DECLARED = "/scratch/tmp|/scratch/pip|/scratch/uv"
IPYTHON = "PYTHONPATH=/opt/ipython python3 -m IPython --no-banner"  # a real IPython, on the pod
KERNEL = (
    f"env {STALE} {IPYTHON} -c "
    '\'import os; print("|".join(os.environ[v] for v in ("TMPDIR", "PIP_CACHE_DIR", '
    '"UV_CACHE_DIR")))\''
)


def ipython_tarball() -> bytes:
    """Return IPython and what it needs, as installed for these tests, as a .tar.gz of their
    site-packages files: the pods run it with their own python3, offline."""
    out = io.BytesIO()
    seen: set[str] = set()
    todo = ["ipython"]
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        while todo:
            name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
            if name in seen:
                continue
            seen.add(name)
            try:
                dist = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                continue
            todo += [
                re.match(r"[A-Za-z0-9._-]+", r)[0]
                for r in dist.requires or []
                if "extra ==" not in r
            ]
            for file in dist.files or []:
                if file.parts[0] != ".." and dist.locate_file(file).is_file():
                    tar.add(dist.locate_file(file), arcname=str(file))
    return out.getvalue()


@pytest.fixture(scope="module")
def stale(fleet, tmp_path_factory):
    tarball = ipython_tarball()
    for pod in fleet.pods:
        fleet.out(pod, "mkdir -p /opt/ipython && tar -xzf - -C /opt/ipython", data=tarball)
    pid = fleet.out("pod-1", SERVER.format(env=f"env {STALE}")).strip()
    report = tmp_path_factory.mktemp("check") / "report.json"
    run = apply(fleet)
    check(fleet, "--json", str(report))
    return fleet, pid, run, json.loads(report.read_text())


def test_a_stale_server_is_reported_on_its_pod_alone(stale):
    _, pid, run, document = stale
    message = (
        f"jupyter-lab (pid {pid}) still has PIP_CACHE_DIR=/workspace/.cache/pip, "
        "TMPDIR=/tmp, UV_CACHE_DIR=/workspace/.cache/uv; restart it to pick up "
        "PIP_CACHE_DIR=/scratch/pip, TMPDIR=/scratch/tmp, UV_CACHE_DIR=/scratch/uv"
    )
    assert run.returncode == 1
    assert run.hosts("error") == {"pod-1"}
    assert f"env.stale_process: {message}" in run.stderr
    violations = document["pods"]["pod-1"]["violations"]
    assert [(v["id"], v["message"]) for v in violations] == [("env.stale_process", message)]
    assert document["pods"]["pod-2"]["status"] == "ok"


def test_podstate_never_touches_the_stale_process(stale):
    fleet, pid, _, _ = stale
    assert fleet.out("pod-1", "pidof jupyter-lab").strip() == pid


def test_a_kernel_started_by_the_stale_server_gets_the_declared_values(stale):
    fleet, *_ = stale
    assert fleet.out("pod-1", KERNEL).strip().splitlines()[-1] == DECLARED


def test_a_kernel_without_the_declared_file_starts_unchanged(stale):
    fleet, *_ = stale
    fleet.out("pod-2", "mv /etc/profile.d/podstate.json /root/declared.json")
    try:
        out = fleet.out("pod-2", KERNEL.replace("TMPDIR=/tmp", "TMPDIR=/var/tmp"))
        assert out.strip().splitlines()[-1] == (
            "/var/tmp|/workspace/.cache/pip|/workspace/.cache/uv"
        )
    finally:
        fleet.out("pod-2", "mv /root/declared.json /etc/profile.d/podstate.json")


def test_restarted_with_a_clean_environment_the_pod_is_ok(stale, tmp_path):
    fleet, *_ = stale
    fleet.out("pod-1", "kill $(pidof jupyter-lab); while pidof jupyter-lab; do sleep 0.05; done")
    fleet.out(
        "pod-1", SERVER.format(env="env -u PIP_CACHE_DIR -u UV_CACHE_DIR TMPDIR=/scratch/tmp")
    )
    result = check(fleet, "--json", str(tmp_path / "r.json"))
    # no violation now; what is left is the ready marker the failed apply did not leave
    pending = json.loads((tmp_path / "r.json").read_text())["pods"]["pod-1"]["changes"]
    assert {c["role"] for c in pending} <= {"Ready"}, result.stdout
    assert apply(fleet, "--limit", "pod-1").returncode == 0
    result = check(fleet, "--json", str(tmp_path / "r.json"))
    assert result.returncode == 0, result.stdout
    fleet.out("pod-1", "kill $(pidof jupyter-lab)")


def test_a_kernel_gets_secrets_from_their_root_only_file(stale, monkeypatch):
    fleet, *_ = stale
    marker = "nb-secret-5f0c1e"
    monkeypatch.setenv("PODSTATE_TEST_NB_TOKEN", f"{marker} 'quoted'")
    fleet.host_vars("pod-2", {"secrets": {"HF_TOKEN": {"from_env": "PODSTATE_TEST_NB_TOKEN"}}})
    try:
        assert apply(fleet, "--limit", "pod-2").returncode == 0
        code = "'import os; print(os.environ[\"HF_TOKEN\"])'"
        assert fleet.out("pod-2", f"env -i HOME=/root {IPYTHON} -c {code}").splitlines()[-1] == (
            f"{marker} 'quoted'"
        )
        startup = "/etc/profile.d/podstate.json ~/.ipython/profile_default/startup/00-podstate.py"
        assert marker not in fleet.out("pod-2", f"cat {startup}")
    finally:
        fleet.host_vars("pod-2", None)
