"""The typed desired state (podstate.desired.state, built by podstate.desired.typed): each
section's types and defaults, and that every state the schema accepts builds one State,
the same every time, which gives back the normalized dict and so the same ready digest."""

from __future__ import annotations

import datetime
import hashlib
import json
import tempfile
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from podstate.desired import state as s
from podstate.desired.errors import Layer
from podstate.desired.secret import Secret
from podstate.desired.spec import resolve
from podstate.desired.typed import as_data, build
from podstate.facts.marker import NOT_APPLIED, digest

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGmYcG6NWlP6zxDiXGHDwC4whjAQALSZ3F6gIKZEhofW a@x"
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f"


def digest_of_dict(normalized: dict[str, Any]) -> str:
    """Return the ready digest of a normalized state as podstate computed it from the dict
    before the state was typed."""
    applied = {k: v for k, v in normalized.items() if k not in NOT_APPLIED}
    text = json.dumps(applied, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def typed(raw: dict[str, Any], root: Path | None = None) -> s.State:
    """Return the State of ``raw``, a desired state as a vars file writes it."""
    return build(resolve([Layer("test.yaml", raw, root)], "pod"))


def test_a_state_that_sets_nothing_has_only_the_disk_reserve():
    state = typed({})
    assert state == s.State(disk_reserve=2 << 30)
    assert state.volume == "/workspace"
    assert state.scratch_paths == () and state.dir_paths == ()


def test_scratch_sizes_are_bytes_and_modes_as_stat_reads_them():
    state = typed({"scratch": {"/scratch//x/": {"size": "1G"}, "/t": {"size": 5, "mode": "0700"}}})
    assert state.scratch == {"/scratch/x": s.Scratch(1 << 30, "1777"), "/t": s.Scratch(5, "700")}
    assert state.scratch_paths == ("/scratch/x", "/t")


def test_a_scratch_below_another_comes_after_it_and_the_rest_keep_their_order():
    given = {"/z": {"size": 1}, "/n/in/most": {"size": 1}, "/n/in": {"size": 1}, "/n": {"size": 1}}
    assert typed({"scratch": given}).scratch_paths == ("/z", "/n", "/n/in", "/n/in/most")
    assert typed({"scratch": {"/n-x": {"size": 1}, "/n/x": {"size": 1}}}).scratch_paths == (
        "/n-x",  # a name that begins with another's is not below it
        "/n/x",
    )


@given(st.lists(st.lists(st.sampled_from("ab"), min_size=1, max_size=4), max_size=8))
@settings(max_examples=300, deadline=None)
def test_scratch_paths_come_parents_first_in_the_order_given(parts: list[list[str]]):
    """Every scratch path comes after each one it lies below, and a state with no scratch
    below another keeps the order given."""
    given = list(dict.fromkeys("/" + "/".join(p) for p in parts))
    paths = typed({"scratch": {p: {"size": 1} for p in given}}).scratch_paths
    assert sorted(paths) == sorted(given)
    for i, path in enumerate(paths):
        assert not any(path.startswith(p + "/") for p in paths[i + 1 :])
    tops = [p for p in given if not any(p.startswith(q + "/") for q in given)]
    assert typed({"scratch": {p: {"size": 1} for p in tops}}).scratch_paths == tuple(tops)


def test_dirs_env_and_path_keep_their_order_and_normalize_paths():
    state = typed({"dirs": {"B": "/b/", "A": "/a"}, "env": {"X": "1"}, "path": ["/p//q", "/r"]})
    assert list(state.dirs or {}) == ["B", "A"] and state.dir_paths == ("/b", "/a")
    assert state.env == {"X": "1"}
    assert state.path == ("/p/q", "/r")


def test_shm_nccl_and_disk_reserve_defaults():
    state = typed({"shm": {"min_size": "64M"}, "nccl": {"ib": "leave"}, "disk_reserve": "1K"})
    assert state.shm == s.Shm(64 << 20)
    assert state.nccl == s.Nccl(p2p="auto", ib="leave")
    assert state.disk_reserve == 1024


def test_gpu_requirements_not_set_are_none():
    state = typed({"gpu": {"count": 2, "min_memory": "80G", "healthy": False}})
    assert state.gpu == s.Gpu(count=2, min_memory=80 << 30, healthy=False)
    assert state.gpu is not None and state.gpu.model is None and state.gpu.min_cuda is None


def test_disk_and_download_defaults():
    state = typed({"disk": {}, "download": {"url": "https://x/f", "min_mbps": 2.5}})
    assert state.disk == s.Disk(min_free={})
    assert state.download == s.Download(url="https://x/f", min_mbps=2.5, seconds=5)
    state = typed({"disk": {"min_free": {"/w/": "1K"}}})
    assert state.disk == s.Disk(min_free={"/w": 1024})


def test_venv_defaults_are_applied_once_and_lists_are_tuples(tmp_path):
    (tmp_path / "req.txt").write_text("numpy==2.1.3\n")
    state = typed({"venv": {"path": "/opt/venv/", "requirements": "req.txt"}}, tmp_path)
    assert state.venv == s.Venv(
        path="/opt/venv",
        python="python3",
        packages=(),
        requirements="numpy==2.1.3\n",
        requirements_file="req.txt",
        installer="uv",
        index_url=None,
        extra_index_urls=(),
        find_links=(),
        no_index=False,
        snapshot=None,
        seed=True,
        compile=True,
    )
    state = typed({"venv": {"path": "/v", "installer": "pip", "find_links": ["/w//h"]}})
    assert state.venv is not None
    assert (state.venv.installer, state.venv.find_links) == ("pip", ("/w/h",))


def test_packages_are_listed_once_and_remove_undeclared_defaults_to_false():
    state = typed({"packages": {"apt": ["git", "tmux", "git"]}})
    assert state.packages == s.Packages(apt=("git", "tmux"), remove_undeclared=False)
    state = typed({"packages": {"remove_undeclared": True}})
    assert state.packages == s.Packages(apt=(), remove_undeclared=True)


def test_files_keys_repos_and_secrets(monkeypatch):
    monkeypatch.setenv("PODSTATE_TEST_TOKEN", "t0ken")
    state = typed(
        {
            "files": {"/etc/x": {"content": "a\n"}, "/etc/y": {"content": "", "mode": "0600"}},
            "authorized_keys": [KEY, KEY + " again"],
            "repos": {"/code/x/": {"url": "https://h/x.git", "ref": "v1"}},
            "secrets": {"TOKEN": {"from_env": "PODSTATE_TEST_TOKEN"}},
        }
    )
    assert state.files == {"/etc/x": s.File("a\n", "644"), "/etc/y": s.File("", "600")}
    assert state.authorized_keys == (KEY,)
    assert state.repos == {"/code/x": s.Repo("https://h/x.git", "v1", None)}
    assert state.secrets == {"TOKEN": Secret("secrets.TOKEN.from_env", "t0ken")}
    assert typed({"authorized_keys": []}).authorized_keys == ()


def test_boot_processes_waivers_idle_and_watch_defaults():
    until = datetime.date.today().isoformat()
    state = typed(
        {
            "boot": {"volume": "/vol/"},
            "processes": {"inert": ["redis-server"]},
            "waivers": [{"finding": "gpu.*", "until": until, "reason": "r"}],
            "idle": {"after": "2h"},
            "watch": {},
        }
    )
    assert state.boot == s.Boot(hook=False, host_keys="new", volume="/vol")
    assert state.volume == "/vol"
    assert state.processes == s.Processes(inert=("redis-server",), matter=())
    assert state.waivers == (s.Waiver("gpu.*", datetime.date.today(), "r"),)
    assert state.idle == s.Idle(after=7200, action="report")
    assert state.watch == s.Watch(hold=False)


def test_the_state_is_frozen():
    state = typed({"shm": {"min_size": 1}})
    try:
        state.shm = None  # type: ignore[misc]
    except AttributeError:
        return
    raise AssertionError("a State's sections can be replaced")


# -- every state the schema accepts, from small strategies per section ------------------

PATHS = st.sampled_from(["/scratch", "/opt/x/", "/a//b/../c", "/w/tmp", "/root/data"])
SIZES = st.one_of(st.integers(1, 2**41), st.sampled_from(["64M", "16G", "1.5T", "512 M", "7"]))
MODES = st.sampled_from(["1777", "755", "0644", "700"])
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True)  # env's; dirs' D_, secrets' S_
TEXT = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"), max_size=8)
URLS = st.sampled_from(["https://h/x.git", "git@h:o/r.git", "file:///srv/r"])
NCCL = st.sampled_from(["auto", "disable", "leave"])
LOCATIONS = st.sampled_from(["https://pypi.org/simple", "/w/wheels/", "./x"])


