"""The pods file (``podstate.inventory.podsfile``): pods a user lists by hand. No API lists
or stops them; a pod of it names its provider (``provider:``), else it is taken as RunPod's
(``registry.pod_provider``)."""

from __future__ import annotations

from podstate.providers.record import Provider

PODS_FILE = Provider(name="file", shown="pods file")
