"""The reading side of tests/test_success_readback.py: what a desired state must make two
sandbox pods read, by the test's own commands over SSH, never podstate's probe or proof.

pod-1 cannot mount (a scratch path is a directory), pod-4 may (a tmpfs; /dev/shm grows).
``converge`` applies a state with the real CLI and reads every declared item back on each
pod, then has ``podstate check`` find both ok and a second apply change nothing; ``Story``
keeps what an example made, so that what left the state is read gone and what podstate did
not make is read as it was.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.apt_repo import build_deb, serve
from tests.e2e import Fleet, apply, check

PODS = ("pod-1", "pod-4")
MOUNTS = {"pod-1": False, "pod-4": True}
# NCCL_P2P_DISABLE under auto: pod-1's two GPUs are joined by PCIe only, pod-4's by NVLink;
# both are COMMUNITY pods, so auto ib sets NCCL_IB_DISABLE on each.
P2P_AUTO = {"pod-1": True, "pod-4": False}
SHELLS = {
    "ssh pod CMD": "env -0",
    "bash -l": "bash -lc 'env -0'",
    "bash -i": "bash -ic 'env -0'",
    "zsh -l": "zsh -lc 'env -0'",
    "dash -l": "dash -lc 'env -0'",
}
ORIGIN = "/srv/git/rb.git"
MAKE_ORIGIN = f"""
set -e
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t
export GIT_COMMITTER_EMAIL=t@example.com GIT_AUTHOR_DATE=@1700000000 GIT_COMMITTER_DATE=@1700000000
rm -rf {ORIGIN} /tmp/rb-work && mkdir -p /srv/git && git init -q --bare -b main {ORIGIN}
git init -q -b main /tmp/rb-work && cd /tmp/rb-work
echo one > f && git add f && git commit -qm one && git tag v1.0
echo two > f && git commit -qam two && git tag v1.1
git checkout -qb dev && echo dev > f && git commit -qam dev && git checkout -q main
git push -q {ORIGIN} main dev --tags && rm -rf /tmp/rb-work
"""
PACKAGES = ("rb-one", "rb-two")
USER_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGmYcG6NWlP6zxDiXGHDwC4whjAQALSZ3F6gIKZEhofW user@hand"
)
SECRET_SOURCE = "RB_SECRET_{}"  # the control machine's variable each secret comes from
ENV_NAMES = ("RB_ONE", "rb_two", "PYTHONUNBUFFERED", "UV_LINK_MODE")
DIR_PATHS = {
    "TMPDIR": ("/scratch/tmp", "/var/tmp/rb-tmp"),
    "PIP_CACHE_DIR": ("/scratch/pip", "/opt/rb/pip"),
    "UV_CACHE_DIR": ("/fast/uv", "/var/tmp/rb-uv"),
}
SECRETS = ("RB_TOKEN", "HF_TOKEN")


# --- reading the pods ---------------------------------------------------------------------


def read(fleet: Fleet, pod: str, commands: list[str]) -> list[bytes]:
    """Return the stdout of each of ``commands`` run on ``pod``, in one SSH session (the
    shell ``ssh pod CMD`` starts), with its exit status appended as ``~STATUS``: one round
    trip for a whole reading. stderr is dropped."""
    script = "".join(
        f'printf "\\nRB:"; {{ ( {command} ) 2>/dev/null; echo "~$?"; }} | base64 -w0\n'
        for command in commands
    )
    lines = fleet.out(pod, script).split("\nRB:")[1:]
    assert len(lines) == len(commands), lines
    return [base64.b64decode(line.strip()) for line in lines]


def environ(output: bytes) -> dict[str, str]:
    """Return the variables ``env -0`` printed (its output before ``~STATUS``)."""
    text = output.rpartition(b"~")[0].decode()
    return dict(item.partition("=")[::2] for item in text.split("\0") if "=" in item)


def watched_names() -> tuple[str, ...]:
    """Return the variables whose value in every shell the property checks."""
    return (*ENV_NAMES, *DIR_PATHS, *SECRETS, "NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "PATH")


# --- what the pods must read --------------------------------------------------------------

SIZES = {"64M": 64 << 20, "100M": 100 << 20, "1.5G": 3 << 29, "8G": 8 << 30, "12G": 12 << 30}
THERE = {"/", "/etc", "/opt", "/root", "/usr", "/usr/local", "/var", "/var/tmp"}  # before
Expect = bytes | Callable[[bytes], bool]


def ok(stdout: str) -> bytes:
    """Return what ``read`` gives for a command that printed ``stdout`` and exited 0."""
    return stdout.encode() + b"~0\n"


def declared_paths(state: dict) -> set[str]:
    """Return the paths on the pod that ``state`` declares."""
    paths = {*state.get("dirs", {}).values(), *state.get("scratch", {})}
    return paths | set(state.get("files", {})) | set(state.get("repos", {}))


def with_parents(paths: set[str]) -> set[str]:
    """Return ``paths`` with every directory above each, up to the root."""
    return {str(p) for path in paths for p in (Path(path), *Path(path).parents)}


def expected_env(pod: str, state: dict, before: dict[str, str]) -> dict[str, str | None]:
    """Return the value each watched variable must have in a shell of ``pod`` under
    ``state``: the declared one, else the one the shell had ``before`` podstate."""
    want: dict[str, str | None] = {name: before.get(name) for name in watched_names()}
    want.update(state.get("env", {}))
    want.update(state.get("dirs", {}))
    want.update(state.get("secrets", {}))
    if "nccl" in state:
        modes = {"p2p": "auto", "ib": "auto", **state["nccl"]}
        if {"auto": P2P_AUTO[pod], "disable": True}.get(modes["p2p"], False):
            want["NCCL_P2P_DISABLE"] = "1"
        if modes["ib"] != "leave":  # auto: both pods are COMMUNITY
            want["NCCL_IB_DISABLE"] = "1"
    if state.get("path"):
        want["PATH"] = ":".join([*state["path"], before["PATH"]])
    return want


def readings(pod: str, state: dict, rig: Rig, story: Story) -> list[tuple[str, str, Expect]]:
    """Return what to read on ``pod`` after an apply of ``state``: (what, command, the
    output ``read`` must give, or a test of it)."""
    out: list[tuple[str, str, Expect]] = []
    for name, path in state.get("dirs", {}).items():
        mode = "1777" if name == "TMPDIR" else "755"
        out.append((f"dirs.{name}", f"stat -c %F:%a {path}", ok(f"directory:{mode}\n")))
    for path, spec in state.get("scratch", {}).items():
        mode = f"{int(spec.get('mode', '1777'), 8):o}"
        size = SIZES.get(spec["size"], spec["size"])
        out.append((f"scratch {path} mode", f"stat -c %F:%a {path}", ok(f"directory:{mode}\n")))
        if MOUNTS[pod]:
            command = f"stat -f -c %T {path}; findmnt -bno SIZE -M {path}"
            out.append((f"scratch {path} a tmpfs", command, ok(f"tmpfs\n{size}\n")))
        else:
            out.append((f"scratch {path} no mount", f"findmnt -M {path}", b"~1\n"))
    if "shm" in state:
        least = SIZES[state["shm"]["min_size"]]
        out.append(
            (
                "/dev/shm",
                "df -B1 --output=size /dev/shm | tail -1",
                lambda got, least=least: int(got.split(b"~")[0]) >= least,
            )
        )
    for path, spec in state.get("files", {}).items():
        digest = hashlib.sha256(spec["content"].encode()).hexdigest()
        mode = f"{int(spec.get('mode', '0644'), 8):o}"
        command = f"sha256sum < {path}; stat -c %a:%U {path}"
        out.append((f"file {path}", command, ok(f"{digest}  -\n{mode}:root\n")))
    keys = [rig.keys[i] for i in state.get("authorized_keys", [])]
    for key in (*rig.keys, USER_KEY):
        count = 1 if key in keys or key == USER_KEY else 0
        out.append(
            (
                f"key {key[-12:]}",
                f"grep -Fxc -- '{key}' ~/.ssh/authorized_keys",
                (b"%d\n~%d\n" % (count, 1 - count)),
            )
        )
    secrets = state.get("secrets")
    if secrets is not None:  # {} too: a file that sets nothing
        mode = "stat -c %a:%U /etc/podstate/secrets/env.sh"
        out.append(("secrets file", mode, ok("600:root\n")))
        source = "env -i dash -c 'set -a; . /etc/podstate/secrets/env.sh; env -0'"
        out.append(("secrets values", source, lambda got, s=secrets: _values(got, SECRETS) == s))
    else:
        out.append(("no secrets file", "test -e /etc/podstate/secrets/env.sh", b"~1\n"))
    apt = state.get("packages", {}).get("apt", [])
    for name in (*PACKAGES, "bash"):
        status = "dpkg-query -W -f='${db:Status-Status}\\n' " + name
        if name in apt or name == "bash" or name in story.left_installed:
            out.append((f"package {name}", status, ok("installed\n")))
        else:
            out.append(
                (f"package {name} gone", status, lambda got: not got.startswith(b"installed"))
            )
    for path, ref in state.get("repos", {}).items():
        branch = f"{ref}\n" if ref in ("main", "dev") else ""
        command = (
            f"git -C {path} rev-parse HEAD; git -C {path} symbolic-ref -q --short HEAD;"
            f" git -C {path} status --porcelain; git -C {path} remote get-url origin"
        )
        out.append(
            (f"repo {path}", command, ok(f"{rig.refs[pod][ref]}\n{branch}file://{ORIGIN}\n"))
        )
    stays = with_parents(declared_paths(state) | set(story.users))
    for path in sorted(story.made - stays):
        out.append((f"{path} gone", f"test -e {path} || test -L {path}", b"~1\n"))
    for path, (content, mode) in story.users.items():
        if path in state.get("files", {}):
            continue  # the declared file, read above
        command = f"sha256sum < {path}; stat -c %a {path}"
        out.append(
            (f"user's {path}", command, ok(f"{hashlib.sha256(content).hexdigest()}  -\n{mode}\n"))
        )
    return out


def _values(output: bytes, names: tuple[str, ...]) -> dict[str, str]:
    """Return the variables among ``names`` that ``env -0`` printed, with their values."""
    return {k: v for k, v in environ(output).items() if k in names}


# --- the fleet, and what each example did to it -------------------------------------------


@dataclass(repr=False)
class Rig:
    """The two pods, with what the test made on them once and read before any apply."""

    fleet: Fleet
    pods_file: Path
    keys: list[str]  # public key lines a state may list
    refs: dict[str, dict[str, str]]  # pod -> ref -> the commit the origin has for it
    before: dict[str, dict[str, dict[str, str]]]  # pod -> shell -> its variables

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(f"Rig({', '.join(PODS)})")  # what a failing example prints of it

    def env(self, state: dict) -> dict[str, str]:
        """Return the environment of a run for ``state``: its secrets' sources set."""
        sources = {SECRET_SOURCE.format(k): v for k, v in state.get("secrets", {}).items()}
        return {**self.fleet.env(self.pods_file), **sources}


