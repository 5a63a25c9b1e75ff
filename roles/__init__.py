"""podstate's roles, one per module, installed as ``podstate.roles``.

Each role is a pyinfra deploy (``@role``) with one contract, ``apply(wanted, probe=None)``:
``wanted`` is a desired state as in ``host.data.podstate`` (``podstate.desired.spec.desired``
makes one from a dict), ``probe`` the pod probe. Each role says what the probe must read for
it in one way, ``reads(wanted) -> Request`` (podstate.facts.request), given to ``@role``
with, where a role has nothing to do for most desired states, ``when(wanted)``. podstate's
own deploy file reads the probe once for every role, the merge of their requests
(``podstate.pod.probe.read``); a role called alone, from a team's own deploy file, reads what
it needs itself: ``@role`` does (``podstate.run.role.probed``), so the role's own code always
has a probe.
"""
