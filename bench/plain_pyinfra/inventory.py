"""The pods for plain pyinfra: each with its SSH address and ``want``, its desired state as
podstate resolves it, from the JSON file PLAIN_PYINFRA_HOSTS names (bench/fleet/rivals/plain.py)."""

import json
import os

pods = [(name, data) for name, data in json.load(open(os.environ["PLAIN_PYINFRA_HOSTS"])).items()]
