"""The probe's arguments that a ``Request`` makes, pinned: for the deploy's whole request of
tests/test_roles.py's FULL state, and for requests with each section's optional parts left
out, ``Request.arguments()`` is the dict pyinfra's fact is called with, byte for byte
(``repr``: its keys' order, lists and tuples as they are), and the probe's stdin is the one
pinned by its sha256. The sections' requests are typed records; what the probe takes is
plain data, and this file holds the one to the other."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podstate.facts import boot as boot_facts
from podstate.facts import download as download_facts
from podstate.facts import made as made_facts
from podstate.facts import repos as repo_facts
from podstate.facts import venv as venv_facts
from podstate.facts.request import Request
from podstate.inventory.fleet import desired
from podstate.pod import probe as deploy_probe
from podstate.pod import uninstall
from podstate.roles import boot, download, repos, venv
from tests.test_roles import FULL

ID = ("RUNPOD_POD_ID",)

# tests/test_roles.py's FULL state's whole request, as PodProbe is called with it.
FULL_ARGUMENTS: dict[str, Any] = {
    "paths": [
        "/scratch",
        "/scratch/tmp",
        "/workspace/pip",
        "/opt/venv",
        "/etc/profile.d",
        "/etc",
        "~/.ipython/profile_default/startup",
        "~/.ipython/profile_default",
        "~/.ipython",
        "/workspace",
        "/root/code",
        "/root",
        "/vol",
        "/vol/.podstate/boot",
        "/vol/.podstate/made",
    ],
    "files": [
        "/etc/profile.d/podstate.sh",
        "~/.bashrc",
        "~/.zshenv",
        "/etc/profile.d/podstate.json",
        "~/.ipython/profile_default/startup/00-podstate.py",
        "/etc/x.conf",
        "~/.ssh/authorized_keys",
        "/etc/podstate/ready",
        "/vol/.podstate/applied",
        "/usr/local/bin/podstate-ready",
        "/vol/.podstate/bin/podstate-ready",
        "/vol/.podstate/boot.sh",
        "/vol/.podstate/boot/state",
        "/etc/podstate/boot",
    ],
    "venv": {
        "path": "/opt/venv",
        "python": "python3",
        "uv": "/opt/.podstate/uv",
        "distributions": "requests pip",
        "snapshot": "/workspace/snap",
    },
    "environ": ["A", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE", "PIP_CACHE_DIR", "TMPDIR"],
    "inert": [
        "apache2",
        "atd",
        "caddy",
        "cron",
        "crond",
        "dbus-daemon",
        "httpd",
        "nginx",
        "rsyslogd",
        "sleep",
        "sshd",
        "syslogd",
        "tail",
    ],
    "free": ["/workspace"],
    "occupied": ["/scratch"],
    "download": {"seconds": 5, "url": "https://example.com/x", "min_mbps": 100},
    "apt": ["git"],
    "repos": [{"path": "/root/code", "ref": "main", "ask": True}],
    "boot": {"keys": "/vol/.podstate/boot", "identity": ID},
    "made": {"volume": "/vol", "identity": ID, "keep": ("/scratch", "/root/code", "/opt/venv")},
    "secrets": [],
}
# The sha256 of the probe's stdin for that request, waiting 3 s for a live lock.
FULL_STDIN = "bde36bf52036e566bf8f84b9120aec547546537ec629d1e49c17563726d33012"


def test_the_full_request_makes_the_pinned_arguments():
    request = deploy_probe.request(desired(FULL))
    assert repr(request.arguments()) == repr(FULL_ARGUMENTS)
    assert hashlib.sha256("".join(request.stdin(3)).encode()).hexdigest() == FULL_STDIN


def test_the_requests_are_hashable_so_merge_compares_them():
    request = deploy_probe.request(desired(FULL))
    assert hash(request.venv) == hash(venv.reads(desired(FULL)).venv)
    assert request.merge(request) == request and request.merge(Request()) == request
    assert all(hash(repo) for repo in request.repos)


@pytest.mark.parametrize(
    "section,sent",
    [
        ("venv", {"path": "/opt/venv", "python": "python3", "uv": "/opt/.podstate/uv"}),
        ("download", {"seconds": 5, "url": "https://example.com/x", "min_mbps": 100}),
    ],
)
def test_a_section_without_its_optional_parts_sends_what_it_did(section: str, sent: Any):
    wanted = {
        "venv": {"path": "/opt/venv", "packages": []},
        "download": {"url": "https://example.com/x", "min_mbps": 100},
    }
    request = deploy_probe.request(desired({section: wanted[section]}))
    found = request.arguments()[section]
    if section == "venv":
        sent = {**sent, "distributions": found["distributions"]}
    assert repr(found) == repr(sent)


def test_a_role_alone_sends_its_own_section_as_it_did(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PODSTATE_TEST_DEPLOY_KEY", "not a key")
    wanted = desired({"boot": {"hook": True, "volume": "/vol"}})
    assert repr(boot.reads(wanted).arguments()["boot"]) == repr({"keys": None, "identity": ID})
    assert download.reads(wanted).arguments()["download"] is None
    assert repos.reads(wanted).arguments()["repos"] is None
    two = {
        "/a": {"url": "https://github.com/a/a.git", "ref": "v1"},
        "/b": {
            "url": "git@github.com:a/b.git",
            "ref": "main",
            "ssh_key": {"from_env": "PODSTATE_TEST_DEPLOY_KEY"},
        },
    }
    sent = repos.reads(desired({"repos": two})).arguments()["repos"]
    assert repr(sent) == repr(
        [{"path": "/a", "ref": "v1", "ask": True}, {"path": "/b", "ref": "main", "ask": False}]
    )


def test_uninstall_reads_the_records_keeping_nothing():
    sent = uninstall.reads("/workspace").arguments()
    assert repr(sent["made"]) == repr({"volume": "/workspace", "identity": ID, "keep": ()})
    assert sent["boot"] is None and sent["venv"] is None and sent["repos"] is None


def test_each_section_sends_its_records_fields_by_their_names():
    """A section's plain argument has a key for each field of its record, by the same name
    (a venv without a snapshot: none for it)."""
    records = [
        (venv_facts.sent, venv_facts.VenvRequest("/v", "python3", "/uv", "a b", "/s")),
        (download_facts.sent, download_facts.DownloadRequest(5, "https://x", 1.5)),
        (boot_facts.sent, boot_facts.BootRequest("/d", ("A", "B"))),
        (made_facts.sent, made_facts.MadeRequest("/vol", ("A",), ("/k",))),
    ]
    for sent, record in records:
        assert sent(record) == vars(record) and sent(None) is None
    bare = venv_facts.VenvRequest("/v", "python3", "/uv", "")
    assert venv_facts.sent(bare) == {
        "path": "/v",
        "python": "python3",
        "uv": "/uv",
        "distributions": "",
    }
    assert repo_facts.sent(()) is None


_REPOS = st.lists(
    st.builds(
        repo_facts.RepoRequest,
        st.sampled_from(["/a", "/b", "/c d"]),
        st.sampled_from(["main", "v1"]),
        st.booleans(),
    ),
    max_size=4,
    unique=True,  # one role asks each repository once
)


@settings(max_examples=60, deadline=None)
@given(_REPOS, _REPOS)
def test_merged_repos_are_sent_once_each_in_order(mine: list[Any], theirs: list[Any]):
    merged = Request(repos=tuple(mine)).merge(Request(repos=tuple(theirs)))
    once = list(dict.fromkeys([*mine, *theirs]))
    sent = merged.arguments()["repos"]
    assert sent == ([vars(r) for r in once] or None)
