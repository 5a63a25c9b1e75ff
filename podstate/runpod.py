"""The live inventory: the pods RunPod's v2 REST API lists (``GET /v2/pods``).

Used when ``RUNPOD_API_KEY`` is set (and ``PODSTATE_PODS`` is not). Every RUNNING pod with
direct SSH becomes a pyinfra host named after the pod; the others are skipped, each with a
reason. Only the standard library talks HTTP, and the key goes nowhere but the
``Authorization`` header of requests to the configured API: redirects are refused, and no
message, log line or host data ever contains it.

Environment:

``RUNPOD_API_KEY``        the API key (required for this source)
``RUNPOD_API_URL``        base URL, default https://api.runpod.io (plain http: localhost only)
``RUNPOD_API_TIMEOUT``    seconds to wait for the API, default 15
``PODSTATE_CLUSTER_PODS`` 1: manage cluster member pods too (``includeClusterPods=true``)
``PODSTATE_SSH_KEY``      private key file for every pod (host data ``ssh_key``); unset:
                          pyinfra's defaults (SSH agent, ~/.ssh/id_*)
"""

from __future__ import annotations

import fnmatch
import http.client
import ipaddress
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import Message
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from podstate import hostkeys
from podstate.podsfile import CLOUDS, GROUP_NAME, HOST_NAME, Pod, cloud_group
from podstate.spec import SpecError, display_path, kind_of, load_yaml

API_URL = "https://api.runpod.io"
TIMEOUT_S = 15.0
MAX_TRIES = 3  # requests per listing when rate-limited (429)
MAX_WAIT_S = 30.0  # total seconds podstate waits out rate limits before giving up
MAX_BODY = 32 << 20  # bytes of response podstate reads at most
_RESERVED_GROUPS = ("community", "secure")
_RESERVED_PREFIXES = ("gpu_", "gpus_", "dc_")


class InventoryError(SpecError):
    """The live inventory could not be built: one line that says what to fix."""


@dataclass(frozen=True)
class Skipped:
    """A pod RunPod lists that podstate cannot manage, and why."""

    id: str
    name: str
    reason: str

    def line(self) -> str:
        """Return the one stderr line that reports this pod as skipped."""
        return f"podstate: skipping pod {_shown(self.id)} ({_shown(self.name)}): {self.reason}"


@dataclass(frozen=True)
class ApiPod:
    """The parts of a RunPod pod the inventory uses, checked for type."""

    id: str
    name: str
    host: str
    port: int
    user: str
    cloud: str  # SECURE or COMMUNITY
    gpu_id: str | None
    gpu_count: int
    data_center: str | None
    started_at: str | None


@dataclass(frozen=True)
class Settings:
    """Where and how to ask the API, read from the environment by ``settings()``."""

    key: str
    base_url: str
    timeout: float
    include_cluster: bool
    ssh_key: str | None

    def __repr__(self) -> str:  # never show the key, even in a debugger or a traceback
        return f"Settings(base_url={self.base_url!r}, timeout={self.timeout!r}, ...)"


