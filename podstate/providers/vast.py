"""Vast.ai: instances listed by its API (``podstate.inventory.vast``); a stop keeps the
container disk, so the boot hook lives there, and SSH sessions start inside tmux
(``podstate.run.login``)."""

from __future__ import annotations

from podstate.providers.record import Provider

VAST = Provider(
    name="vast",
    shown="Vast API",
    key_variable="VAST_API_KEY",
    listing="podstate.inventory.vast:listed",
    to_pods="podstate.inventory.vast:to_pods",
    stop="podstate.inventory.vast_client:stop",
    listing_key="vast",
    identity=("VAST_CONTAINERLABEL", "CONTAINER_ID"),
    identified="Vast instance id",
    keeps_disk=True,
    stop_cost=(
        "a stop keeps the container disk (Vast): its files stay, its processes and /dev/shm "
        "contents go, and podstate puts its own state back after the next start; a started "
        "instance waits until its GPUs are free again"
    ),
    groups=("community", "vast"),
    start_hook="the template's onstart script",
    called="Vast instance",
)
