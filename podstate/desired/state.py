"""The desired state, typed: one frozen dataclass per section, and ``State`` holding them.

``podstate.desired.typed.build`` makes a ``State`` from the normalized state
(``spec.normalize``, which applies every default, once); roles read its attributes.
A section the desired state does not set is None (an absent section leaves its concern
alone); ``disk_reserve`` is always set. Modes and choices are ``Literal``s. What is
written as a mapping in YAML (paths, names) stays a ``Mapping`` in the order it was given.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from podstate.desired.secret import Secret
from podstate.paths import VOLUME  # where the volume is when boot.volume does not say

NcclMode = Literal["auto", "disable", "leave"]
Installer = Literal["uv", "pip"]
HostKeys = Literal["keep", "new"]
IdleAction = Literal["report", "stop"]


@dataclass(frozen=True)
class Scratch:
    """One ``scratch`` path: a tmpfs (or local directory) of ``size`` bytes."""

    size: int
    mode: str  # octal, as stat prints it: "1777"


@dataclass(frozen=True)
class Shm:
    """``shm``: the least size /dev/shm must have, in bytes."""

    min_size: int


@dataclass(frozen=True)
class Nccl:
    """``nccl``: whether podstate sets NCCL_P2P_DISABLE and NCCL_IB_DISABLE."""

    p2p: NcclMode
    ib: NcclMode


@dataclass(frozen=True)
class Gpu:
    """``gpu``: what the pod's GPUs must be; None for a requirement not set."""

    count: int | None = None
    model: str | None = None  # a glob on the GPU's name
    min_memory: int | None = None  # bytes per GPU
    min_driver: str | None = None  # a version: "550.54"
    min_cuda: str | None = None  # a version: "12.4"
    max_temperature: int | None = None  # °C
    healthy: bool | None = None  # None: not set (False asks nothing either)


@dataclass(frozen=True)
class Disk:
    """``disk``: the least free space, in bytes, at each path."""

    min_free: Mapping[str, int]


@dataclass(frozen=True)
class Download:
    """``download``: the rate a download of ``url`` must reach, sampled ``seconds``."""

    url: str
    min_mbps: float  # an int where the YAML gave one (it counts in the digest as written)
    seconds: int


@dataclass(frozen=True)
class Venv:
    """``venv``: a virtual environment at ``path``, with the requirements file's text read."""

    path: str
    python: str
    packages: tuple[str, ...]
    requirements: str | None  # the requirements file's content
    requirements_file: str | None  # its name, relative to the vars directory
    installer: Installer
    index_url: str | None
    extra_index_urls: tuple[str, ...]
    find_links: tuple[str, ...]
    no_index: bool
    snapshot: str | None  # where its packed copy is kept on the volume
    seed: bool  # pip installed in it
    compile: bool  # byte-compiled at build


@dataclass(frozen=True)
class Packages:
    """``packages``: Debian packages, each once, and whether podstate removes its own."""

    apt: tuple[str, ...]
    remove_undeclared: bool = False


@dataclass(frozen=True)
class File:
    """One ``files`` path: its whole content and its mode as stat prints it ("644")."""

    content: str
    mode: str


@dataclass(frozen=True)
class Repo:
    """One ``repos`` path: a git checkout of ``url`` at ``ref``."""

    url: str
    ref: str
    ssh_key: Secret | None  # a deploy key, read when the run started


@dataclass(frozen=True)
class Boot:
    """``boot``: the boot hook, what it does with host keys, and where the volume is."""

    hook: bool
    host_keys: HostKeys
    volume: str


@dataclass(frozen=True)
class Processes:
    """``processes``: names to leave alone (``inert``) and names that matter."""

    inert: tuple[str, ...]
    matter: tuple[str, ...]


@dataclass(frozen=True)
class Waiver:
    """One waiver: findings matching ``finding`` (a glob) fail nothing until ``until``."""

    finding: str
    until: datetime.date
    reason: str


@dataclass(frozen=True)
class Idle:
    """``idle``: what ``podstate watch`` does after ``after`` seconds idle."""

    after: int
    action: IdleAction


@dataclass(frozen=True)
class Watch:
    """``watch``: whether ``podstate watch`` only checks the pod (``hold``)."""

    hold: bool


@dataclass(frozen=True)
class State:
    """One pod's desired state: a field per section of schema/pod.schema.json, None where
    the desired state does not set that section."""

    disk_reserve: int  # bytes the container disk must keep free (2G unless set)
    scratch: Mapping[str, Scratch] | None = None
    dirs: Mapping[str, str] | None = None  # variable -> directory
    env: Mapping[str, str] | None = None
    path: tuple[str, ...] | None = None  # prepended to PATH, first listed first
    shm: Shm | None = None
    nccl: Nccl | None = None
    gpu: Gpu | None = None
    disk: Disk | None = None
    download: Download | None = None
    venv: Venv | None = None
    packages: Packages | None = None
    files: Mapping[str, File] | None = None
    authorized_keys: tuple[str, ...] | None = None  # () removes podstate's block
    repos: Mapping[str, Repo] | None = None
    secrets: Mapping[str, Secret] | None = None
    boot: Boot | None = None
    processes: Processes | None = None
    waivers: tuple[Waiver, ...] | None = None
    idle: Idle | None = None
    watch: Watch | None = None

    @property
    def volume(self) -> str:
        """Return where the pod's volume is: ``boot.volume``, else /workspace."""
        return self.boot.volume if self.boot is not None else VOLUME

    @property
    def scratch_paths(self) -> tuple[str, ...]:
        """Return the scratch paths, in the order given (none when unset)."""
        return tuple(self.scratch or ())

    @property
    def dir_paths(self) -> tuple[str, ...]:
        """Return the directories ``dirs`` names, in the order given (none when unset)."""
        return tuple((self.dirs or {}).values())
