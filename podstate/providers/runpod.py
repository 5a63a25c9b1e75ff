"""RunPod: pods listed by its v2 REST API (``podstate.inventory.runpod``); a stop wipes the
container disk, so the boot hook lives on the volume."""

from __future__ import annotations

from podstate.providers.record import Provider

RUNPOD = Provider(
    name="runpod",
    shown="RunPod API",
    key_variable="RUNPOD_API_KEY",
    listing="podstate.inventory.runpod:listed",
    to_pods="podstate.inventory.runpod:to_pods",
    stop="podstate.inventory.runpod_client:stop",
    listing_key="pods",
    identity=("RUNPOD_POD_ID",),
    identified="RunPod pod id",
    keeps_disk=False,
    stop_cost=(
        "a stop wipes the container disk: podstate puts its own state back at the next "
        "start, files outside the volume are gone; a pod on host-local storage may restart "
        "without its GPUs"
    ),
    groups=("community", "secure", "runpod"),
    start_hook="the template's container start command",
)
