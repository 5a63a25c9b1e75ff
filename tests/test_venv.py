"""The venv role: a ready venv on local disk, idempotent, atomic, restorable from a snapshot.

Unit tests cover the spec, the probe's venv lines and the role's pure helpers. End-to-end
tests run the real pyinfra CLI against sandbox pods, offline: the packages are tiny wheels
and a slow-building sdist made here (tests/fixtures/venv/wheels.py), copied into each pod's
/opt/wheelhouse and installed with ``find_links`` and ``no_index``. The pods have no uv, so
the first build uploads the control machine's. Pods used: pod-5 (sshfs /workspace, local
scratch directory; a small tmpfs mounted for the full-disk cases), pod-4 (privileged: tmpfs
scratch, so uv copies from its cache), pod-1 (the network-filesystem violation, then made
to report an arm64 machine: uv comes from pip and a uv wheel made here).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import astuple, replace
from pathlib import Path

import pytest

from podstate import gzcache
from podstate.desired.errors import SpecError
from podstate.desired.load import VarsDir
from podstate.desired.spec import resolve
from podstate.facts import venv as venv_facts
from podstate.facts.probe import parse_probe, program
from podstate.facts.venv import Python, Snapshot
from podstate.operations import venv as venv_ops
from podstate.roles.venv import distributions, fingerprint, recorded, required, seed_mode
from podstate.shell import script
from tests import probing, typed_state
from tests.e2e import BIN, ROOT, Fleet, apply, check, exec_count, write_vars
from tests.fixtures.venv.wheels import (
    binary_wheel,
    make_wheel,
    slow_sdist,
    tar_bytes,
    wheelhouse,
)

VERSIONED = re.compile(r"\.venv-[0-9a-f]{12}")
PODS = ["pod-1", "pod-4", "pod-5"]

# --- unit tests ---------------------------------------------------------------------------


def test_spec_reads_requirements_relative_to_the_vars_dir(tmp_path):
    (tmp_path / "files").mkdir()
    (tmp_path / "files/req.txt").write_text("tinylib>=1  # pinned elsewhere\n")
    venv = {
        "path": "/opt//venv/",
        "packages": ["numpy ==2.1.3"],
        "requirements": "files/req.txt",
        "find_links": ["/opt/wh/../wheelhouse", "https://example.org/wheels"],
        "snapshot": "/workspace/.podstate/venv/",
    }
    write_vars(tmp_path, "group_vars/all.yaml", {"venv": venv})
    state = resolve(VarsDir(tmp_path).layers([], "p"), "p")
    assert state["venv"] == {
        "path": "/opt/venv",
        "python": "python3",
        "packages": ["numpy ==2.1.3"],
        "requirements": "tinylib>=1  # pinned elsewhere\n",
        "requirements_file": "files/req.txt",
        "installer": "uv",
        "index_url": None,
        "extra_index_urls": [],
        "find_links": ["/opt/wheelhouse", "https://example.org/wheels"],
        "no_index": False,
        "snapshot": "/workspace/.podstate/venv",
        "seed": True,
        "compile": True,
    }


@pytest.mark.parametrize(
    "venv,content,expected",
    [
        (
            {"path": "/opt/venv", "requirements": "missing.txt"},
            None,
            r"^group_vars/all.yaml: venv.requirements: cannot read missing.txt \(.*\): "
            r"No such file or directory \(pod p\)$",
        ),
        (
            {"path": "/opt/venv", "requirements": "req.txt"},
            "numpy\n-r other.txt\n",
            r"^group_vars/all.yaml: venv.requirements: req.txt line 2: -r names another file",
        ),
        (
            {"path": "/opt/venv", "installer": "conda"},
            None,
            r"venv.installer: 'conda' is not one of: uv, pip \(pod p\)$",
        ),
        ({"path": "/opt/venv", "pakages": []}, None, r"venv.pakages: unknown key"),
        ({"packages": ["x"]}, None, r"venv: 'path' is required"),
        (
            {"path": "/opt/venv", "packages": ["--index-url=http://evil"]},
            None,
            r"venv.packages.0: '--index-url=http://evil' is not a requirement specifier",
        ),
        ({"path": "/opt/venv", "python": "python3; rm -rf /"}, None, r"venv.python: .* is not"),
        ({"path": "/"}, None, r"venv.path: must name a directory below /"),
        ({"path": "/opt/venv", "no_index": "yes"}, None, r"expected true or false"),
    ],
)
def test_spec_errors_name_file_and_key(tmp_path, venv, content, expected):
    write_vars(tmp_path, "group_vars/all.yaml", {"venv": venv})
    if content is not None:
        (tmp_path / "req.txt").write_text(content)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(SpecError) as error:
            resolve(VarsDir(Path("." if content is None else tmp_path)).layers([], "p"), "p")
    finally:
        os.chdir(cwd)
    assert re.search(expected, str(error.value)), str(error.value)
    assert "\n" not in str(error.value)


def test_distributions_are_the_names_to_verify():
    requirements = (
        "# comment\nTinyLib[extra] >= 1.0 \\\n  --hash=sha256:00\n-e ./local\n"
        "pkg @ https://example.org/pkg.whl\nwin ; sys_platform == 'win32'\n"
        "https://example.org/x.whl\n./path\n--index-url https://example.org\n"
    )
    assert distributions(["numpy==2.1.3", "numpy"], requirements) == [
        "numpy",
        "TinyLib",
        "pkg",
    ]


def test_fingerprint_ignores_package_order_but_not_the_interpreter():
    venv = typed_state.venv(packages=["a", "b"])
    python = Python("/usr/bin/python3.11", "3.11.2 (main)", ensurepip=True)
    digest, record = fingerprint(venv, python)
    assert recorded(record) == digest and len(digest) == 64
    assert fingerprint(replace(venv, packages=("b", "a", "a")), python)[0] == digest
    assert fingerprint(venv, replace(python, version="3.11.9 (main)"))[0] != digest
    assert fingerprint(replace(venv, no_index=True), python)[0] != digest
    assert fingerprint(replace(venv, seed=False), python)[0] != digest
    assert fingerprint(replace(venv, compile=False), python)[0] != digest
    # The record names what the installer gets by its hash (the text is uploaded, and the
    # record travels in a command), and the seeded pip is not part of it.
    asked = json.loads(record)["asked"]
    assert asked["requirements_sha256"] == hashlib.sha256(b"a\nb\n").hexdigest()
    assert "packages" not in asked and "requirements" not in asked
    assert recorded("not json") is None and recorded(None) is None


def test_probe_reads_a_venv_and_its_snapshot(tmp_path):
    versioned = tmp_path / ".venv-0123456789ab"
    (versioned / "bin").mkdir(parents=True)
    (versioned / "bin/python").symlink_to("/bin/true")
    (versioned / venv_facts.VENV_RECORD).write_text('{"fingerprint": "f"}\n')
    (tmp_path / "venv").symlink_to(versioned.name)
    (tmp_path / "snap").mkdir()
    (tmp_path / "snap/venv-0123456789ab.tar.gz").write_bytes(b"x")
    line = venv_ops.snapshot_line("f", "venv-0123456789ab.tar.gz", "gzip", "ab" * 32)
    (tmp_path / "snap" / venv_facts.SNAPSHOT_CURRENT).write_text(line + "\n")
    site = versioned / "lib/python3.11/site-packages"
    for name in ("Typing_Extensions-4.12.2.dist-info", "zope.interface-7.0.dist-info", "idna"):
        (site / name).mkdir(parents=True)
    args = {
        "path": str(tmp_path / "venv"),
        "python": "sh",
        "uv": str(tmp_path / ".podstate/uv"),
        "snapshot": str(tmp_path / "snap"),
        "distributions": "typing-extensions zope-interface idna",
    }
    out = probing.run(venv=args)
    assert out.returncode == 0, out.stderr
    venv = parse_probe(out.stdout.splitlines()).venv
    assert venv.kind == "link" and venv.target == ".venv-0123456789ab"
    assert venv.record == '{"fingerprint": "f"}\n' and venv.works is True
    assert venv.python is None  # sh is not a Python: no version line
    assert venv.snapshot == Snapshot(
        fingerprint="f",
        archive="venv-0123456789ab.tar.gz",
        compressor="gzip",
        sha256="ab" * 32,
    )
    assert not venv.managed_uv
    # idna's package directory is there, its dist-info is not: removed, as far as
    # installers know; names compare as installers normalize them.
    assert venv.missing == ("idna",)
    (site / "idna-3.10.dist-info").mkdir()
    out = probing.run(venv=args)
    assert parse_probe(out.stdout.splitlines()).venv.missing == ()
    # An old current line without the sha256 is no snapshot to restore.
    (tmp_path / "snap" / venv_facts.SNAPSHOT_CURRENT).write_text(" ".join(line.split()[:3]) + "\n")
    out = probing.run(venv=args)
    assert parse_probe(out.stdout.splitlines()).venv.snapshot is None


def test_probe_of_a_path_with_nothing_there_reports_no_missing_list(tmp_path):
    args = {"path": str(tmp_path / "venv"), "python": "sh", "uv": "/nonexistent/uv"}
    out = probing.run(venv=args)
    assert parse_probe(out.stdout.splitlines()).venv.missing is None


def test_pip_is_required_unless_the_venv_is_not_seeded():
    venv = typed_state.venv(packages=["Pip==24.0", "numpy"], seed=False)
    assert required(venv) == ["Pip", "numpy"] and seed_mode(venv) == "check"
    venv = typed_state.venv(packages=["numpy"])
    assert required(venv) == ["numpy", "pip"] and seed_mode(venv) == "add"
    venv = typed_state.venv(packages=["numpy"], seed=False)
    assert required(venv) == ["numpy"] and seed_mode(venv) == "no"
    assert venv_facts.normalize("Zope.Interface__x") == "zope-interface-x"


def test_probe_without_venv_is_unchanged():
    assert "venv." not in program(["/scratch"], ["~/.bashrc"])
    assert parse_probe(["caps 0"]).venv is None


INSTALLER_LOGS = [
    (  # uv: an error and its chain of causes
        "Using Python 3.11.7 environment at: /opt/.venv-0123456789ab\n"
        "error: Request failed after 3 retries in 6.0s\n"
        "  cause: Failed to fetch: http://127.0.0.1:9/simple/tinyextra/\n"
        "  cause: client error (Connect)\n"
        "  cause: Connection refused (os error 111)\n",
        "Request failed after 3 retries in 6.0s; Failed to fetch: "
        "http://127.0.0.1:9/simple/tinyextra/; Connection refused (os error 111)",
    ),
    (  # uv's resolver: no "error:" line, the explanation is the last line
        "  \u00d7 No solution found when resolving dependencies:\n"
        "  \u2570\u2500\u25b6 Because nosuchpkg was not found in the package registry and you "
        "require nosuchpkg, we can conclude that your requirements are unsatisfiable.\n\n",
        "Because nosuchpkg was not found in the package registry and you require nosuchpkg, "
        "we can conclude that your requirements are unsatisfiable.",
    ),
    (  # pip: the last of its ERROR lines
        "Looking in links: /opt/wheelhouse\n"
        "ERROR: Could not find a version that satisfies the requirement nosuchpkg\n"
        "ERROR: No matching distribution found for nosuchpkg\n",
        "No matching distribution found for nosuchpkg",
    ),
    (
        "Collecting bigpkg\nERROR: Could not install packages due to an OSError: "
        "[Errno 28] No space left on device\n",
        "no space left on device (container disk or scratch is full",
    ),
]


@pytest.mark.parametrize(("log", "expected"), INSTALLER_LOGS)
def test_failure_line_is_the_installers_cause(tmp_path, log, expected):
    (tmp_path / "log").write_text(log)
    functions = script("venv_lib.sh")
    line = subprocess.run(
        ["sh", "-c", f"{functions}\nLOG=$1; why", "why", tmp_path / "log"],
        capture_output=True,
        text=True,
    ).stdout
    assert line.startswith(expected) and line.endswith(f"log: {tmp_path / 'log'})\n"), line


def test_snapshot_line_reads_back_and_rejects_partial_lines():
    line = venv_ops.snapshot_line("f" * 64, "venv-ffffffffffff.tar.zst", "zstd", "0" * 64)
    assert venv_facts.read_snapshot(line + "\n") == Snapshot(
        fingerprint="f" * 64,
        archive="venv-ffffffffffff.tar.zst",
        compressor="zstd",
        sha256="0" * 64,
    )
    assert venv_facts.read_snapshot("f venv.tar.gz gzip") is None
    assert venv_facts.read_snapshot("") is None and venv_facts.read_snapshot("a  b") is None


def _local_venv(tmp_path: Path, **changes) -> venv_ops.Venv:
    """Return an empty uv venv under ``tmp_path`` as the role would describe it."""
    spec = typed_state.venv(path=str(tmp_path / "opt/venv"), no_index=True)
    python = Python("/usr/bin/python3", "3", ensurepip=True)
    digest, record = fingerprint(spec, python)
    values = {
        "path": spec.path,
        "fingerprint": digest,
        "record": record,
        "python": python.executable,
        "installer": "uv",
        "requirements": "",
        "index_args": ["--no-index"],
        "environment": {
            "TMPDIR": str(tmp_path / "tmp"),
            "PIP_CACHE_DIR": str(tmp_path / "cache/pip"),
            "UV_CACHE_DIR": str(tmp_path / "cache/uv"),
            "UV_LINK_MODE": "copy",
        },
    }
    return venv_ops.Venv(**{**values, **changes})


def _sh(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=120)


def _build(want: venv_ops.Venv, uv: str) -> subprocess.CompletedProcess:
    """Build ``want`` here as the venv operation does: its requirements put where the build
    reads them (the operation uploads them), then the build's command."""
    requirements = Path(want.requirements_file)
    requirements.parent.mkdir(parents=True, exist_ok=True)
    requirements.write_text(want.requirements)
    return _sh(venv_ops.venv_command(want, uv))


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs /usr/bin/python3")
def test_uv_install_fails_with_pips_cause_and_leaves_no_link(tmp_path):
    """uv installed with pip, run here with no index to install from: the installer's
    settings reach pip (its work directory under TMPDIR), the log starts with the attempt,
    the one line on stderr is pip's cause, and there is no uv link."""
    want = _local_venv(tmp_path)
    dest = tmp_path / "opt/.podstate/uv"
    run = _sh(venv_ops.uv_install_command(want, str(dest)))
    assert run.returncode == 1
    assert run.stderr.startswith("podstate: venv uv-install failed: ")
    assert "No matching distribution found for uv" in run.stderr, run.stderr
    log = (dest.parent / "uv-install.log").read_text()
    assert log.startswith(f"podstate: uv-install of {dest.parent}/uv-env started at ")
    assert (tmp_path / "tmp").is_dir() and (tmp_path / "cache/pip").is_dir()
    assert not dest.exists() and not dest.is_symlink()


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs /usr/bin/python3")
def test_scripts_build_pack_and_restore_a_venv_locally(tmp_path):
    """The venv scripts, run here: build and switch (pip in the venv, bytecode compiled), a
    snapshot the probe reads with its sha256, a restore, a corrupted archive and a broken
    one set aside, and a failed build that leaves nothing behind."""
    from uv import find_uv_bin

    want = _local_venv(tmp_path, distributions=["pip"])
    opt, snap = tmp_path / "opt", tmp_path / "snap"
    built = _build(want, find_uv_bin())
    assert built.returncode == 0, built.stderr
    assert os.readlink(want.path) == want.version
    assert recorded((opt / want.version / venv_facts.VENV_RECORD).read_text()) == want.fingerprint
    pip = _sh(f"{want.path}/bin/python -m pip --version")
    assert pip.returncode == 0 and f"from {want.path}/lib/" in pip.stdout, pip.stderr
    assert list((opt / want.version).glob("lib/python*/site-packages/pip/__pycache__/*.pyc"))

    packed = _sh(venv_ops.snapshot_command(want, str(snap), zstd=False))
    assert packed.returncode == 0, packed.stderr
    args = {
        "path": want.path,
        "python": "sh",
        "uv": str(opt / ".podstate/uv"),
        "snapshot": str(snap),
        "distributions": "pip",
    }
    probed = parse_probe(probing.run(venv=args).stdout.splitlines()).venv
    found = probed.snapshot
    archive = snap / f"venv-{want.fingerprint[:12]}.tar.gz"
    assert found == Snapshot(
        fingerprint=want.fingerprint,
        archive=archive.name,
        compressor="gzip",
        sha256=hashlib.sha256(archive.read_bytes()).hexdigest(),
    )
    assert probed.missing == ()

    restore = replace(found, archive=str(archive))
    _sh(f"rm -rf {opt}")
    restored = _sh(venv_ops.venv_command(want, None, restore))
    assert restored.returncode == 0, restored.stderr
    assert os.readlink(want.path) == want.version
    assert "podstate: restored" in (opt / ".podstate/venv.log").read_text()

    good = archive.read_bytes()
    for damage, why in [
        (good[: len(good) // 2], r"its sha256 is [0-9a-f]{64}, not "),
        (b"not an archive", r"its sha256 is [0-9a-f]{64}, not "),
    ]:
        _sh(f"rm -rf {opt}")
        archive.write_bytes(damage)
        (snap / "current").write_text(venv_ops.snapshot_line(*astuple(found)) + "\n")
        broken = _sh(venv_ops.venv_command(want, None, restore))
        assert broken.returncode == 1
        assert re.match(f"podstate: venv snapshot {archive} is bad: {why}", broken.stderr)
        assert sorted(os.listdir(snap)) == sorted([archive.name, "current.bad"])
        assert os.listdir(opt) == [".podstate"]
    # The sum matches, the content is no archive: it does not unpack.
    archive.write_bytes(b"not an archive")
    sha = hashlib.sha256(b"not an archive").hexdigest()
    unpack = _sh(venv_ops.venv_command(want, None, replace(restore, sha256=sha)))
    assert re.match(f"podstate: venv snapshot {archive} is bad: it does not unpack", unpack.stderr)

    missing = _local_venv(tmp_path, distributions=["nosuchpkg"])
    failed = _build(missing, find_uv_bin())
    assert failed.returncode == 1
    assert "podstate: venv build failed: requested but not installed: nosuchpkg" in failed.stderr
    assert os.listdir(opt) == [".podstate"]


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs /usr/bin/python3")
def test_scripts_build_without_pip_or_bytecode_when_asked(tmp_path):
    from uv import find_uv_bin

    want = _local_venv(tmp_path, seed="no", compile=False)
    built = _build(want, find_uv_bin())
    assert built.returncode == 0, built.stderr
    assert _sh(f"{want.path}/bin/python -m pip --version").returncode != 0
    assert not list(Path(want.version_dir).glob("lib/python*/site-packages/*/__pycache__"))


def test_gzip_copies_are_made_once_per_version_of_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    binary = tmp_path / "uv"
    binary.write_bytes(os.urandom(4096) + b"\0" * 100_000)
    packed = gzcache.gzipped(binary)
    assert packed is not None and packed.parent == tmp_path / "cache/podstate/uploads"
    assert gzip.decompress(packed.read_bytes()) == binary.read_bytes()
    assert packed.stat().st_size < binary.stat().st_size / 5
    made = packed.stat().st_mtime_ns
    assert gzcache.gzipped(binary) == packed and packed.stat().st_mtime_ns == made
    binary.write_bytes(b"upgraded")  # a new uv: a new copy, and the old one goes
    os.utime(binary, ns=(made + 10**9, made + 10**9))
    again = gzcache.gzipped(binary)
    assert again != packed and not packed.exists()
    assert gzip.decompress(again.read_bytes()) == b"upgraded"
    assert [p.name for p in again.parent.iterdir()] == [again.name]


def test_gzip_copy_without_a_writable_cache_is_none(tmp_path, monkeypatch):
    (tmp_path / "cache").write_text("a file where the cache directory should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    binary = tmp_path / "uv"
    binary.write_bytes(b"uv")
    assert gzcache.gzipped(binary) is None


# --- end to end -----------------------------------------------------------------------------

VARS = {
    "scratch": {"/scratch": {"size": "2G"}},
    "dirs": {"TMPDIR": "/scratch/tmp"},
    # As RunPod's images do: caches on the network volume, for every shell.
    "env": {"PIP_CACHE_DIR": "/workspace/.cache/pip", "UV_CACHE_DIR": "/workspace/.cache/uv"},
}
BASE = {"path": "/opt/venv", "find_links": ["/opt/wheelhouse"], "no_index": True}


@pytest.fixture(scope="module")
def pods(fleet: Fleet, tmp_path_factory) -> Fleet:
    """The fleet with this module's vars and the test wheelhouse in every pod used."""
    from podstate.sandbox import inside

    fleet.group_vars("all", VARS)
    house = wheelhouse(tmp_path_factory.mktemp("wheelhouse"))
    for minor in range(6):
        slow_sdist(house, 6, f"1.{minor}")
    data = base64.b64encode(tar_bytes(house)).decode()
    for pod in PODS:
        inside.pod_exec(
            pod,
            f"mkdir -p /opt/wheelhouse && echo {data} | base64 -d | tar -xzf - -C /opt/wheelhouse",
        )
    return fleet


def want(fleet: Fleet, pod: str, **venv) -> None:
    fleet.host_vars(pod, {"venv": {**BASE, **venv}})


def target(fleet: Fleet, pod: str) -> str:
    return fleet.out(pod, "readlink /opt/venv").strip()


def versions(fleet: Fleet, pod: str) -> list[str]:
    return fleet.out(pod, "cd /opt && ls -d .venv-* 2>/dev/null || true").split()


def imports(fleet: Fleet, pod: str, module: str) -> str:
    result = fleet.ssh(pod, f"/opt/venv/bin/python -c 'import {module}; print({module}.__name__)'")
    return result.stdout.strip() if result.returncode == 0 else f"failed: {result.stderr}"


def op_names(run) -> dict[str, set[str]]:
    """Return the names of the operations that changed something, with their hosts."""
    return {
        op["name"]: set(op["success"]) for op in run.json["results"]["operations"] if op["success"]
    }


@pytest.fixture(scope="module")
def built(pods: Fleet):
    """The first apply on pod-5: uploads uv, builds the venv."""
    want(pods, "pod-5", packages=["tinyapp"])
    return apply(pods, "--limit", "pod-5")


def test_first_apply_uploads_uv_and_builds(pods, built):
    assert built.returncode == 0, built.stderr
    changed = op_names(built)
    assert "Venv | Upload uv to /opt/.podstate/uv (the pod has none)" in changed
    assert "Venv | Venv /opt/venv: build with uv" in changed
    assert VERSIONED.fullmatch(target(pods, "pod-5"))
    assert imports(pods, "pod-5", "tinyapp") == "tinyapp"
    # uv travels gzipped and arrives as the control machine's binary, with nothing left over.
    from uv import find_uv_bin

    local = hashlib.sha256(Path(find_uv_bin()).read_bytes()).hexdigest()
    assert pods.out("pod-5", "sha256sum /opt/.podstate/uv").split()[0] == local
    assert pods.out("pod-5", "ls -A /opt/.podstate").split() == ["uv", "venv.log"]


def test_scripts_shebangs_name_the_versioned_path(pods, built):
    shebang = pods.out("pod-5", "head -1 /opt/venv/bin/tinyapp").strip()
    assert shebang == f"#!/opt/{target(pods, 'pod-5')}/bin/python"
    assert pods.out("pod-5", "/opt/venv/bin/tinyapp").strip() == "tinyapp 2.0"


def test_install_caches_stay_off_the_network_volume(pods, built):
    assert pods.out("pod-5", "echo $UV_CACHE_DIR").strip() == "/workspace/.cache/uv"
    assert pods.out("pod-5", "ls -A /workspace").split() == [".podstate"]  # podstate's record
    assert "archive-v0" in pods.out("pod-5", "ls /scratch/.podstate-cache/uv")


def test_pip_in_the_venv_installs_into_the_venv_and_bytecode_is_compiled(pods, built):
    """pip is the venv's own: ``python -m pip`` and ``bin/pip`` install into the venv, not
    into the system interpreter; what the build installed is byte-compiled."""
    version = pods.out("pod-5", "/opt/venv/bin/python -m pip --version")
    assert " from /opt/venv/lib/" in version, version
    pyc = pods.out("pod-5", "ls /opt/venv/lib/python3*/site-packages/tinyapp/__pycache__")
    assert ".pyc" in pyc
    pip = "/opt/venv/bin/pip install -q --no-index --find-links /opt/wheelhouse tinyextra"
    pods.out("pod-5", pip)
    try:
        assert imports(pods, "pod-5", "tinyextra") == "tinyextra"
        assert pods.ssh("pod-5", "python3 -c 'import tinyextra'").returncode != 0
    finally:
        pods.out("pod-5", "/opt/venv/bin/pip uninstall -q -y tinyextra")


def test_a_removed_distribution_is_drift_and_apply_rebuilds_beside_it(pods, built):
    """A requested distribution removed by hand (its dependencies are not checked)."""
    assert apply(pods, "--limit", "pod-5").hosts("success") == set()
    first = target(pods, "pod-5")
    # As a user would remove it: its package and dist-info directories.
    pods.out("pod-5", "cd /opt/venv/lib/python3*/site-packages && rm -rf tinyapp tinyapp-*")
    drift = check(pods, "--limit", "pod-5")
    assert drift.returncode != 0
    assert "/opt/venv: tinyapp missing" in drift.stdout, drift.stdout
    assert "nothing would change" not in drift.stdout
    run = apply(pods, "--limit", "pod-5")
    assert run.returncode == 0, run.stderr
    assert "Venv | Venv /opt/venv: tinyapp missing: rebuild with uv beside it" in op_names(run)
    second = target(pods, "pod-5")
    assert second == first + venv_ops.ALTERNATE
    assert sorted(versions(pods, "pod-5")) == sorted([first, second])
    assert imports(pods, "pod-5", "tinyapp") == "tinyapp"
    assert apply(pods, "--limit", "pod-5").hosts("success") == set()
    # Broken again: rebuilt at the first name, beside the second.
    pods.out("pod-5", "rm -rf /opt/venv/lib/python3*/site-packages/tinyapp-*.dist-info")
    assert apply(pods, "--limit", "pod-5").returncode == 0
    assert target(pods, "pod-5") == first and imports(pods, "pod-5", "tinyapp") == "tinyapp"
    assert check(pods, "--limit", "pod-5").returncode == 0


def test_second_apply_changes_nothing_and_costs_only_the_probe(pods, built):
    before = exec_count(pods, "pod-5")
    again = apply(pods, "--limit", "pod-5")
    assert again.returncode == 0, again.stderr
    assert again.hosts("success") == set()
    assert exec_count(pods, "pod-5") - before == 1


def test_changed_packages_rebuild_and_switch_keeping_one_previous(pods, built):
    first = target(pods, "pod-5")
    want(pods, "pod-5", packages=["tinyapp", "tinyextra"])
    run = apply(pods, "--limit", "pod-5")
    assert run.returncode == 0, run.stderr
    assert "Venv | Upload uv to /opt/.podstate/uv (the pod has none)" not in op_names(run)
    second = target(pods, "pod-5")
    assert second != first and imports(pods, "pod-5", "tinyextra") == "tinyextra"
    assert sorted(versions(pods, "pod-5")) == sorted([first, second])
    want(pods, "pod-5", packages=["tinyapp", "tinyextra", "tinylib<2"])
    assert apply(pods, "--limit", "pod-5").returncode == 0
    third = target(pods, "pod-5")
    assert sorted(versions(pods, "pod-5")) == sorted([second, third])
    version = "/opt/venv/bin/python -c 'import tinylib; print(tinylib.VERSION)'"
    assert pods.out("pod-5", version).strip() == "1.0"


def test_a_40k_lock_file_is_uploaded_installed_and_left_nowhere(pods, built):
    """A lock file of 40 KiB once made a 129 KiB build command, which Linux refused in the
    middle of the apply. Its text now reaches the pod as an upload (past the 32 KiB sent on
    a command's stdin, over SFTP), is installed, and is left nowhere; the record names it
    by its hash; the next run changes nothing."""
    lines = [f"#    via team-app-{i:04d} (pinned upstream)\n" for i in range(1080)]
    lock = "tinyapp\n" + "".join(lines)
    assert 40 << 10 < len(lock) < 48 << 10
    (pods.vars_dir / "files").mkdir(exist_ok=True)
    (pods.vars_dir / "files" / "lock.txt").write_text(lock)
    want(pods, "pod-5", requirements="files/lock.txt")
    run = apply(pods, "--limit", "pod-5")
    assert run.returncode == 0, run.stderr
    assert "Venv | Venv /opt/venv: build with uv" in op_names(run)
    assert imports(pods, "pod-5", "tinyapp") == "tinyapp"
    assert "venv.requirements" not in pods.out("pod-5", "ls -A /opt/.podstate").split()
    record = json.loads(pods.out("pod-5", "cat /opt/venv/.podstate-venv"))
    assert record["asked"]["requirements_sha256"] == hashlib.sha256(lock.encode()).hexdigest()
    again = apply(pods, "--limit", "pod-5")
    assert again.returncode == 0 and again.hosts("success") == set()


def _start(fleet: Fleet) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "pyinfra"), "-y", "--limit", "pod-5", "inventories/pods.py", "deploy/pod.py"],
        cwd=ROOT,
        env=fleet.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )


