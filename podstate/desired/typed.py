"""The normalized desired state (``spec.normalize``'s dict, as host data carries it) made a
typed ``State``, and back.

``build`` is the one place a ``State`` is made; every default a section has is applied
here (where the normalized state already holds it, it is read as it is). ``as_data`` gives
the normalized dict back, equal to the one built from: the ready marker's digest, ``podstate
show`` and the check's JSON read that form, so a pod converged before reads as ready after.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from podstate.desired.secret import Secret
from podstate.desired.spec import DISK_RESERVE
from podstate.desired.state import (
    Boot,
    Disk,
    Download,
    File,
    Gpu,
    Idle,
    Nccl,
    Packages,
    Processes,
    Repo,
    Scratch,
    Shm,
    State,
    Venv,
    Waiver,
    Watch,
)

T = TypeVar("T")
_GPU = ("count", "model", "min_memory", "min_driver", "min_cuda", "max_temperature", "healthy")
_VENV_LISTS = ("packages", "extra_index_urls", "find_links")


def build(data: Mapping[str, Any]) -> State:
    """Return the typed ``State`` of ``data``, a normalized desired state; a section absent
    from ``data`` is None. Raises KeyError or TypeError for a dict that is not one."""
    return State(
        disk_reserve=int(data.get("disk_reserve", DISK_RESERVE)),
        scratch=_each(data.get("scratch"), lambda v: Scratch(v["size"], v["mode"])),
        dirs=_each(data.get("dirs"), str),
        env=_each(data.get("env"), str),
        path=_tuple(data.get("path")),
        shm=None if "shm" not in data else Shm(int(data["shm"]["min_size"])),
        nccl=None if "nccl" not in data else Nccl(**data["nccl"]),
        gpu=None if "gpu" not in data else Gpu(**data["gpu"]),
        disk=None if "disk" not in data else Disk(dict(data["disk"]["min_free"])),
        download=None if "download" not in data else Download(**data["download"]),
        venv=None if "venv" not in data else _venv(data["venv"]),
        packages=None if "packages" not in data else _packages(data["packages"]),
        files=_each(data.get("files"), lambda v: File(v["content"], v["mode"])),
        authorized_keys=_tuple(data.get("authorized_keys")),
        repos=_each(data.get("repos"), lambda v: Repo(v["url"], v["ref"], v["ssh_key"])),
        secrets=_each(data.get("secrets"), _secret),
        boot=None if "boot" not in data else Boot(**data["boot"]),
        processes=None if "processes" not in data else _processes(data["processes"]),
        waivers=None if "waivers" not in data else tuple(Waiver(**w) for w in data["waivers"]),
        idle=None if "idle" not in data else Idle(**data["idle"]),
        watch=None if "watch" not in data else Watch(**data["watch"]),
    )


def _each(items: Mapping[str, Any] | None, make: Callable[[Any], T]) -> dict[str, T] | None:
    """Return ``items`` with ``make`` applied to each value, in order; None for None."""
    return None if items is None else {key: make(value) for key, value in items.items()}


def _tuple(items: Iterable[str] | None) -> tuple[str, ...] | None:
    """Return ``items`` as a tuple; None for None."""
    return None if items is None else tuple(items)


def _secret(value: Secret) -> Secret:
    """Return ``value``, refused unless it is a Secret (read when the run started)."""
    if not isinstance(value, Secret):
        raise TypeError(f"a secret is read by the normalizer, not given as {type(value)}")
    return value


def _venv(item: Mapping[str, Any]) -> Venv:
    """Return the ``venv`` section; its lists as tuples."""
    fields: dict[str, Any] = {k: tuple(v) if k in _VENV_LISTS else v for k, v in item.items()}
    return Venv(**fields)


def _packages(item: Mapping[str, Any]) -> Packages:
    """Return the ``packages`` section; remove_undeclared, which the normalized state holds
    only when true, is False otherwise."""
    return Packages(tuple(item["apt"]), bool(item.get("remove_undeclared", False)))


def _processes(item: Mapping[str, Any]) -> Processes:
    """Return the ``processes`` section: both lists."""
    return Processes(tuple(item["inert"]), tuple(item["matter"]))


def as_data(state: State) -> dict[str, Any]:
    """Return the normalized dict ``state`` was built from (``build`` of a normalized
    state): what the ready marker's digest, ``podstate show`` and the check's JSON read."""
    out: dict[str, Any] = {"disk_reserve": state.disk_reserve}
    if state.scratch is not None:
        out["scratch"] = {p: {"size": s.size, "mode": s.mode} for p, s in state.scratch.items()}
    if state.dirs is not None:
        out["dirs"] = dict(state.dirs)
    if state.env is not None:
        out["env"] = dict(state.env)
    if state.path is not None:
        out["path"] = list(state.path)
    if state.shm is not None:
        out["shm"] = {"min_size": state.shm.min_size}
    if state.nccl is not None:
        out["nccl"] = {"p2p": state.nccl.p2p, "ib": state.nccl.ib}
    if state.gpu is not None:
        given = {key: getattr(state.gpu, key) for key in _GPU}
        out["gpu"] = {key: value for key, value in given.items() if value is not None}
    if state.disk is not None:
        out["disk"] = {"min_free": dict(state.disk.min_free)}
    if state.download is not None:
        d = state.download
        out["download"] = {"seconds": d.seconds, "url": d.url, "min_mbps": d.min_mbps}
    if state.venv is not None:
        out["venv"] = _venv_data(state.venv)
    if state.packages is not None:
        out["packages"] = {"apt": list(state.packages.apt)}
        if state.packages.remove_undeclared:
            out["packages"]["remove_undeclared"] = True
    if state.files is not None:
        out["files"] = {p: {"content": f.content, "mode": f.mode} for p, f in state.files.items()}
    if state.authorized_keys is not None:
        out["authorized_keys"] = list(state.authorized_keys)
    if state.repos is not None:
        out["repos"] = {
            p: {"url": r.url, "ref": r.ref, "ssh_key": r.ssh_key} for p, r in state.repos.items()
        }
    if state.secrets is not None:
        out["secrets"] = dict(state.secrets)
    out.update(_watched(state))
    return out


def _venv_data(venv: Venv) -> dict[str, Any]:
    """Return the normalized ``venv`` section of ``venv``: every key, lists as lists."""
    fields: dict[str, Any] = {
        "path": venv.path,
        "python": venv.python,
        "packages": venv.packages,
        "requirements": venv.requirements,
        "requirements_file": venv.requirements_file,
        "installer": venv.installer,
        "index_url": venv.index_url,
        "extra_index_urls": venv.extra_index_urls,
        "find_links": venv.find_links,
        "no_index": venv.no_index,
        "snapshot": venv.snapshot,
        "seed": venv.seed,
        "compile": venv.compile,
    }
    return {key: list(v) if key in _VENV_LISTS else v for key, v in fields.items()}


def _watched(state: State) -> dict[str, Any]:
    """Return the normalized sections read after a pod's changes: boot, processes,
    waivers, and the watch's idle and watch."""
    out: dict[str, Any] = {}
    if state.boot is not None:
        b = state.boot
        out["boot"] = {"hook": b.hook, "host_keys": b.host_keys, "volume": b.volume}
    if state.processes is not None:
        out["processes"] = {
            "inert": list(state.processes.inert),
            "matter": list(state.processes.matter),
        }
    if state.waivers is not None:
        out["waivers"] = [_waiver_data(w) for w in state.waivers]
    if state.idle is not None:
        out["idle"] = {"after": state.idle.after, "action": state.idle.action}
    if state.watch is not None:
        out["watch"] = {"hold": state.watch.hold}
    return out


def _waiver_data(waiver: Waiver) -> dict[str, str | datetime.date]:
    """Return one waiver as the normalized state holds it."""
    return {"finding": waiver.finding, "until": waiver.until, "reason": waiver.reason}
