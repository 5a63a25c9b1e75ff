"""The providers podstate knows, in PODSTATE_INVENTORY's order: the pods file, then each
provider's API. Every table keyed by provider is read from here.

A provider is one module of this package (``Provider``); ``registered`` adds one for the
span of a block (the tests' own provider goes through it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from podstate.providers.podsfile import PODS_FILE
from podstate.providers.record import Provider
from podstate.providers.runpod import RUNPOD
from podstate.providers.vast import VAST

BUILTIN = (PODS_FILE, RUNPOD, VAST)
# A pod that names no provider (a pods file's without ``provider:``) is taken as RunPod's.
DEFAULT = RUNPOD.name
_known: list[Provider] = list(BUILTIN)


def every() -> tuple[Provider, ...]:
    """Return every provider, in PODSTATE_INVENTORY's order (the sources' order)."""
    return tuple(_known)


def apis() -> tuple[Provider, ...]:
    """Return the providers an API lists pods from (those with a ``listing``)."""
    return tuple(p for p in _known if p.listing)


def pod_providers() -> tuple[Provider, ...]:
    """Return the providers whose containers name themselves (an ``identity``): those a
    pod's host data ``provider`` may name, as a pods file's ``provider:`` does."""
    return tuple(p for p in _known if p.identity)


def named(name: str) -> Provider:
    """Return the provider called ``name``; KeyError when there is none."""
    for provider in _known:
        if provider.name == name:
            return provider
    raise KeyError(name)


def pod_provider(name: object) -> Provider:
    """Return the provider of a pod whose host data ``provider`` is ``name``: ``DEFAULT``
    (RunPod) when it names none (a pods file's pod) or one podstate does not know, so that
    what a stop costs is always said."""
    try:
        return named(str(name)) if name else named(DEFAULT)
    except KeyError:
        return named(DEFAULT)


@contextmanager
def registered(provider: Provider) -> Iterator[Provider]:
    """Within the block, ``provider`` is known (after the others); ValueError when its
    name is taken."""
    if any(p.name == provider.name for p in _known):
        raise ValueError(f"provider {provider.name} is already registered")
    _known.append(provider)
    try:
        yield provider
    finally:
        _known.remove(provider)