def _wait_for(fleet: Fleet, pod: str, command: str, timeout: float = 60) -> None:
    from podstate.sandbox import inside

    deadline = time.monotonic() + timeout
    while inside.pod_exec(pod, command, check=False).returncode != 0:
        assert time.monotonic() < deadline, f"timed out waiting for: {command}"
        time.sleep(0.05)


@pytest.mark.parametrize(
    "moment,minor",
    [("while connecting", 1), ("while the sdist builds", 2), ("right after the switch", 3)],
)
def test_killed_deploy_leaves_a_working_venv_and_the_next_run_converges(pods, built, moment, minor):
    from podstate.sandbox import inside

    assert apply(pods, "--limit", "pod-5").returncode == 0
    old = target(pods, "pod-5")
    inside.pod_exec("pod-5", "rm -f /tmp/slowpkg-building")
    want(pods, "pod-5", packages=["tinyapp", f"slowpkg==1.{minor}"], snapshot="/workspace/snap")
    proc = _start(pods)
    try:
        if moment == "while connecting":
            time.sleep(0.3)
        elif moment == "while the sdist builds":
            _wait_for(pods, "pod-5", "test -e /tmp/slowpkg-building")
        else:
            _wait_for(pods, "pod-5", f'test "$(readlink /opt/venv)" != {old}', timeout=90)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    time.sleep(1)  # the pod's side notices the dropped connection
    now = target(pods, "pod-5")
    assert "failed" not in imports(pods, "pod-5", "tinyapp")
    if moment != "right after the switch":
        assert now == old
    if moment == "while the sdist builds":  # a build nobody waits for must not switch later
        time.sleep(7)
        assert target(pods, "pod-5") == old, "the build outlived its deploy"
    run = apply(pods, "--limit", "pod-5")
    assert run.returncode == 0, run.stderr
    assert imports(pods, "pod-5", "slowpkg") == "slowpkg"
    assert apply(pods, "--limit", "pod-5").hosts("success") == set()


