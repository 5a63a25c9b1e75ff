"""pyinfra's internals podstate relies on, in one place, and ``verify()`` that they are there.

pyinfra has no public API for these: its CLI package (``pyinfra_cli``), ``pyinfra.api``'s
modules beyond what ``pyinfra.api`` exports, ``pyinfra.context``, ``pyinfra.connectors``, the
undocumented attributes of State and Host (their operations and order, the operation being
planned, the print prefix, the connector's transport) and the text of pyinfra's log lines.
Only this package touches them (tests/test_pyinfra_boundary.py fails otherwise), each in a
function named for what podstate does with it: ``plan`` (operations as they are planned),
``execute`` (running commands and printing as pyinfra does), ``cli`` (the check's run, as
pyinfra's CLI drives it), ``connect`` (a failed connection: one line naming its cause),
``logs`` (pyinfra's log lines), ``open_files`` (the limit that caps pyinfra's parallelism),
``entry_points`` and ``deferred`` (what importing pyinfra costs), ``scope`` (the hosts
podstate's replacements of pyinfra's functions answer for: its own pods) and ``verify``;
tests/test_pyinfra_api.py tries each on pyinfra's own API. Importing any of them changes
nothing: ``pyinfra_cli``, whose import patches the standard library with gevent, is imported
only when the check loads an inventory.
"""
