"""The sections with rules of their own: boot, processes, repos, secrets, waivers, and URLs
that must hold no credential. Each returns its part of the normalized state, or raises a
SpecError that starts with the key it is about.
"""

from __future__ import annotations

import datetime
import posixpath
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podstate.desired import secret
from podstate.desired.errors import SpecError
from podstate.desired.secret import Secret

WAIVER_DAYS = 90  # the longest a waiver may run: review them at least quarterly


def normpath(path: str) -> str:
    """Return an absolute POSIX path without ``.``/``..``/``//`` parts."""
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/")


def parents_first(paths: list[str], real: Callable[[str], str] = str) -> list[str]:
    """Return the normalized ``paths`` in their order, but each after those of them it lies
    under (where ``real`` says each leads: itself, or as a pod resolves it): a scratch tmpfs
    mounted below another is mounted after it (the other way round, the outer one would be
    refused, its directory holding the inner one's mount point)."""
    ordered: dict[str, None] = {}
    for path in paths:
        above = [other for other in paths if real(path).startswith(real(other).rstrip("/") + "/")]
        ordered.update(dict.fromkeys([*sorted(above, key=lambda other: len(real(other))), path]))
    return list(ordered)


def boot(item: dict[str, Any]) -> dict[str, Any]:
    """Return the ``boot`` section with its defaults: no hook, new host keys, the volume at
    /workspace. Kept host keys need the hook, which is what puts them back."""
    section = {
        "hook": bool(item.get("hook", False)),
        "host_keys": item.get("host_keys", "new"),
        "volume": normpath(item.get("volume", "/workspace")),
    }
    if section["host_keys"] == "keep" and not section["hook"]:
        raise SpecError(
            "boot.host_keys: keep needs boot.hook: true, since the hook is what puts the keys "
            "back at a container start"
        )
    if section["volume"] == "/":
        raise SpecError("boot.volume: must name the volume's mount point, such as /workspace")
    return section


DURATION = re.compile(r"^([0-9]+)(s|m|h|d)$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def idle(item: dict[str, Any]) -> dict[str, Any]:
    """Return the ``idle`` section: ``after`` in seconds (from ``90s``, ``30m``, ``2h``,
    ``1d``, or a number of seconds) and ``action`` (``report`` unless ``stop``); SpecError,
    one line, for a duration that is not one or is not above 0."""
    after = item["after"]
    match = DURATION.fullmatch(after) if isinstance(after, str) else None
    if isinstance(after, int) and not isinstance(after, bool):
        seconds = after
    elif match:
        seconds = int(match.group(1)) * _SECONDS[match.group(2)]
    else:
        raise SpecError(f"idle.after: {after!r} is not a duration such as 90s, 30m or 2h")
    if seconds <= 0:
        raise SpecError(f"idle.after: {after!r} is not above 0: a duration such as 90s, 30m or 2h")
    return {"after": seconds, "action": item.get("action", "report")}


def processes(item: dict[str, Any]) -> dict[str, list[str]]:
    """Return the ``processes`` section: the names of ``inert`` and of ``matter``, each once.
    A name in both says two things at once, so it is refused."""
    section = {key: list(dict.fromkeys(item.get(key) or [])) for key in ("inert", "matter")}
    both = [name for name in section["inert"] if name in section["matter"]]
    if both:
        raise SpecError(f"processes: {both[0]} is listed both in inert and in matter; keep one")
    return section


def _secret(key: str, source: dict[str, str], root: Path | None) -> Secret:
    """Return the secret ``source`` names, read now; SpecError names ``key``, never the
    file or the value (the variable only as ``secret.read`` says)."""
    try:
        return secret.read(key, source, root)
    except secret.SecretError as e:
        raise SpecError(str(e)) from None


CREDENTIAL = (
    "the URL holds a credential (a token or password before @), which podstate would show "
    "in its output and pass on command lines: "
)
CREDENTIAL_FIX = {
    "repos": "use a git@host:org/repo URL with ssh_key (a deploy key); keep tokens in secrets",
    "venv": "use an index or URL the pod reaches without one",
    "download": "use a URL that needs none",
}


def refuse_credentials(state: dict[str, Any]) -> None:
    """Raise SpecError, naming the key and never the URL, for a URL with a credential in
    it (``secret.has_credential``): in ``repos``, ``download`` or ``venv``'s index options
    and packages. ``git@host:org/repo`` and ``ssh://git@host/…`` name only an SSH user."""
    urls = [(f"repos.{path}.url", item["url"]) for path, item in state.get("repos", {}).items()]
    if "download" in state:
        urls.append(("download.url", state["download"]["url"]))
    venv = state.get("venv", {})
    if "index_url" in venv:
        urls.append(("venv.index_url", venv["index_url"]))
    for key in ("extra_index_urls", "find_links", "packages"):
        for number, text in enumerate(venv.get(key, []), start=1):
            urls.append((f"venv.{key}: entry {number}", text))
    for key, text in urls:
        if secret.has_credential(text):
            raise SpecError(f"{key}: {CREDENTIAL}{CREDENTIAL_FIX[key.split('.', 1)[0]]}")


def repos(items: dict[str, dict[str, Any]], root: Path | None) -> dict[str, dict[str, Any]]:
    """Return the ``repos`` section: path -> ``url``, ``ref`` and ``ssh_key`` (a Secret or
    None), with every deploy key read now."""
    out = {}
    for name, item in items.items():
        path = normpath(name)
        if path == "/":
            raise SpecError(f"repos.{name}: must name a directory below /, such as /root/code/x")
        key = item.get("ssh_key")
        out[path] = {
            "url": item["url"],
            "ref": item["ref"],
            "ssh_key": _secret(f"repos.{name}.ssh_key", key, root) if key else None,
        }
    return out


def secrets(
    items: dict[str, dict[str, str]], root: Path | None, state: dict[str, Any]
) -> dict[str, Secret]:
    """Return the ``secrets`` section: name -> Secret, every value read now. A name also
    set by ``env`` or ``dirs`` is a SpecError: a variable has one source."""
    for name in items:
        for other in ("env", "dirs"):
            if name in (state.get(other) or {}):
                raise SpecError(f"secrets.{name}: {name} is in {other} too; set it in one place")
    return {name: _secret(f"secrets.{name}", source, root) for name, source in items.items()}


def waiver(index: int, item: dict[str, str]) -> dict[str, Any]:
    """Return a waiver with its ``until`` as a date, at most WAIVER_DAYS ahead."""
    until = datetime.date.fromisoformat(item["until"])
    if until > datetime.date.today() + datetime.timedelta(days=WAIVER_DAYS):
        raise SpecError(
            f"waivers.{index}.until: {until} is more than {WAIVER_DAYS} days ahead: waivers "
            "are for known problems being fixed; review it within a quarter"
        )
    return {**item, "until": until}
