"""The desired pod state: every role, in order, from one probe of the pod.

Run from the repository root: ``pyinfra -y inventories/pods.py deploy/pod.py``.
"""

from pyinfra import host

from podstate.operations import release_lock, violations
from podstate.probe import PodProbe
from podstate.roles import disk, env, nccl, scratch, shm, venv

wanted = host.data.podstate
probe = host.get_fact(
    PodProbe,
    paths=scratch.paths(wanted.get("scratch")) + env.paths(wanted) + venv.paths(wanted),
    files=env.FILES,
    venv=venv.probe_args(wanted),
)

if probe is not None:  # None: the probe failed, and pyinfra has already failed this pod
    if disk.has_room(probe, wanted):
        fresh_mounts = scratch.apply(wanted.get("scratch"), probe)
        shm.apply(wanted.get("shm"), probe)
        nccl_vars = nccl.variables(wanted.get("nccl"), host.data.get("cloud", "COMMUNITY"), probe)
        env.apply(wanted, nccl_vars, probe, fresh_mounts)
        venv.apply(wanted, probe)
    release_lock(name="Release the pod lock")
    violations(name="Report what apply cannot fix")
