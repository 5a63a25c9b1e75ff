# podstate starter file, version 1 (podstate init --update rewrites it)
"""podstate's deploy: every role, in order, from one probe of the pod (podstate.pod.deploy).

Your own deploy files go beside it, and run with it from the repository root: ``pyinfra -y
inventories/pods.py deploy/*.py``. The pod lock and the report span every file.
"""

from podstate.pod import deploy

deploy.run()