def test_snapshot_restores_a_wiped_pod_without_installing(pods, built):
    from podstate.sandbox import inside

    want(pods, "pod-5", packages=["tinyapp", "tinyextra"], snapshot="/workspace/.podstate/venv")
    run = apply(pods, "--limit", "pod-5")
    assert run.returncode == 0, run.stderr
    assert "Venv | Venv snapshot in /workspace/.podstate/venv" in op_names(run)
    current = pods.out("pod-5", "cat /workspace/.podstate/venv/current").split()
    assert current[1] in pods.out("pod-5", "ls /workspace/.podstate/venv")
    # The pod comes back with an empty container disk: no venv, no uv, no cache.
    inside.pod_exec(
        "pod-5", "rm -rf /opt/venv /opt/.venv-* /opt/.podstate /scratch/.podstate-cache"
    )
    run = apply(pods, "--limit", "pod-5")
    assert run.returncode == 0, run.stderr
    changed = op_names(run)
    assert [name for name in changed if "restore from snapshot" in name], changed
    assert not [name for name in changed if "Upload uv" in name or "build" in name], changed
    assert pods.ssh("pod-5", "ls -A /scratch/.podstate-cache/uv").stdout.strip() == ""
    assert imports(pods, "pod-5", "tinyextra") == "tinyextra"
    assert apply(pods, "--limit", "pod-5").hosts("success") == set()