@dataclass
class Story:
    """What one example did to the pods: the paths podstate made, the user's files, the
    packages podstate installed and those it left installed when they left the state."""

    made: set[str] = field(default_factory=set)
    users: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # path -> content, mode
    installed: set[str] = field(default_factory=set)
    left_installed: set[str] = field(default_factory=set)

    def applied(self, state: dict) -> None:
        """Record what an apply of ``state`` made and which packages it left."""
        self.made |= with_parents(declared_paths(state)) - THERE - with_parents(set(self.users))
        packages = state.get("packages", {})
        for name in self.installed - set(packages.get("apt", [])):
            self.installed.discard(name)
            if not packages.get("remove_undeclared"):
                self.left_installed.add(name)
        self.installed |= set(packages.get("apt", [])) & set(PACKAGES) - self.left_installed


def to_vars(state: dict, rig: Rig) -> dict:
    """Return ``state`` as the desired state's YAML says it: keys by line, secrets by the
    variable they come from, repos by URL."""
    out = dict(state)
    if "authorized_keys" in state:
        out["authorized_keys"] = [rig.keys[i] for i in state["authorized_keys"]]
    if "secrets" in state:
        out["secrets"] = {k: {"from_env": SECRET_SOURCE.format(k)} for k in state["secrets"]}
    if "repos" in state:
        out["repos"] = {p: {"url": f"file://{ORIGIN}", "ref": r} for p, r in state["repos"].items()}
    return out


