# podstate starter file, version 1 (podstate init --update rewrites it)
"""pyinfra inventory: your pods, each with its desired state (podstate.inventory.entry).

The pods come from inventories/pods.yaml (PODSTATE_PODS: another file) or from RunPod's or
Vast's API (RUNPOD_API_KEY, VAST_API_KEY; PODSTATE_INVENTORY chooses); their desired state
from group_vars/ and host_vars/ here (PODSTATE_VARS: another directory) over podstate's
shipped defaults, validated before any pod is contacted.
"""

from podstate.inventory.entry import groups

globals().update(groups())