def test_corrupted_snapshot_is_reported_built_instead_and_replaced(pods, built):
    """A truncated archive on the volume and a wiped container disk: the run verifies the
    archive's sha256, says the snapshot is bad, builds (uploading uv) and packs it again."""
    from podstate.sandbox import inside

    snap = "/workspace/.podstate/venv"
    want(pods, "pod-5", packages=["tinyapp", "tinyextra"], snapshot=snap)
    assert apply(pods, "--limit", "pod-5").returncode == 0
    fingerprint, archive, _, sha = pods.out("pod-5", f"cat {snap}/current").split()
    size = int(pods.out("pod-5", f"stat -c %s {snap}/{archive}"))
    pods.out("pod-5", f"truncate -s {size // 2} {snap}/{archive}")
    inside.pod_exec(
        "pod-5", "rm -rf /opt/venv /opt/.venv-* /opt/.podstate /scratch/.podstate-cache"
    )
    run = apply(pods, "--limit", "pod-5")
    assert run.returncode == 0, run.stderr
    assert f"podstate: venv snapshot {snap}/{archive} is bad: its sha256 is" in run.stderr
    assert "building instead" in run.stderr
    assert imports(pods, "pod-5", "tinyextra") == "tinyextra"
    assert pods.out("pod-5", "/opt/venv/bin/python -m pip --version").startswith("pip ")
    # The snapshot was packed again: the same fingerprint, a whole archive, its sum recorded.
    again = pods.out("pod-5", f"cat {snap}/current").split()
    assert again[0] == fingerprint and again[1] == archive
    whole = pods.out("pod-5", f"sha256sum {snap}/{archive}").split()[0]
    assert again[3] == whole and int(pods.out("pod-5", f"stat -c %s {snap}/{archive}")) > 0
    assert pods.out("pod-5", f"ls -A {snap}").split() == sorted([archive, "current"])
    assert apply(pods, "--limit", "pod-5").hosts("success") == set()
    # And it restores.
    inside.pod_exec("pod-5", "rm -rf /opt/venv /opt/.venv-* /opt/.podstate")
    run = apply(pods, "--limit", "pod-5")
    assert run.returncode == 0 and "is bad" not in run.stderr, run.stderr
    assert [name for name in op_names(run) if "restore from snapshot" in name]
    assert imports(pods, "pod-5", "tinyextra") == "tinyextra"
    want(pods, "pod-5", packages=["tinyapp"])


