#!/bin/sh
# The pyinfra API and boundary tests against each pyinfra minor podstate supports (the
# PYINFRA_MINORS line of podstate/pyinfra_api/verify.py): for each, a venv with that minor's
# newest release from PyPI and podstate's other dependencies as pyproject.toml declares them,
# podstate itself installed without dependencies. About a minute a minor the first time;
# the venvs stay in .venv/pyinfra-MINOR for the next run. PYINFRA_MINORS="3.10" picks some.
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
listed=$(sed -n 's/^PYINFRA_MINORS = (\([^)]*\)).*/\1/p' podstate/pyinfra_api/verify.py | tr -d '",')
minors=${PYINFRA_MINORS:-$listed}
if [ -z "$minors" ]; then
  echo "pyinfra-compat: no PYINFRA_MINORS line in podstate/pyinfra_api/verify.py" >&2
  exit 1
fi
# podstate's dependencies but pyinfra, one a line, as pyproject.toml declares them
others=$("$PYTHON" -c '
import tomllib
for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]:
    if not d.startswith("pyinfra"):
        print(d)
')
for minor in $minors; do
  venv=.venv/pyinfra-$minor
  echo "== pyinfra $minor.*"
  [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
  # shellcheck disable=SC2086 # one requirement a word
  PYTHONWARNINGS=ignore "$venv/bin/pip" install -q "pyinfra==$minor.*" pytest $others
  PYTHONWARNINGS=ignore "$venv/bin/pip" install -q --no-deps -e .
  "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    tests/test_pyinfra_api.py tests/test_pyinfra_boundary.py tests/test_connect_causes.py
done