def make_rig(fleet: Fleet, work: Path) -> Rig:
    """Return pod-1 and pod-4 with a local apt repository, a git origin and a user's key
    made, and their shells' variables read before any apply (``work``: a directory here)."""
    pods = yaml.safe_load(fleet.pods_file.read_text())
    pods["pods"] = {name: pods["pods"][name] for name in PODS}
    pods_file = work / "pods.yaml"
    pods_file.write_text(yaml.safe_dump(pods))
    debs = [build_deb(work, name) for name in PACKAGES]
    keys = []
    for i in range(3):
        command = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"k{i}@rb", "-f"]
        subprocess.run([*command, str(work / f"k{i}")], check=True)
        keys.append((work / f"k{i}.pub").read_text().strip())
    refs, before = {}, {}
    for pod in PODS:
        serve(fleet, pod, debs)
        fleet.out(pod, MAKE_ORIGIN + f"echo '{USER_KEY}' >> /root/.ssh/authorized_keys")
        shas = fleet.out(
            pod,
            " && ".join(
                f"git -C {ORIGIN} rev-parse {r}^{{commit}}" for r in ("v1.0", "v1.1", "main", "dev")
            ),
        )
        refs[pod] = dict(zip(("v1.0", "v1.1", "main", "dev"), shas.split(), strict=True))
        shells = read(fleet, pod, list(SHELLS.values()))
        before[pod] = {shell: environ(out) for shell, out in zip(SHELLS, shells, strict=True)}
    return Rig(fleet, pods_file, keys, refs, before)