def settings(env: Mapping[str, str] | None = None) -> Settings:
    """Return the API settings from the environment; InventoryError names a bad variable.

    The key is checked for characters an HTTP header cannot carry here, because Python's
    own error for them would quote the key.
    """
    env = os.environ if env is None else env
    key = (env.get("RUNPOD_API_KEY") or "").strip()
    if not key:
        raise InventoryError("RUNPOD_API_KEY is not set: set it to a RunPod API key")
    if not re.fullmatch(r"[\x21-\x7e]+", key):
        raise InventoryError(
            "RUNPOD_API_KEY contains spaces, line breaks or non-ASCII characters: "
            "set it to the key alone"
        )
    base_url = _check_url((env.get("RUNPOD_API_URL") or API_URL).strip())
    raw_timeout = (env.get("RUNPOD_API_TIMEOUT") or "").strip()
    try:
        timeout = float(raw_timeout) if raw_timeout else TIMEOUT_S
    except ValueError:
        timeout = -1.0
    if not 0 < timeout <= 600:
        raise InventoryError(
            f"RUNPOD_API_TIMEOUT: expected seconds (0 to 600), got {raw_timeout!r}"
        )
    cluster = (env.get("PODSTATE_CLUSTER_PODS") or "0").strip().lower()
    if cluster not in ("0", "1", "true", "false", "yes", "no"):
        raise InventoryError(f"PODSTATE_CLUSTER_PODS: expected 1 or 0, got {cluster!r}")
    ssh_key = (env.get("PODSTATE_SSH_KEY") or "").strip() or None
    if ssh_key:
        ssh_key = str(Path(ssh_key).expanduser())
        if not Path(ssh_key).is_file():
            raise InventoryError(f"PODSTATE_SSH_KEY: no private key file at {ssh_key}")
    return Settings(key, base_url, timeout, cluster in ("1", "true", "yes"), ssh_key)


def _check_url(url: str) -> str:
    """Return the base URL without a trailing slash; InventoryError when it is unusable.

    Plain http is accepted for loopback addresses only (tests, local proxies), so the key
    never crosses a network unencrypted.
    """
    try:
        parts: urllib.parse.SplitResult | None = urllib.parse.urlsplit(url)
        _ = parts.port  # ValueError for a port that is not a number
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username
        or parts.password
        or parts.query
        or parts.fragment
    ):
        raise InventoryError(
            "RUNPOD_API_URL: expected a base URL like https://api.runpod.io "
            "(no user name, query or fragment)"
        )
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise InventoryError(
            "RUNPOD_API_URL: plain http is allowed for localhost only (the API key would "
            "cross the network unencrypted); use https"
        )
    return url.rstrip("/")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --- HTTP -------------------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses every redirect, so the key is never sent to another address."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> None:
        """Return None, so urllib raises HTTPError for the 3xx instead of following it."""
        return None


def fetch(
    config: Settings,
    *,
    max_tries: int = MAX_TRIES,
    max_wait: float = MAX_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Any]:
    """Return the raw ``pods`` list of ``GET /v2/pods``; InventoryError for anything else.

    Rate limits (429) are waited out as ``Retry-After`` or ``RateLimit`` say, for at most
    ``max_tries`` requests and ``max_wait`` seconds in all; a longer wait fails at once
    rather than hanging a CI job.
    """
    url = f"{config.base_url}/v2/pods"
    if config.include_cluster:
        url += "?includeClusterPods=true"
    proxies = urllib.request.ProxyHandler({} if url.startswith("http://") else None)
    opener = urllib.request.build_opener(_NoRedirect, proxies)
    waited = 0.0
    for attempt in range(1, max_tries + 1):
        status, headers, body = _get(opener, url, config)
        if status == 429:
            wait = _retry_wait(headers)
            if attempt < max_tries and waited + wait <= max_wait:
                sleep(wait)
                waited += wait
                continue
            raise InventoryError(
                f"RunPod API rate limit: still refused after {attempt} "
                f"{'try' if attempt == 1 else 'tries'} (it asks to wait {wait:g} s more); "
                "try again later"
            )
        if status == 200:
            return _pods_list(body, headers, config)
        raise InventoryError(_status_message(status, headers, body, config))
    raise AssertionError("unreachable")  # pragma: no cover


