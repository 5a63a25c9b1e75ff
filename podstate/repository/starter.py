"""What ``podstate init`` writes: a repository of the user's own, with podstate a pinned
dependency; and which of podstate's starter files in it are older than this version.

Two kinds of file. podstate's starter files (``MANAGED``: pyinfra's config.py, the
inventory, the deploy) are a few lines that call the installed package, so an upgrade
changes none of them; each carries a marker line with its version, and when a version of
podstate needs a new one, every run names the file and ``podstate init --update`` rewrites
it. The others (the vars, the pods example, .gitignore, requirements.txt, CI workflows) are
the user's: written once, never again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata
from importlib.resources import files
from pathlib import Path

MARKER = "# podstate starter file, version {} (podstate init --update rewrites it)"
_MARKED = re.compile(r"# podstate starter file, version ([0-9]+)\b")
UPDATE = "podstate init --update"

CONFIG = '''\
"""pyinfra's settings for podstate: pyinfra reads config.py from the working directory.

It is the first code of podstate's a run loads: Ctrl-C handling, the open-files limit, the
connect timeout and the parallelism (podstate.inventory.entry.configure).
"""

from podstate.inventory.entry import configure

configure()
'''
INVENTORY = '''\
"""pyinfra inventory: your pods, each with its desired state (podstate.inventory.entry).

The pods come from inventories/pods.yaml (PODSTATE_PODS: another file) or from RunPod's or
Vast's API (RUNPOD_API_KEY, VAST_API_KEY; PODSTATE_INVENTORY chooses); their desired state
from group_vars/ and host_vars/ here (PODSTATE_VARS: another directory) over podstate's
shipped defaults, validated before any pod is contacted.
"""

from podstate.inventory.entry import groups

globals().update(groups())
'''
DEPLOY = '''\
"""podstate's deploy: every role, in order, from one probe of the pod (podstate.pod.deploy).

Your own deploy files go beside it, and run with it from the repository root: ``pyinfra -y
inventories/pods.py deploy/*.py``. The pod lock and the report span every file.
"""

from podstate.pod import deploy

deploy.run()
'''
# podstate's starter files: path -> (version, text after the marker line). Change a text,
# and its version goes up by one (tests/test_new_user.py holds each text's hash).
MANAGED = {
    "config.py": (1, CONFIG),
    "inventories/pods.py": (1, INVENTORY),
    "deploy/pod.py": (1, DEPLOY),
}

ALL_YAML_HEADER = """\
# Desired state for every pod: yours to edit. Group files (group_vars/<group>.yaml: community,
# secure, or your own groups) and host files (host_vars/<pod>.yaml) override it key by key.
# A key no file sets takes podstate's shipped default, of the version installed: they are
# below, commented out, as they were when `podstate init` wrote this file. Uncomment a key to
# change it; set one to null to drop a default (`scratch: {/scratch: null}`). `podstate show
# POD` shows a pod's whole state and the file each value comes from.
"""
GITIGNORE = """\
# podstate's local state: sandbox pods, the host-key store CI keeps, reports, pyinfra's log
.sandbox/
.podstate/
podstate-check.*
pyinfra-debug.log
__pycache__/
"""
# The CI examples (examples/ci/, installed as podstate/ci/) written for a repository that pins
# podstate in requirements.txt, and where in it: name -> (path, what changes in it).
WORKFLOWS = {
    name: (
        f".github/workflows/{name}",
        (
            (f": copy to .github/workflows/{name}.", "."),
            ("run: pip install .\n", "run: pip install -r requirements.txt\n"),
            ('"roles/**"]', '"requirements.txt"]'),
        ),
    )
    for name in ("podstate-check.yml", "podstate-pr.yml")
}


def version() -> str:
    """Return the installed podstate's version, which requirements.txt pins."""
    return metadata.version("podstate")


def managed(path: str) -> str:
    """Return the text of podstate's starter file ``path`` as this version writes it."""
    number, text = MANAGED[path]
    return f"{MARKER.format(number)}\n{text}"


def all_yaml() -> str:
    """Return the starter group_vars/all.yaml: the shipped defaults (their header replaced),
    every line that is not already a comment commented out, so that it sets nothing."""
    shipped = files("podstate.desired").joinpath("defaults.yaml").read_text(encoding="utf-8")
    body = shipped.split("\n\n", 1)[1]
    lines = [
        line if not line.strip() or line.lstrip().startswith("#") else f"# {line}"
        for line in body.splitlines()
    ]
    return ALL_YAML_HEADER + "\n" + "\n".join(lines) + "\n"


def _workflow(name: str) -> str:
    """Return the CI example ``name`` pointed at the user's repository; ValueError when the
    example no longer holds a line this changes (tests/test_new_user.py writes each)."""
    package = Path(__file__).resolve().parents[1]
    examples = package / "ci"  # installed: package data podstate.ci
    if not examples.is_dir():  # a checkout's own (an editable install maps no data folder)
        examples = package.parent / "examples" / "ci"
    text = (examples / name).read_text(encoding="utf-8")
    for old, new in WORKFLOWS[name][1]:
        if old not in text:
            raise ValueError(f"examples/ci/{name} holds no {old.strip()!r} to change")
        text = text.replace(old, new)
    return text


def repository() -> dict[str, str]:
    """Return every file ``podstate init`` writes, by path in the repository: the starter
    files, then the user's own."""
    found = {path: managed(path) for path in MANAGED}
    found["inventories/group_vars/all.yaml"] = all_yaml()
    found["inventories/pods.example.yaml"] = (
        files("podstate.repository").joinpath("pods.example.yaml").read_text(encoding="utf-8")
    )
    found[".gitignore"] = GITIGNORE
    found["requirements.txt"] = (
        "# podstate, pinned: an upgrade is a change of this version (pip install -r "
        f"requirements.txt)\npodstate=={version()}\n"
    )
    found.update({path: _workflow(name) for name, (path, _) in WORKFLOWS.items()})
    return found


@dataclass(frozen=True)
class Aged:
    """A starter file of podstate's in the repository that this version writes otherwise:
    ``found`` its version (None: no such file), ``wanted`` this version's."""

    path: str
    found: int | None
    wanted: int

    def line(self) -> str:
        """Return what a run says of it: the file, and the one command that updates it."""
        return (
            f"{self.path} is podstate's starter file version {self.found}; podstate "
            f"{version()} writes version {self.wanted}: run `{UPDATE}` to update it"
        )


def aged(root: Path) -> list[Aged]:
    """Return podstate's starter files in ``root`` that ``podstate init --update`` writes:
    those of an older version, and those missing (a version may add one); a run names the
    older ones. A file without the marker line is the user's own, a replacement: never
    named, never written."""
    out = []
    for path, (wanted, _) in MANAGED.items():
        try:
            with open(root / path, encoding="utf-8", errors="replace") as f:
                first = f.readline()
        except FileNotFoundError:
            out.append(Aged(path, None, wanted))
            continue
        except OSError:
            continue
        marked = _MARKED.match(first)
        if marked and int(marked.group(1)) < wanted:
            out.append(Aged(path, int(marked.group(1)), wanted))
    return out