def test_install_failure_names_the_cause_and_keeps_the_old_venv(pods, built):
    old = target(pods, "pod-5")
    want(pods, "pod-5", packages=["tinyapp", "nosuchpkg"])
    run = apply(pods, "--limit", "pod-5")
    assert run.returncode != 0
    line = [x for x in run.stderr.splitlines() if "podstate: venv build failed" in x]
    assert line and "pod-5" in line[0] and "nosuchpkg" in line[0], run.stderr
    assert target(pods, "pod-5") == old and imports(pods, "pod-5", "tinyapp") == "tinyapp"
    assert versions(pods, "pod-5").count(old) == 1 and len(versions(pods, "pod-5")) <= 2


def failure_line(run, pod: str) -> str:
    """Return the one line that says why the venv of ``pod`` failed."""
    lines = [x for x in run.stderr.splitlines() if "podstate: venv build failed" in x]
    assert run.returncode != 0 and len(lines) == 1 and pod in lines[0], run.stderr
    return lines[0]


def test_unreachable_index_names_the_cause(pods, built):
    old = target(pods, "pod-5")
    want(pods, "pod-5", packages=["tinyextra"], find_links=[], no_index=False,
         index_url="http://127.0.0.1:9/simple")  # fmt: skip
    line = failure_line(apply(pods, "--limit", "pod-5"), "pod-5")
    assert "127.0.0.1:9" in line and "tinyextra" in line, line
    assert target(pods, "pod-5") == old and imports(pods, "pod-5", "tinyapp") == "tinyapp"
    want(pods, "pod-5", packages=["tinyapp"])