def readback(rig: Rig, story: Story, pod: str, state: dict) -> list[str]:
    """Return each way ``pod`` differs from ``state`` as the test reads it (what, wanted,
    read): [] when every declared item is there and nothing that left it is."""
    checks = readings(pod, state, rig, story)
    got = read(rig.fleet, pod, [*SHELLS.values(), *(command for _, command, _ in checks)])
    wrong = []
    for shell, output in zip(SHELLS, got[: len(SHELLS)], strict=True):
        want = expected_env(pod, state, rig.before[pod][shell])
        seen = environ(output)
        wrong += [
            f"{pod} {shell}: {name}={seen.get(name)!r}, want {value!r}"
            for name, value in want.items()
            if seen.get(name) != value
        ]
    for (what, command, expect), output in zip(checks, got[len(SHELLS) :], strict=True):
        if not (expect(output) if callable(expect) else output == expect):
            wrong.append(f"{pod} {what}: `{command}` read {output!r}, want {expect!r}")
    return wrong


def converge(rig: Rig, story: Story, state: dict) -> None:
    """Apply ``state`` with the real CLI; where it succeeds, read every item back on each
    pod, have ``podstate check`` find both ok, and a second apply change nothing."""
    rig.fleet.group_vars("all", to_vars(state, rig))
    run = apply(rig.fleet, pods_file=rig.pods_file, env=rig.env(state))
    assert run.returncode == 0, f"{state}: {run.stderr[-4000:]}"
    story.applied(state)
    wrong = [line for pod in PODS for line in readback(rig, story, pod, state)]
    assert not wrong, "\n".join(wrong)
    checked = check(rig.fleet, pods_file=rig.pods_file, env=rig.env(state))
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-2000:]
    again = apply(rig.fleet, pods_file=rig.pods_file, env=rig.env(state))
    assert (again.returncode, again.hosts("success")) == (0, set()), again.stderr[-4000:]


def plant(rig: Rig, story: Story, path: str, content: bytes, mode: str) -> None:
    """Write a file of the user's at ``path`` on both pods, its directories too."""
    for pod in PODS:
        rig.fleet.out(
            pod, f"mkdir -p {Path(path).parent} && cat > {path} && chmod {mode} {path}", content
        )
    story.users[path] = (content, mode)


def tidy(rig: Rig, story: Story) -> None:
    """Take away by hand what the example left of the user's and what podstate left
    installed, so that the next example starts from the same pods."""
    paths = " ".join(sorted(with_parents(set(story.users)) - THERE, reverse=True))
    for pod in PODS:
        rig.fleet.out(pod, f"rm -rf {paths}; dpkg --purge {' '.join(PACKAGES)} >/dev/null")
