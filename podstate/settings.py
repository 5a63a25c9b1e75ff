"""Time limits and parallelism, each overridable from the environment.

A pod that dies or hangs mid-run is reported within these bounds while the others finish:
connecting (TCP, SSH banner, authentication) is bounded by ``PODSTATE_CONNECT_TIMEOUT``
seconds and every remote command by ``PODSTATE_COMMAND_TIMEOUT`` seconds. A run that finds
another run's lock on a pod waits ``PODSTATE_LOCK_WAIT`` seconds, then skips that pod.

Each value is a whole number in ASCII digits within its range below (spaces around it are
dropped; an empty one is as unset, and its default holds). Anything else (``²``, ``-1``,
``1e3``, ``0``, a number past the range, which would reach the pod lock's shell arithmetic)
stops podstate before it does anything, with one line per bad variable naming it, its value
and the range: a limit that is not the one asked for is never applied silently.
"""

from __future__ import annotations

import os
import re

from podstate.pyinfra_api import cli as pyinfra_cli

DAY = 86400  # the longest time limit: a longer one is a typo, not a plan


class SettingError(ValueError):
    """A number from the environment that is not a whole number in its range: one line."""


def parse(name: str, text: str, default: int, high: int, unit: str = "seconds") -> int:
    """Return the number ``text`` (the value of ``name``) gives, ``default`` when it is
    empty; SettingError naming the variable, the value and the range 1..``high`` unless it
    is ASCII digits within it.

    Pure, for the tests; ``str.isdigit`` would take ``²`` (which ``int`` refuses) and
    ``int`` alone would take ``-1``, ``1_000`` and a number of any size.
    """
    value = text.strip(" \t\r\n")
    if not value:
        return default
    digits = re.fullmatch(r"0*([0-9]{1,12})", value)  # no int() of a thousand digits
    if digits and 1 <= int(digits[1]) <= high:
        return int(digits[1])
    what = "whole seconds" if unit == "seconds" else f"a whole number of {unit}"
    raise SettingError(f"{name}={text!r}: expected {what} from 1 to {high}")


_BAD: list[str] = []  # one line per bad variable, said together below


def _number(name: str, default: int, high: int = DAY, unit: str = "seconds") -> int:
    """Return ``name``'s number from the environment (``parse``); a bad one is remembered
    in _BAD and its default returned, so that every bad variable is named at once."""
    try:
        return parse(name, os.environ.get(name, ""), default, high, unit)
    except SettingError as e:
        _BAD.append(f"podstate: {e}")
        return default


CONNECT_TIMEOUT = _number("PODSTATE_CONNECT_TIMEOUT", 10, high=3600)
COMMAND_TIMEOUT = _number("PODSTATE_COMMAND_TIMEOUT", 120)
VENV_TIMEOUT = _number("PODSTATE_VENV_TIMEOUT", 1800)  # building a venv can take minutes
LOCK_WAIT = _number("PODSTATE_LOCK_WAIT", 60)
APT_TIMEOUT = _number("PODSTATE_APT_TIMEOUT", 900)  # apt-get update and install, together
APT_LOCK_WAIT = _number("PODSTATE_APT_LOCK_WAIT", 120)  # for another apt's lock, within it
LOCK_GRACE = _number("PODSTATE_LOCK_GRACE", 30)
# Every pod at once: a run costs one round trip per step whatever the fleet size, and
# pyinfra's own default (20 per CPU core) would add a step at 40 pods on a 2-core runner.
# pyinfra warns above its MAX_PARALLEL (None where it lacks it: verify() stops the run then).
PARALLEL = min(
    _number("PODSTATE_PARALLEL", 1000, high=100000, unit="pods"),
    pyinfra_cli.max_parallel() or 1000,
)
if _BAD:  # whichever command or pyinfra run imports this first: one line each, exit 1
    raise SystemExit("\n".join(_BAD))


def host_data() -> dict[str, object]:
    """Return the pyinfra host data that applies these limits to every pod's connection."""
    return {
        "_timeout": COMMAND_TIMEOUT,
        "ssh_paramiko_connect_kwargs": {
            "banner_timeout": CONNECT_TIMEOUT,
            "auth_timeout": CONNECT_TIMEOUT,
            "channel_timeout": CONNECT_TIMEOUT,
        },
    }