@pytest.fixture
def small_disk(pods):
    """A small local filesystem at /opt/small on pod-5 (as a separate disk would be)."""
    from podstate.sandbox import inside

    def mount(size: str) -> None:
        inside.pod_exec(
            "pod-5", f"mkdir -p /opt/small && mount -t tmpfs -o size={size} sm /opt/small"
        )

    yield mount
    inside.pod_exec("pod-5", "umount /opt/small")
    want(pods, "pod-5", packages=["tinyapp"])


def test_full_venv_filesystem_is_a_violation_that_changes_nothing(pods, built, small_disk):
    small_disk("2m")
    pods.host_vars("pod-5", {"venv": {**BASE, "path": "/opt/small/venv", "packages": ["tinyapp"]}})
    run = apply(pods, "--limit", "pod-5")
    assert run.returncode == 1
    assert "venv.path /opt/small/venv is on a full filesystem (/opt/small): 2" in run.stderr
    assert pods.out("pod-5", "ls -A /opt/small") == ""


def test_disk_filling_up_mid_build_names_the_cause_and_leaves_no_venv(
    pods, built, small_disk, tmp_path
):
    wheel = make_wheel(tmp_path, "bigpkg", "1.0", code="DATA = '" + "x" * 40_000_000 + "'\n")
    pods.out("pod-5", f"cat > /opt/wheelhouse/{wheel.name}", wheel.read_bytes())
    small_disk("70m")  # room for uv (uploaded there), not for bigpkg as well
    pods.host_vars("pod-5", {"venv": {**BASE, "path": "/opt/small/venv", "packages": ["bigpkg"]}})
    line = failure_line(apply(pods, "--limit", "pod-5"), "pod-5")
    assert "no space left on device" in line, line
    assert pods.out("pod-5", "ls -A /opt/small").split() == [".podstate"]
    assert pods.out("pod-5", "ls -A /opt/small/.podstate").split() == ["uv", "venv.log"]


