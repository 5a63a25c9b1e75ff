"""The boot hook's parts that are not the role's decisions: where it lives (by provider),
its data file, its status, and saving the host keys (the probe's lines for it are
podstate.facts.boot).

roles/boot.py decides what the hook puts back; scripts/boot.sh is the hook, which reads the
data file (``render_state``) at every container start and writes its status
(``parse_status`` reads it back for the check).
"""

from __future__ import annotations

import hashlib
import posixpath
import shlex
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from pyinfra import host
from pyinfra.api import operation

from podstate.paths import BOOT_FLAG
from podstate.providers import registry
from podstate.providers.record import Provider
from podstate.run.lock import Change, changing
from podstate.shell import b64, quote_path, script_file

# FLAG: this container's status of the hook, on the container disk: "armed" (podstate set
# the hook up in this container, which started without it), "not-run" (the container
# started after the hook was set up, and the hook did not run), or the hook's own status.
FLAG = BOOT_FLAG
NL = "\n"
FORMAT = "podstate-boot 1"
_DEFAULT_LINE = "_podstate_boot=/workspace/.podstate/boot.sh\n"
_IDS_LINE = "    IDS='RUNPOD_POD_ID'\n"
_IDENTIFIED_LINE = "    IDENTIFIED='RunPod pod id'\n"


# Where the hook lives depends on the provider (podstate.facts.boot.provider, its
# ``keeps_disk``): RunPod wipes the container disk at every stop, so the hook and its data
# must be on the volume; Vast keeps it across a stop and start, so they live there (and need
# no volume).
ON_DISK = "/var/lib/podstate"


@dataclass(frozen=True)
class Layout:
    """Where podstate keeps what must outlive the container: the applied record and the
    copy of podstate-ready on the volume mounted at ``volume`` (``boot.volume``); the hook
    and its data beside them on RunPod, on the container disk (``ON_DISK``) on Vast, whose
    stop keeps it. ``provider`` is the pod's (one of ``registry.pod_providers``)."""

    volume: str
    provider: str = registry.DEFAULT

    def __post_init__(self) -> None:
        if self.provider not in [p.name for p in registry.pod_providers()]:
            raise ValueError(f"no boot hook layout for provider {self.provider!r}")

    @property
    def of(self) -> Provider:
        """The provider of the pod (its record)."""
        return registry.named(self.provider)

    @property
    def home(self) -> str:
        """The directory of the hook and its data: on the container disk where a stop keeps
        it, else on the volume."""
        if self.of.keeps_disk:
            return ON_DISK
        return posixpath.join(self.volume, ".podstate")

    @property
    def needs_volume(self) -> bool:
        """Whether the hook needs a volume mounted at ``volume``: only where a restart
        wipes the container disk (RunPod)."""
        return self.home != ON_DISK

    @property
    def identity(self) -> tuple[str, ...]:
        """The variables of the container's environment that name this pod."""
        return self.of.identity

    @property
    def identified(self) -> str:
        """What the identity is, in words (the hook's messages)."""
        return self.of.identified

    @property
    def record(self) -> str:
        """The applied record: which pod podstate applied to, and when (roles/ready.py)."""
        return posixpath.join(self.volume, ".podstate", "applied")

    @property
    def ready_command(self) -> str:
        """podstate-ready, for a job that starts before podstate is back."""
        return posixpath.join(self.volume, ".podstate", "bin", "podstate-ready")

    @property
    def hook(self) -> str:
        """The hook the template's start command (onstart script on Vast) sources."""
        return posixpath.join(self.home, "boot.sh")

    @property
    def data(self) -> str:
        """The root-only directory of its data."""
        return posixpath.join(self.home, "boot")

    @property
    def state(self) -> str:
        """The data file: what to put back, with its checksum."""
        return posixpath.join(self.data, "state")

    @property
    def status(self) -> str:
        """What the hook did at the last container start (the log beside its data)."""
        return posixpath.join(self.data, "status")

    def start_command(self) -> str:
        """Return the template's container start command for RunPod's images: one shell
        word for ``bash -c``, whatever the volume's path holds (a space, a quote)."""
        hook = shlex.quote(self.hook)
        if hook != self.hook and not set(self.hook) & set('"$`\\'):
            hook = f'"{self.hook}"'  # reads better than nested single quotes
        return "bash -c " + shlex.quote(f". {hook}; exec /start.sh")

    def onstart_line(self) -> str:
        """Return the line of a Vast template's onstart script (``/root/onstart.sh``, which
        runs at every container start) that sources the hook once an apply wrote it."""
        return f"if [ -f {self.hook} ]; then . {self.hook}; fi"

    def how_to_run(self) -> str:
        """Return what runs the hook at every container start, for a report that says it
        did not run."""
        line = self.onstart_line() if self.of.keeps_disk else self.start_command()
        return f"{self.of.start_hook} must source it: {line}"


