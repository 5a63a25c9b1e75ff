"""podstate's desired state as plain pyinfra: what a pyinfra user would write without podstate.

Scratch storage (a tmpfs where the pod may mount one, else a directory), the ``dirs``, the
profile /etc/profile.d/podstate.sh (the ``dirs``, the ``env`` values and the NCCL variables
from the GPU topology and the cloud) and its hooks in ~/.bashrc, with pyinfra's own
operations and facts. The profile has podstate's content, so a fleet podstate converged
lacks only the two hooks' blocks (with pyinfra's markers). bench/fleet/cycle.py times it beside
podstate; each host's desired state is its ``want`` (podstate's, resolved) and ``cloud``
(inventory.py).
"""

import io
import shlex

from pyinfra import host
from pyinfra.facts.files import FileContents
from pyinfra.facts.server import Command, Home
from pyinfra.operations import files, server

PROFILE = "/etc/profile.d/podstate.sh"
HOOK = f"[ -r {PROFILE} ] && . {PROFILE}"
CAP_SYS_ADMIN = 21

want = host.data.want
status = host.get_fact(FileContents, path="/proc/self/status") or []
caps = next((int(line.split()[1], 16) for line in status if line.startswith("CapEff:")), 0)
can_mount = bool(caps >> CAP_SYS_ADMIN & 1)

for path, item in want.get("scratch", {}).items():
    files.directory(name=f"Scratch {path}", path=path, mode=item["mode"])
    if can_mount:
        server.mount(
            name=f"Scratch {path} as tmpfs",
            path=path,
            device="podstate",
            fs_type="tmpfs",
            options=[f"size={-(-item['size'] // 4096) * 4}k"],
        )

for name, path in want.get("dirs", {}).items():
    files.directory(name=f"{name} {path}", path=path, mode="1777" if name == "TMPDIR" else None)

# NCCL guards: on COMMUNITY pods, IB off, and P2P off for 2+ GPUs not all on NVLink.
topology = host.get_fact(Command, "nvidia-smi topo -m 2>/dev/null || true") or ""
rows = [line.split("\t") for line in topology.splitlines() if line.startswith("GPU")]
gpus = len(rows)
links = [cell.strip() for row in rows for cell in row[1 : gpus + 1]]
pcie = sum(1 for link in links if link != "X" and not link.startswith("NV"))
nccl = want.get("nccl") or {}
community = host.data.cloud != "SECURE"
variables = {**want.get("dirs", {}), **want.get("env", {})}
p2p, ib = nccl.get("p2p", "leave"), nccl.get("ib", "leave")
if p2p == "disable" or (p2p == "auto" and community and gpus >= 2 and pcie):
    variables["NCCL_P2P_DISABLE"] = "1"
if ib == "disable" or (ib == "auto" and community):
    variables["NCCL_IB_DISABLE"] = "1"
profile = "# Managed by podstate: overwritten on every run. Edit the desired state instead.\n"
profile += "".join(f"export {k}={shlex.quote(v)}\n" for k, v in variables.items())
files.put(name=f"Profile {PROFILE}", src=io.StringIO(profile), dest=PROFILE, mode="644")

# Read before Debian's ~/.bashrc returns for non-interactive shells, and after RunPod's
# /etc/rp_environment line at its end (whose values the profile overrides).
bashrc = f"{host.get_fact(Home)}/.bashrc"
files.block(
    name="Hook at the top of ~/.bashrc",
    path=bashrc,
    content=HOOK,
    marker="# {mark} plain pyinfra hook, top",
    before=True,
    after=True,
)
files.block(
    name="Hook at the end of ~/.bashrc",
    path=bashrc,
    content=HOOK,
    marker="# {mark} plain pyinfra hook, end",
)
