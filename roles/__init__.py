"""podstate's roles, one per module, installed as ``podstate.roles``.

Each role is a pyinfra deploy (``@role``) with one contract, ``apply(wanted, probe=None)``:
``wanted`` is a typed desired state (podstate.desired.state ``State``; the deploy builds one
per pod, ``podstate.inventory.fleet.desired`` makes one from a dict, and a role given
``host.data.podstate`` builds it), ``probe`` the pod probe; it returns what it found and
did (podstate.run.findings ``Result``: what it made, its violations, what the boot hook can
put back). Each role says what the probe must read for
it in one way, ``reads(wanted) -> Request`` (podstate.facts.request), given to ``@role``
with, where a role has nothing to do for most desired states, ``when(wanted)``. podstate's
own deploy reads the probe once for every phase of its run (podstate.pod.phases), the
merge of their requests (``podstate.pod.probe.read``); a role called alone, from a team's
own deploy file, reads what it needs itself: ``@role`` does
(``podstate.run.role.probed``), so the role's own code always has a probe.
"""
