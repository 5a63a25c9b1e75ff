"""podstate's deploy: every phase of podstate.pod.phases, in order, from one probe of the pod.

deploy/pod.py, a starter file, runs it with the other deploy files: ``pyinfra -y
inventories/pods.py deploy/*.py``. The pod lock and the violations report span every file
(see ``podstate.pod.bookends``). The order (``python -m podstate.pod.deploy`` prints it):

{contents}
"""

from pyinfra import host

from podstate.desired.typed import build
from podstate.pod import bookends, phases
from podstate.pod import probe as deploy_probe

__doc__ = __doc__.format(contents=phases.contents())


def run() -> None:
    """Plan podstate's part of the run on the pod pyinfra is planning for: the lock, every
    phase in order from one probe (none after a phase that finds the pod failed), the last
    ones after every deploy file's operations, then the release and the report. Returns
    nothing: pyinfra runs what it planned."""
    wanted = build(host.data.podstate)  # typed once, for every phase
    bookends.start()
    probe = deploy_probe.read(wanted)  # what every phase reads, in one command
    if probe is None:  # pyinfra failed the pod already
        with bookends.finish():
            return
    going = True
    for phase in phases.PHASES:
        if not phase.last and going:
            going = phase.apply(wanted, probe).value is not False
    with bookends.finish():
        for phase in phases.PHASES:
            if phase.last and going:
                going = phase.apply(wanted, probe).value is not False


if __name__ == "__main__":
    print(phases.contents())