def _get(
    opener: urllib.request.OpenerDirector, url: str, config: Settings
) -> tuple[int, Message, bytes]:
    """Return (status, headers, body) of one GET; InventoryError when no answer came."""
    request = urllib.request.Request(
        url, headers={"Accept": "application/json", "User-Agent": "podstate"}
    )
    request.add_unredirected_header("Authorization", f"Bearer {config.key}")
    where = f"the RunPod API at {config.base_url}"
    try:
        with opener.open(request, timeout=config.timeout) as response:
            body = response.read(MAX_BODY + 1)
            if len(body) > MAX_BODY:
                raise InventoryError(f"{where} sent more than {MAX_BODY >> 20} MiB; not a pod list")
            return response.status, response.headers, body
    except urllib.error.HTTPError as e:
        try:
            body = e.read(64 << 10)
        except (OSError, http.client.HTTPException):
            body = b""
        return e.code, e.headers, body
    except urllib.error.URLError as e:
        if isinstance(e.reason, TimeoutError):
            raise InventoryError(_timeout_message(where, config)) from None
        reason = e.reason.strerror if isinstance(e.reason, OSError) else None
        raise InventoryError(
            f"cannot reach {where}: {_scrub(str(reason or e.reason), config)}"
        ) from None
    except TimeoutError:
        raise InventoryError(_timeout_message(where, config)) from None
    except (OSError, http.client.HTTPException, ValueError) as e:
        detail = _scrub(str(e) or type(e).__name__, config)
        raise InventoryError(f"cannot reach {where}: {detail}") from None


def _timeout_message(where: str, config: Settings) -> str:
    return f"no answer from {where} within {config.timeout:g} s (RUNPOD_API_TIMEOUT)"


def _retry_wait(headers: Message) -> float:
    """Return the seconds a 429 asks to wait: Retry-After, else RateLimit's spent windows."""
    retry_after = (headers.get("Retry-After") or "").strip()
    if retry_after:
        try:
            return max(0.0, float(retry_after))
        except ValueError:
            pass
        try:
            when = parsedate_to_datetime(retry_after)
            return max(0.0, (when - datetime.now(UTC)).total_seconds())
        except (TypeError, ValueError):
            pass
    waits = []
    for member in (headers.get("RateLimit") or "").split(","):
        remaining = re.search(r";\s*r=(\d+)", member)
        reset = re.search(r";\s*t=(\d+)", member)
        if remaining and reset and int(remaining.group(1)) == 0:
            waits.append(float(reset.group(1)))
    return max(waits) if waits else 1.0


def _status_message(status: int, headers: Message, body: bytes, config: Settings) -> str:
    """Return the one-line error for an HTTP status other than 200 and 429."""
    detail = _problem_detail(body, config)
    reason = http.client.responses.get(status, "")
    said = f"{status} {reason}".strip() + (f": {detail}" if detail else "")
    if status == 401:
        return (
            f"the RunPod API refused RUNPOD_API_KEY ({said}): check the key, or create one "
            "in the RunPod console (Settings, API Keys)"
        )
    if status == 403:
        return f"RUNPOD_API_KEY may not list pods ({said}): give the key read access to pods"
    if 300 <= status < 400:
        location = urllib.parse.urlsplit(headers.get("Location") or "").netloc or "elsewhere"
        return (
            f"the RunPod API at {config.base_url} redirects ({status}) to {location}; "
            "podstate sends the API key to RUNPOD_API_URL only: set it to the final address"
        )
    return f"the RunPod API at {config.base_url} answered {said}"


def _problem_detail(body: bytes, config: Settings) -> str:
    """Return the ``detail`` of an RFC 9457 problem body, on one short line ('' if none)."""
    try:
        problem = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return ""
    if not isinstance(problem, dict) or not isinstance(problem.get("detail"), str):
        return ""
    text = " ".join(_scrub(problem["detail"], config).split())
    return text if len(text) <= 200 else text[:197] + "..."


def _scrub(text: str, config: Settings) -> str:
    """Return ``text`` with the API key blanked out, whatever sent it back."""
    return text.replace(config.key, "<RUNPOD_API_KEY>")


def _pods_list(body: bytes, headers: Message, config: Settings) -> list[Any]:
    """Return the ``pods`` array of a 200 answer; InventoryError when it is not one."""
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        kind = headers.get("Content-Type") or "no content type"
        raise InventoryError(
            f"the RunPod API at {config.base_url} answered with something that is not JSON "
            f"({kind}, {len(body)} bytes); is RUNPOD_API_URL right?"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("pods"), list):
        got = "no 'pods' list" if isinstance(doc, dict) else kind_of(doc)
        raise InventoryError(
            f"unexpected RunPod API response: expected an object with a 'pods' list, got {got}"
        )
    return doc["pods"]