def test_missing_interpreter_is_a_violation(pods, built):
    want(pods, "pod-5", packages=["tinyapp"], python="python9.99")
    run = apply(pods, "--limit", "pod-5")
    assert run.returncode == 1
    assert "venv.python python9.99 is not on the pod" in run.stderr
    want(pods, "pod-5", packages=["tinyapp"])


def test_venv_on_the_network_volume_is_a_violation(pods):
    pods.host_vars("pod-1", {"venv": {**BASE, "path": "/workspace/venv", "packages": ["tinyapp"]}})
    run = apply(pods, "--limit", "pod-1")
    assert run.returncode == 1
    assert "venv.path /workspace/venv is on the network filesystem fuse.sshfs" in run.stderr
    assert pods.ssh("pod-1", "test -e /workspace/venv").returncode != 0
    pods.host_vars("pod-1", None)


def test_pip_installer_on_a_tmpfs_scratch_pod(pods):
    want(pods, "pod-4", packages=["tinyapp"], installer="pip")
    run = apply(pods, "--limit", "pod-4")
    assert run.returncode == 0, run.stderr
    assert "Venv | Venv /opt/venv: build with pip" in op_names(run)
    assert not [name for name in op_names(run) if "uv" in name]
    assert imports(pods, "pod-4", "tinyapp") == "tinyapp"
    assert pods.out("pod-4", "stat -f -c %T /scratch").strip() == "tmpfs"
    record = json.loads(pods.out("pod-4", "cat /opt/venv/.podstate-venv"))
    assert record["asked"]["installer"] == "pip"
    assert apply(pods, "--limit", "pod-4").hosts("success") == set()


