"""Secret values: read on the control machine when the run starts, compared on the pods.

A value (``secrets.NAME``, ``repos.PATH.ssh_key``) is read once, from an environment
variable (``from_env``) or a file of the control machine (``from_file``), into a
:class:`Secret` whose ``repr`` and ``str`` never show it. It reaches a pod only as data on
a command's stdin or uploaded file content, never in a command line. Drift is found on the
pod: the probe gets the wanted values on its stdin and answers same or different per name,
so nothing in any output (no digest) lets a guess at a value be tested offline.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

# A variable's name as environment variables are named by convention: no token looks so.
VARIABLE_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


class SecretError(ValueError):
    """A secret could not be read; the message names the key, never the file or the value,
    nor the variable unless its name is shaped like one (``VARIABLE_NAME``): a token pasted
    where the name goes would be the value."""


@dataclass(frozen=True)
class Secret:
    """A value that must not be shown: ``repr``/``str`` name its key, never the value."""

    source: str  # the key it is read from: "secrets.HF_TOKEN.from_env"
    value: str = field(repr=False)

    def __str__(self) -> str:
        return f"<secret from {self.source}>"


def read(key: str, source: dict[str, str], root: Path | None = None) -> Secret:
    """Return the secret ``source`` names: ``{"from_env": VAR}`` or ``{"from_file": PATH}``.

    ``key`` is where ``source`` is in the desired state (``secrets.HF_TOKEN``). A file's one
    trailing newline is stripped; ``~`` is the control machine's home and a relative path
    is relative to ``root`` (the vars directory). Raises SecretError for a missing or
    unusable value. Its message starts with the key (``secrets.HF_TOKEN.from_env: …``) and
    never holds what ``from_env`` or ``from_file`` says: a token pasted there by mistake is
    a secret too, unless it is a variable's name by convention (upper case, digits and _):
    that is named, since no token is shaped so.
    """
    if "from_env" in source:
        where = f"{key}.from_env"
        name = source["from_env"]
        value = os.environ.get(name)
        if value is None and VARIABLE_NAME.fullmatch(name):
            raise SecretError(f"{where}: the environment variable {name} is not set")
        if value is None:
            raise SecretError(
                f"{where}: the environment variable it names is not set; this does not look "
                "like a variable name: did you paste the value itself?"
            )
    else:
        where = f"{key}.from_file"
        path = Path(source["from_file"]).expanduser()
        if not path.is_absolute():
            path = (root or Path.cwd()) / path
        try:
            raw = path.read_bytes()
        except OSError as e:
            why = e.strerror or type(e).__name__  # str(e) would hold the file's name
            raise SecretError(f"{where}: cannot read the file it names: {why}") from None
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SecretError(f"{where}: the file it names is not UTF-8 text") from None
        value = value.removesuffix("\n").removesuffix("\r")
    if "\0" in value:
        raise SecretError(f"{where}: the value holds a NUL byte, which no shell variable can")
    return Secret(where, value)


def render(values: dict[str, Secret]) -> str:
    """Return the secrets file: one ``export NAME='value'`` per secret, in name order.

    Values are single-quoted, so nothing in them is expanded or run by any shell.
    """
    lines = ["# Managed by podstate: overwritten on every run. Edit the desired state instead."]
    lines += [f"export {name}={shlex.quote(values[name].value)}" for name in sorted(values)]
    return "\n".join(lines) + "\n"


# A URL's scheme and the user information before its host: ``https://TOKEN@host``.
_USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*)://([^/?#\s@]*)@", re.IGNORECASE)


def _is_credential(match: re.Match[str]) -> bool:
    """True when a URL's user information carries a credential: a password (``user:pw@``)
    in any URL, or anything at all before the host of a URL that is not SSH (git hosts take
    ``https://TOKEN@host``); ``ssh://git@host`` only names the SSH user."""
    return ":" in match[2] or "ssh" not in match[1].lower().split("+")


def has_credential(text: str) -> bool:
    """True when a URL in ``text`` carries a password or token (see ``_is_credential``):
    podstate refuses such a URL, since URLs are shown and passed on command lines."""
    return any(_is_credential(m) for m in _USERINFO.finditer(text))


def masked(text: str) -> str:
    """Return ``text`` with the credential of each URL in it replaced by ``***``."""
    return _USERINFO.sub(lambda m: f"{m[1]}://***@" if _is_credential(m) else m[0], text)