# --- pods ---------------------------------------------------------------------------------


def parse(raw: list[Any], include_cluster: bool = False) -> tuple[list[ApiPod], list[Skipped]]:
    """Return the pods podstate can manage and the ones it skips, in the API's order.

    Manageable: RUNNING, with ``ssh.direct``, and not a cluster member unless
    ``include_cluster``. The fields podstate reads are type-checked (InventoryError names
    the pod and field); other fields are left alone.
    """
    pods: list[ApiPod] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        where = f"pods[{index}]"
        if not isinstance(item, dict):
            raise _unexpected(where, f"expected a pod object, got {kind_of(item)}")
        pod_id = _field(item, "id", where, str)
        if not pod_id:
            raise _unexpected(f"{where}.id", "empty")
        if pod_id in seen:
            raise _unexpected(f"{where}.id", f"{_shown(pod_id)} is listed twice")
        seen.add(pod_id)
        where = f"{where} (id {_shown(pod_id)})"
        name = _field(item, "name", where, str)
        status = _field(item, "status", where, str)
        cluster = item.get("cluster")
        if cluster is not None and not include_cluster:
            cluster_id = cluster.get("id") if isinstance(cluster, dict) else None
            which = f" {_shown(cluster_id)}" if isinstance(cluster_id, str) else ""
            skipped.append(
                Skipped(
                    pod_id,
                    name,
                    f"member of cluster{which} (set PODSTATE_CLUSTER_PODS=1 to manage it)",
                )
            )
            continue
        if status != "RUNNING":
            skipped.append(Skipped(pod_id, name, f"status {_shown(status)}"))
            continue
        ssh = _field(item, "ssh", where, dict)
        direct = _field(ssh, "direct", f"{where}.ssh", dict, nullable=True)
        if direct is None:
            skipped.append(Skipped(pod_id, name, _no_direct_reason(item)))
            continue
        here = f"{where}.ssh.direct"
        host = _field(direct, "host", here, str)
        port = _field(direct, "port", here, int)
        user = _field(direct, "username", here, str)
        if not host or not user or not 0 < port < 65536:
            bad = "host" if not host else "username" if not user else "port"
            raise _unexpected(f"{here}.{bad}", f"not usable: {_shown(str(direct.get(bad)))}")
        cloud = str(_field(item, "cloud", where, str)).upper()
        gpu = _field(item, "gpu", where, dict, required=False)
        gpu_id = gpu_count = None
        if gpu is not None:
            gpu_id = _field(gpu, "id", f"{where}.gpu", str)
            gpu_count = _field(gpu, "count", f"{where}.gpu", int, required=False)
        started_at = _field(item, "startedAt", where, str, nullable=True)
        if started_at is not None:
            try:
                hostkeys.parse_time(started_at)
            except ValueError:
                raise _unexpected(
                    f"{where}.startedAt", f"not a date-time: {_shown(started_at)}"
                ) from None
        pods.append(
            ApiPod(
                id=pod_id,
                name=name,
                host=host,
                port=port,
                user=user,
                cloud=cloud if cloud in CLOUDS else "COMMUNITY",
                gpu_id=gpu_id,
                gpu_count=(1 if gpu_count is None else gpu_count) if gpu_id else 0,
                data_center=_field(item, "dataCenterId", where, str, nullable=True),
                started_at=started_at,
            )
        )
    return pods, skipped


def _no_direct_reason(item: dict[str, Any]) -> str:
    ports = item.get("ports")
    if isinstance(ports, list) and "22/tcp" not in ports:
        return (
            "no direct SSH: 22/tcp is not exposed (the ssh.runpod.io proxy gives an "
            "interactive shell only; expose 22/tcp as a TCP port)"
        )
    return "no direct SSH: 22/tcp has no public port yet (no public IP, or still starting)"


