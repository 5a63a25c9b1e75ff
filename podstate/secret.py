"""Secret values: read on the control machine when the run starts, compared on pods by hash.

A value (``secrets.NAME``, ``repos.PATH.ssh_key``) is read once, from an environment
variable (``from_env``) or a file of the control machine (``from_file``), into a
:class:`Secret` whose ``repr`` and ``str`` never show it. It reaches a pod only as the
content of a file uploaded over SFTP into ``SECRETS_DIR`` (root-only), never in a command
line. Drift is found by comparing salted SHA-256 digests computed on each side: the salt is
random per run, so a digest seen in output cannot be looked up or compared across runs.
"""

from __future__ import annotations

import hashlib
import os
import secrets as _random
import shlex
from dataclasses import dataclass, field
from pathlib import Path

# Root-only directory (0700) on the pod holding every secret podstate writes there.
SECRETS_DIR = "/etc/podstate/secrets"
# The file the managed profile sources: ``export NAME='value'`` lines, root-only 0600.
SECRETS_FILE = f"{SECRETS_DIR}/env.sh"
# The known-hosts file a repository's fetch with an ``ssh_key`` reads and records keys in.
GIT_KNOWN_HOSTS = "/etc/podstate/git_known_hosts"
# Salt of every digest this run compares: the same on both sides, new for each run.
SALT = _random.token_hex(16)


class SecretError(ValueError):
    """A secret could not be read; the message names the variable or file, never a value."""


@dataclass(frozen=True)
class Secret:
    """A value that must not be shown: ``repr``/``str`` name its source, never the value."""

    source: str  # "environment variable HF_TOKEN" or "file ~/.config/wandb/api_key"
    value: str = field(repr=False)

    def __str__(self) -> str:
        return f"<secret from {self.source}>"

    def digest(self, salt: str = SALT) -> str:
        """Return the salted SHA-256 of the value, as the pod computes it (``digest``)."""
        return digest(self.value, salt)


def digest(text: str, salt: str = SALT) -> str:
    """Return the hex SHA-256 of ``salt`` followed by ``text``: what both sides compare."""
    data = (salt + text).encode("utf-8", "surrogateescape")
    return hashlib.sha256(data).hexdigest()


def read(source: dict[str, str], root: Path | None = None) -> Secret:
    """Return the secret ``source`` names: ``{"from_env": VAR}`` or ``{"from_file": PATH}``.

    A file's one trailing newline is stripped; ``~`` is the control machine's home and a
    relative path is relative to ``root`` (the vars directory). Raises SecretError, whose
    message names the variable or file, for a missing or unusable value.
    """
    if "from_env" in source:
        name = source["from_env"]
        value = os.environ.get(name)
        if value is None:
            raise SecretError(f"the environment variable {name} is not set")
        where = f"environment variable {name}"
    else:
        shown = source["from_file"]
        path = Path(shown).expanduser()
        if not path.is_absolute():
            path = (root or Path.cwd()) / path
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise SecretError(f"cannot read the file {shown}: {e.strerror or e}") from None
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SecretError(f"the file {shown} is not UTF-8 text") from None
        value = value.removesuffix("\n").removesuffix("\r")
        where = f"file {shown}"
    if "\0" in value:
        raise SecretError(f"the {where} holds a NUL byte, which no shell variable can")
    return Secret(where, value)


def render(values: dict[str, Secret]) -> str:
    """Return the secrets file: one ``export NAME='value'`` per secret, in name order.

    Values are single-quoted, so nothing in them is expanded or run by any shell.
    """
    lines = ["# Managed by podstate: overwritten on every run. Edit the desired state instead."]
    lines += [f"export {name}={shlex.quote(values[name].value)}" for name in sorted(values)]
    return "\n".join(lines) + "\n"