def test_a_pod_of_another_architecture_gets_uv_from_pip(pods, tmp_path):
    """The control machine's uv cannot run there, so pip installs uv beside the venvs."""
    from uv import find_uv_bin

    wheel = binary_wheel(tmp_path, "uv", "0.0.1", Path(find_uv_bin()))
    pods.out("pod-1", f"cat > /opt/wheelhouse/{wheel.name}", wheel.read_bytes())
    # The pod reports an arm64 machine, as an ARM pod's `uname -m` does.
    pods.out(
        "pod-1",
        'printf \'#!/bin/sh\\n[ "$1" = -m ] && exec echo aarch64\\nexec /usr/bin/uname "$@"\\n\''
        " >/usr/local/bin/uname && chmod 755 /usr/local/bin/uname",
    )
    want(pods, "pod-1", packages=["tinyapp"])
    try:
        assert pods.out("pod-1", "uname -m").strip() == "aarch64"
        run = apply(pods, "--limit", "pod-1")
        assert run.returncode == 0, run.stderr
        changed = op_names(run)
        assert (
            "Venv | Install uv with pip at /opt/.podstate/uv (the pod has none, and is aarch64)"
            in changed
        )
        assert "Venv | Venv /opt/venv: build with uv" in changed
        assert not [name for name in changed if "Upload" in name]
        assert pods.out("pod-1", "readlink /opt/.podstate/uv").strip() == "uv-env/bin/uv"
        assert re.search(r"^uv = ", pods.out("pod-1", "cat /opt/venv/pyvenv.cfg"), re.M)
        assert imports(pods, "pod-1", "tinyapp") == "tinyapp"
        assert apply(pods, "--limit", "pod-1").hosts("success") == set()
    finally:
        pods.out("pod-1", "rm -f /usr/local/bin/uname")
        pods.host_vars("pod-1", None)


SECOND_VENV = """from podstate.roles import venv
from podstate.inventory.fleet import desired

venv.apply(desired({"venv": {
    "path": "/opt/venv-eval", "packages": ["tinyapp"],
    "find_links": ["/opt/wheelhouse"], "no_index": True,
}}))
"""


def test_a_team_file_builds_a_second_venv_with_the_role(pods, built, tmp_path):
    """podstate's roles are importable deploys: a team's own file calls the venv role with its
    own arguments, beside podstate's deploy, under the same lock."""
    second = tmp_path / "eval_venv.py"
    second.write_text(SECOND_VENV)
    assert apply(pods, "--limit", "pod-5").returncode == 0  # /opt/venv as earlier tests left it
    before = target(pods, "pod-5")
    run = apply(pods, "--limit", "pod-5", deploys=["deploy/pod.py", str(second)])
    assert run.returncode == 0, run.stderr
    result = pods.ssh("pod-5", "/opt/venv-eval/bin/python -c 'import tinyapp'")
    assert result.returncode == 0, result.stderr
    assert target(pods, "pod-5") == before
    assert pods.ssh("pod-5", "test -e /run/podstate.lock").returncode == 1
    again = apply(pods, "--limit", "pod-5", deploys=["deploy/pod.py", str(second)])
    assert again.returncode == 0 and again.hosts("success") == set()