def _field(
    obj: dict[str, Any],
    key: str,
    where: str,
    kind: type,
    required: bool = True,
    nullable: bool = False,
) -> Any:
    """Return ``obj[key]`` when it has type ``kind``; InventoryError naming it otherwise."""
    if key not in obj:
        if required:
            raise _unexpected(f"{where}.{key}", "missing")
        return None
    value = obj[key]
    if value is None and (nullable or not required):
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = {str: "a string", int: "an integer", dict: "an object"}
        expected = names.get(kind, kind.__name__) + (" or null" if nullable else "")
        raise _unexpected(f"{where}.{key}", f"expected {expected}, got {kind_of(value)}")
    return value


def _unexpected(where: str, problem: str) -> InventoryError:
    return InventoryError(f"unexpected RunPod API response: {where}: {problem}")


def _shown(text: str) -> str:
    """Return ``text`` safe for one terminal line (JSON-quoted when it is not plain)."""
    if text and text.isprintable() and len(text) <= 100:
        return text
    return json.dumps(text[:100])


# --- names and groups ---------------------------------------------------------------------


def host_names(pods: list[ApiPod]) -> dict[str, str]:
    """Return pyinfra host names by pod id: the pod's name where it is a valid, unique one.

    A name that several pods share, or that is not a valid host name, becomes
    ``<name>-<pod id>`` (the name cleaned up, or just the id when nothing is left), so
    every pod has a stable host name of its own for ``--limit`` and ``host_vars/``.
    """
    counts = Counter(pod.name for pod in pods)
    names: dict[str, str] = {}
    for pod in pods:
        if counts[pod.name] == 1 and HOST_NAME.match(pod.name):
            names[pod.id] = pod.name
        else:
            names[pod.id] = _with_id(_clean(pod.name), pod.id)
    taken = Counter(names.values())
    for pod in pods:  # a kept name equal to another pod's generated one
        if taken[names[pod.id]] > 1 and names[pod.id] == pod.name:
            names[pod.id] = _with_id(_clean(pod.name), pod.id)
    final: dict[str, str] = {}
    used: set[str] = set()
    for pod_id, name in names.items():
        unique, number = name, 2
        while unique in used:
            suffix = f"-{number}"
            unique, number = name[: 63 - len(suffix)] + suffix, number + 1
        used.add(unique)
        final[pod_id] = unique
    return final