def render_hook(layout: Layout) -> str:
    """Return the hook (scripts/boot.sh) for ``layout``: the same script, naming itself,
    the variables that name the pod and what they are in words."""
    text = script_file("boot.sh")
    lines = {
        _DEFAULT_LINE: f"_podstate_boot={quote_path(layout.hook)}\n",
        _IDS_LINE: f"    IDS='{' '.join(layout.identity)}'\n",
        _IDENTIFIED_LINE: f"    IDENTIFIED='{layout.identified}'\n",
    }
    for line, own in lines.items():
        if line not in text:
            raise RuntimeError(f"scripts/boot.sh has no line {line.strip()!r} to replace")
        text = text.replace(line, own)
    return text


def render_state(
    pod: str, pod_id: str | None, entries: list[str], texts: Sequence[str] = ()
) -> str:
    """Return the hook's data file: its format, the pod it is for (name and identity,
    ``Layout.identity``'s values, "-" when unknown), ``entries`` (each whole lines, see
    scripts/boot.sh), the contents of its ``text`` entries (``texts``, in their order) after
    a ``contents`` line, then the sha256 of everything before, which the hook checks before
    it uses any of it."""
    body = f"{FORMAT}\npod {pod} {pod_id or '-'}\n" + "".join(entries)
    if texts:
        body += f"contents {sum(t.count(NL) for t in texts)}\n" + "".join(texts)
    return body + f"sum {hashlib.sha256(body.encode('utf-8', 'surrogateescape')).hexdigest()}\n"


def file_entry(kind: str, fields: str, content: str) -> str:
    """Return a data file entry whose content (base64) is on its second line."""
    return f"{kind} {fields}\n{b64(content)}\n"


def is_text(content: str) -> bool:
    """Return whether the data can hold ``content`` as its own lines (a ``text`` entry):
    whole lines, none with a NUL, which the hook's shell reads back as they are."""
    return content.endswith(NL) and "\0" not in content


def state_pod(text: str | None) -> str | None:
    """Return the pod name a data file is for, None when it is no data file."""
    lines = (text or "").split("\n")
    if len(lines) < 2 or lines[0] != FORMAT or not lines[1].startswith("pod "):
        return None
    return lines[1].split(" ")[1]


def status_start(text: str) -> str | None:
    """Return the container start a status of the hook names (its ``container`` line,
    ``BOOT_ID:TICKS`` as podstate.facts.start reads it), None when it names none."""
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "container":
            return rest
    return None


def parse_status(text: str) -> dict[str, Any]:
    """Return what the hook's status says about one container start: ``outcome``
    (skipped: it did nothing, ``reason`` says why; running: a venv restore goes on;
    restored: everything, marker included; pending: ``pending`` waits for the next apply,
    or something in ``errors`` failed), and ``started_at``."""
    found: dict[str, Any] = {"reason": None, "pending": [], "errors": [], "started_at": None}
    done = None
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "start":
            found["started_at"] = rest
        elif kind == "skipped":
            found["reason"] = rest
        elif kind == "pending":
            found["pending"].append(rest)
        elif kind == "error":
            found["errors"].append(rest)
        elif kind == "done":
            done = rest.rpartition(" ")[2]
    if found["reason"]:
        outcome = "skipped"
    elif done is None:
        outcome = "running"
    else:
        outcome = "restored" if done == "ready" else "pending"
    return {"outcome": outcome, **found}


def save_keys_command(directory: str) -> str:
    """Return sh that saves the pod's host keys in ``directory`` (made root-only): a tar of
    them, then the sha256 of the keys themselves, each replaced in one rename, the sum last
    (what the hook checks the tar with)."""
    d = quote_path(directory)
    return (
        'export LC_ALL=C; cd /etc/ssh && set -- ssh_host_* && if [ ! -f "$1" ]; then'
        " echo 'podstate: boot.host_keys: keep: there are no host keys in /etc/ssh to keep'"
        f" >&2; exit 1; fi; mkdir -p -- {d} && chmod 700 -- {d} && umask 077 &&"
        f' tar -cf {d}/hostkeys.tar.part -- "$@" && mv -f -- {d}/hostkeys.tar.part'
        f' {d}/hostkeys.tar && cat -- "$@" | sha256sum >{d}/hostkeys.sum.part &&'
        f" mv -f -- {d}/hostkeys.sum.part {d}/hostkeys.sum"
    )


@operation()
def keep_host_keys(directory: str, same: bool) -> Generator[Change, None, None]:
    """
    Save the pod's SSH host keys in ``directory`` on the volume, for the boot hook to put
    back at the next container start.

    + directory: the hook's root-only data directory
    + same: the probe found the keys saved there the pod's own

    **Example:**

    .. code:: python

        keep_host_keys(name="Boot: keep the host keys", directory="/workspace/.podstate/boot",
                       same=False)
    """
    if same:
        host.noop(f"the host keys saved in {directory} are the pod's own")
        return
    yield changing(save_keys_command(directory))