def _optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Return dictionaries with any of ``fields``."""
    return st.fixed_dictionaries({}, optional=fields)


def _secret_source() -> st.SearchStrategy[dict[str, str]]:
    return st.sampled_from([{"from_env": "HOME"}, {"from_file": "token"}])


def _boot() -> st.SearchStrategy[dict[str, Any]]:
    hooked = st.fixed_dictionaries({"hook": st.just(True)}, optional={"host_keys": st.just("keep")})
    plain = _optional(hook=st.booleans(), host_keys=st.just("new"), volume=PATHS)
    return st.one_of(hooked, plain)


def _waiver() -> st.SearchStrategy[dict[str, str]]:
    days = st.integers(0, 90).map(lambda d: str(datetime.date.today() + datetime.timedelta(d)))
    return st.fixed_dictionaries(
        {
            "finding": st.sampled_from(["gpu.*", "shm.min_size"]),
            "until": days,
            "reason": TEXT.filter(bool),
        }
    )


SECTIONS: dict[str, st.SearchStrategy[Any]] = {
    "scratch": st.dictionaries(
        PATHS, st.fixed_dictionaries({"size": SIZES}, optional={"mode": MODES}), max_size=3
    ),
    "dirs": st.dictionaries(st.from_regex(r"D_[A-Z]{1,3}", fullmatch=True), PATHS, max_size=3),
    "env": st.dictionaries(NAMES, TEXT, max_size=3),
    "path": st.lists(PATHS, max_size=3),
    "shm": st.fixed_dictionaries({"min_size": SIZES}),
    "nccl": _optional(p2p=NCCL, ib=NCCL),
    "gpu": _optional(
        count=st.integers(0, 8),
        model=st.sampled_from(["*A100*", "H100"]),
        min_memory=SIZES,
        min_driver=st.sampled_from(["550", "550.54"]),
        min_cuda=st.sampled_from(["12.4"]),
        max_temperature=st.integers(1, 150),
        healthy=st.booleans(),
    ),
    "disk": _optional(min_free=st.dictionaries(PATHS, SIZES, max_size=2)),
    "download": st.fixed_dictionaries(
        {
            "url": st.just("https://x/f"),
            "min_mbps": st.one_of(st.integers(1, 900), st.floats(0.5, 900)),
        },
        optional={"seconds": st.integers(1, 60)},
    ),
    "disk_reserve": SIZES,
    "venv": st.fixed_dictionaries(
        {"path": st.sampled_from(["/opt/venv", "/v//e/"])},
        optional={
            "python": st.sampled_from(["python3", "/usr/bin/python3.11"]),
            "packages": st.lists(
                st.sampled_from(["numpy==2.1.3", "torch  >=2", "pip"]), max_size=3
            ),
            "requirements": st.just("req.txt"),
            "installer": st.sampled_from(["uv", "pip"]),
            "index_url": LOCATIONS,
            "extra_index_urls": st.lists(LOCATIONS, max_size=2),
            "find_links": st.lists(LOCATIONS, max_size=2),
            "no_index": st.booleans(),
            "snapshot": st.just("/workspace/snap"),
            "seed": st.booleans(),
            "compile": st.booleans(),
        },
    ),
    "packages": _optional(
        apt=st.lists(st.sampled_from(["git", "tmux", "git-lfs"]), max_size=4),
        remove_undeclared=st.booleans(),
    ),
    "files": st.dictionaries(
        st.sampled_from(["/etc/a", "/root/b.conf"]),
        st.one_of(
            st.fixed_dictionaries({"content": TEXT}, optional={"mode": MODES}),
            st.fixed_dictionaries({"src": st.just("token")}, optional={"mode": MODES}),
        ),
        max_size=2,
    ),
    "authorized_keys": st.lists(st.sampled_from([KEY, OTHER_KEY, OTHER_KEY + " c"]), max_size=3),
    "repos": st.dictionaries(
        st.sampled_from(["/code/a", "/code/b/"]),
        st.fixed_dictionaries(
            {"url": URLS, "ref": st.sampled_from(["main", "v1.2"])},
            optional={"ssh_key": _secret_source()},
        ),
        max_size=2,
    ),
    "secrets": st.dictionaries(
        st.from_regex(r"S_[A-Z]{1,3}", fullmatch=True), _secret_source(), max_size=2
    ),
    "boot": _boot(),
    "processes": _optional(
        inert=st.lists(st.sampled_from(["sleep", "redis"]), max_size=2),
        matter=st.lists(st.sampled_from(["nginx"]), max_size=2),
    ),
    "waivers": st.lists(_waiver(), max_size=2),
    "idle": st.fixed_dictionaries(
        {"after": st.one_of(st.integers(1, 10**6), st.sampled_from(["90s", "30m", "2h", "1d"]))},
        optional={"action": st.sampled_from(["report", "stop"])},
    ),
    "watch": _optional(hold=st.booleans()),
}


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({}, optional=SECTIONS))
def test_every_accepted_state_builds_one_state_that_gives_its_data_and_digest_back(raw):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "req.txt").write_text("numpy==2.1.3\n")
        (root / "token").write_text("value\n")
        normalized = resolve([Layer("test.yaml", raw, root)], "pod")
    state = build(normalized)
    assert build(normalized) == state  # deterministic
    assert set(raw) - {"disk_reserve"} == {k for k in SECTIONS if getattr(state, k) is not None} - {
        "disk_reserve"
    }
    assert as_data(state) == normalized
    assert digest(state) == digest_of_dict(normalized)  # a ready pod stays ready


DEFAULTS_DIGEST = "356d9ec344df3982fff3168fd69928bfdab5dc91a14a2676f27f8948b6b5bf06"
FULL = {
    "scratch": {"/scratch": {"size": "16G"}},
    "dirs": {"TMPDIR": "/scratch/tmp"},
    "env": {"A": "1"},
    "path": ["/opt/bin"],
    "shm": {"min_size": "16G"},
    "nccl": {"p2p": "disable"},
    "venv": {"path": "/opt/venv", "packages": ["numpy==2.1.3"]},
    "packages": {"apt": ["git"], "remove_undeclared": True},
    "files": {"/etc/x": {"content": "a\n"}},
    "repos": {"/code/x": {"url": "https://h/x.git", "ref": "v1"}},
    "secrets": {"TOKEN": {"from_env": "PODSTATE_TEST_TOKEN"}},
    "boot": {"hook": True, "host_keys": "keep"},
    "processes": {"inert": ["redis"]},
    "gpu": {"count": 1},
    "download": {"url": "https://x/f", "min_mbps": 5},
}
FULL_DIGEST = "57faa264d55caa40f0bac9096dcced25a15b6b60a0308a6bc9f587038ed347d9"


def test_the_ready_digest_of_a_state_is_the_one_earlier_versions_wrote(monkeypatch):
    """A pod made ready before the typed state still reads as ready: the digests below are
    what podstate wrote in its markers for these states before."""
    defaults = yaml.safe_load(files("podstate.desired").joinpath("defaults.yaml").read_text())
    assert digest(typed(defaults)) == DEFAULTS_DIGEST
    monkeypatch.setenv("PODSTATE_TEST_TOKEN", "another value: secrets count by their source")
    assert digest(typed(FULL)) == FULL_DIGEST