def _clean(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-._")


def _with_id(base: str, pod_id: str) -> str:
    suffix = _clean(pod_id)[:40] or "pod"
    base = base[: 62 - len(suffix)].rstrip("-._")
    return f"{base}-{suffix}" if base else suffix


def slug(text: str, drop: tuple[str, ...] = ()) -> str:
    """Return ``text`` as a group-name part: lowercase, runs of other characters as ``_``.

    Leading words in ``drop`` go first ("NVIDIA GeForce RTX 4090" -> "rtx_4090").
    """
    text = text.strip().lower()
    for word in drop:
        if text.startswith(word + " "):
            text = text[len(word) + 1 :].lstrip()
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_")


def auto_groups(pod: ApiPod) -> list[str]:
    """Return the groups RunPod's data puts a pod in, cloud group first.

    ``community``/``secure``; ``gpu_<model>`` (from ``gpu.id``); ``dc_<data centre>``;
    ``gpus_<count>`` (``gpus_0`` for CPU pods).
    """
    groups = [cloud_group(pod.cloud)]
    gpu = slug(pod.gpu_id, ("nvidia", "geforce")) if pod.gpu_id else ""
    if gpu:
        groups.append(f"gpu_{gpu}"[:63].rstrip("_"))
    dc = slug(pod.data_center) if pod.data_center else ""
    if dc:
        groups.append(f"dc_{dc}"[:63].rstrip("_"))
    groups.append(f"gpus_{pod.gpu_count}")
    return groups


def groups_path(vars_dir: Path) -> Path:
    """Return the group rules file: ``groups.yaml`` in the vars directory."""
    return vars_dir / "groups.yaml"


def load_group_rules(path: Path) -> dict[str, list[str]]:
    """Return ``groups.yaml``'s rules (group -> pod name globs); {} when there is no file.

    SpecError names the file and the group when the file is not a mapping of group names
    to lists of globs.
    """
    if not path.is_file():
        return {}
    shown = display_path(path)
    rules: dict[str, list[str]] = {}
    for group, globs in load_yaml(path, shown).items():
        if not GROUP_NAME.match(group) or group.startswith("_"):
            raise SpecError(
                f"{shown}: {group}: not a valid group name (letters, digits and _, "
                "not starting with a digit or _)"
            )
        if group in _RESERVED_GROUPS or group.startswith(_RESERVED_PREFIXES):
            raise SpecError(
                f"{shown}: {group}: set from RunPod's data (community, secure, gpu_*, "
                "gpus_*, dc_*); pick another group name"
            )
        if (
            not isinstance(globs, list)
            or not globs
            or not all(isinstance(g, str) and g for g in globs)
        ):
            raise SpecError(
                f'{shown}: {group}: expected a list of pod name globs, like ["train-*"]'
            )
        rules[group] = list(globs)
    return rules


def to_pods(
    api_pods: list[ApiPod],
    rules: dict[str, list[str]],
    config: Settings,
    record_host_keys: bool = True,
    host_key_dir: Path | None = None,
) -> list[Pod]:
    """Return inventory pods (sorted by host name) with host data and groups.

    Host data: the direct SSH address, ``pod_id``, ``cloud``, ``gpu_id``, ``gpu_count``,
    ``data_center``, ``started_at``, ``ssh_key`` from PODSTATE_SSH_KEY, and the host-key
    settings of ``podstate.hostkeys`` (recorded in the store unless ``record_host_keys`` is
    false). A pod joins each ``groups.yaml`` group one of whose globs matches its host name
    or its RunPod name, after its automatic groups, in the file's order.
    """
    names = host_names(api_pods)
    pods: list[Pod] = []
    trusts: list[hostkeys.HostKeyTrust] = []
    for api in api_pods:
        name = names[api.id]
        trust = hostkeys.plan(api.id, name, api.host, api.port, api.started_at, host_key_dir)
        if record_host_keys:
            hostkeys.record(trust)
        trusts.append(trust)
        groups = auto_groups(api)
        groups += [
            group
            for group, globs in rules.items()
            if any(fnmatch.fnmatchcase(n, g) for n in (name, api.name) for g in globs)
        ]
        data: dict[str, Any] = {
            "ssh_hostname": api.host,
            "ssh_port": api.port,
            "ssh_user": api.user,
            **trust.host_data(),
            "pod_id": api.id,
            "cloud": api.cloud,
            "gpu_id": api.gpu_id,
            "gpu_count": api.gpu_count,
            "data_center": api.data_center,
            "started_at": api.started_at,
        }
        if config.ssh_key:
            data["ssh_key"] = config.ssh_key
        pods.append(Pod(name, data, list(dict.fromkeys(groups))))
    if record_host_keys:
        hostkeys.explain_mismatches(trusts)
    return sorted(pods, key=lambda pod: pod.name)


def load(vars_dir: Path, record_host_keys: bool = True) -> tuple[list[Pod], list[Skipped]]:
    """Return the pods to manage and the skipped ones, from the API named by the environment.

    The group rules are read before the API is asked, so a bad groups.yaml costs no request.
    """
    config = settings()
    rules = load_group_rules(groups_path(vars_dir))
    api_pods, skipped = parse(fetch(config), config.include_cluster)
    return to_pods(api_pods, rules, config, record_host_keys), skipped
