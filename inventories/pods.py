"""pyinfra inventory: the pods of the sources PODSTATE_INVENTORY names (file, runpod), else
of PODSTATE_PODS, else of RunPod's API when RUNPOD_API_KEY is set, else of
inventories/pods.yaml (the file and the key together are refused: podstate.inventory.fleet).
Pods the API lists but podstate cannot manage are named on stderr.

Each pod's desired state is merged from PODSTATE_VARS (default inventories/) and validated
here, so an invalid file stops the run before any pod is contacted.
"""

from podstate.pyinfra_api.verify import verify

verify()  # before the modules that use pyinfra's internals: one line on a pyinfra without one

from podstate.pyinfra_api import connect, open_files  # noqa: E402

open_files.raise_limit()  # before podstate's settings read pyinfra's parallelism from it
connect.quiet()  # a pod that cannot be reached: one line naming why, no traceback

from podstate import signals  # noqa: E402
from podstate.desired.errors import SpecError  # noqa: E402
from podstate.inventory.fleet import inventory_groups, load_pods  # noqa: E402
from podstate.pyinfra_api import plan as pyinfra_plan  # noqa: E402

signals.install()
pyinfra_plan.plan_faster()  # pyinfra plans each operation without reading source files
try:
    globals().update(inventory_groups(load_pods()))
except SpecError as _error:
    raise SystemExit(f"podstate: {_error}") from None
