"""The probe's program, pinned: for a few sets of ``PodProbe``'s arguments, the sh program the
probe sends is the one in ``fixtures/probe_programs.json``, byte for byte, with each of
podstate's scripts (``scripts/*.sh``, tested on their own) shown as ``<script NAME>``.

A change to a section's lines, or to the order the sections run in, shows here as a diff
of the program; where it is meant, write the fixture again:
``python -m tests.test_probe_program`` (then read the diff before committing it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from podstate.shell import script

FIXTURE = Path(__file__).parent / "fixtures" / "probe_programs.json"
SCRIPTS = Path(__file__).resolve().parent.parent / "podstate" / "scripts"

# Every argument set, as roles build them (a deploy's whole request, one role's alone).
FULL: dict[str, Any] = {
    "paths": ["/scratch", "/scratch/tmp", "/opt/venv", "~/.ipython", "/workspace", "/vol"],
    "files": ["/etc/profile.d/podstate.sh", "~/.bashrc", "/etc/x.conf", "/vol/.podstate/boot.sh"],
    "venv": {
        "path": "/opt/venv",
        "python": "python3",
        "uv": "/opt/.podstate/uv",
        "distributions": "requests pip",
        "snapshot": "/workspace/snap",
    },
    "free": ["/workspace", "/scratch"],
    "occupied": ["/scratch"],
    "download": {"seconds": 5, "url": "https://example.com/x", "min_mbps": 100},
    "apt": ["git", "zstd"],
    "repos": [{"path": "/root/code", "ref": "main", "ask": True}],
    "secrets": ["HF_TOKEN", "WANDB_API_KEY"],
    "environ": ["A", "NCCL_P2P_DISABLE", "TMPDIR"],
    "inert": ["cron", "sshd"],
    "lock_wait": 60,
    "boot": {"keys": "/vol/.podstate/boot", "identity": ["RUNPOD_POD_ID"]},
    "made": {
        "volume": "/vol",
        "identity": ["RUNPOD_POD_ID"],
        "keep": ["/scratch", "/root/code", "/opt/venv"],
    },
}
CASES: dict[str, dict[str, Any]] = {
    "nothing asked": {"paths": [], "files": []},
    "a role alone": {"paths": ["/scratch"], "files": [], "free": ["/scratch"], "lock_wait": 3},
    "files alone": {"paths": [], "files": ["~/.bashrc", "/etc/x y.conf"]},
    "secrets file only": {"paths": [], "files": [], "secrets": [], "apt": None, "repos": None},
    "boot without keys": {"paths": ["/w"], "files": [], "boot": {"identity": []}},
    "everything": FULL,
}


def masked(text: str) -> str:
    """Return the program ``text`` with each of podstate's scripts in it as ``<script NAME>``,
    the longest first, so that a change to a script alone leaves the pin as it is."""
    scripts = sorted(SCRIPTS.glob("*.sh"), key=lambda p: -len(script(p.name)))
    for path in scripts:
        body = script(path.name)
        if body.strip():
            text = text.replace(body, f"<script {path.name}>")
    return text


def programs() -> dict[str, str]:
    """Return each case's program, masked, by the case's name."""
    from podstate.facts.probe import program

    return {name: masked(program(**arguments)) for name, arguments in CASES.items()}


def test_the_probe_program_is_the_pinned_one():
    pinned = json.loads(FIXTURE.read_text())
    found = programs()
    assert set(found) == set(pinned)
    for name, text in found.items():
        assert text.splitlines() == pinned[name].splitlines(), name
        assert text == pinned[name], name


def test_the_pin_masks_only_whole_scripts():
    """Every case reads at least the scripts every probe runs, and no script's text is left
    in a pinned program beside its mark."""
    for name, text in programs().items():
        assert "<script enc.sh>" in text and "<script gpu_state.sh>" in text, name
        assert "enc() {" not in text.replace("<script enc.sh>", ""), name


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(programs(), indent=1, sort_keys=True) + "\n")
