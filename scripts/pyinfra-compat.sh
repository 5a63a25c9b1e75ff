#!/bin/sh
# Each pyinfra minor podstate supports (the PYINFRA_MINORS line of
# podstate/pyinfra_api/verify.py), in a venv with that minor's newest release from PyPI and
# podstate's other dependencies as pyproject.toml declares them, podstate itself installed
# without dependencies:
# - podstate's pyinfra API and boundary tests;
# - pyinfra's own test suite, from the release's sdist on PyPI, with podstate loaded as a
#   run loads it before a user's deploy files run (verify, quiet, plan_faster): what podstate
#   replaces in pyinfra must be invisible to them. It must pass whole, and end.
# About a minute a minor the first time; the venvs and the sdists stay in .venv/pyinfra-MINOR
# for the next run. PYINFRA_MINORS="3.10" picks some.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
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
# pyinfra's test requirements, one a line: its pyproject.toml's "test" and "dev" groups (3.9
# lists freezegun, which its tests import, in "dev" alone), less the docs group and what
# only lints, type-checks, measures coverage or debugs
test_requirements='
import re, sys, tomllib
groups = tomllib.load(open(sys.argv[1], "rb"))["dependency-groups"]
tools = "mypy ruff typos coverage pytest-cov ipython ipdb ipdbplugin".split()
def each(name):
    for d in groups.get(name, []) if name != "docs" else []:
        yield from each(d["include-group"]) if isinstance(d, dict) else [d]
for d in dict.fromkeys([*each("test"), *each("dev")]):
    name = re.split(r"[<>=!~;\[ ]", d)[0].lower()
    if name not in tools and not name.startswith("types-"):
        print(d)
'
# a pytest plugin: podstate loaded before any test module is imported, as the check loads it
# (it verifies before pyinfra's CLI patches the standard library with gevent)
plugin='"""podstate loaded as a run loads it before a deploy file (inventories/pods.py)."""

from podstate.pyinfra_api import connect, open_files, plan
from podstate.pyinfra_api.verify import verify

verify()
open_files.raise_limit()
connect.quiet()
plan.plan_faster()


def pytest_report_header():
    return "podstate loaded: verify, open_files.raise_limit, connect.quiet, plan.plan_faster"
'
for minor in $minors; do
  venv=.venv/pyinfra-$minor
  echo "== pyinfra $minor.*"
  [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
  # shellcheck disable=SC2086 # one requirement a word
  PYTHONWARNINGS=ignore "$venv/bin/pip" install -q "pyinfra==$minor.*" pytest $others
  PYTHONWARNINGS=ignore "$venv/bin/pip" install -q --no-deps -e .
  "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    tests/test_pyinfra_api.py tests/test_pyinfra_boundary.py tests/test_connect_causes.py

  version=$("$venv/bin/python" -c 'from importlib import metadata; print(metadata.version("pyinfra"))')
  echo "== pyinfra $version's own tests, podstate loaded"
  source=$venv/src/pyinfra-$version
  if [ ! -d "$source/tests" ]; then
    rm -rf "$venv/src" && mkdir -p "$venv/src"
    PYTHONWARNINGS=ignore "$venv/bin/pip" download -q --no-deps --no-binary :all: \
      -d "$venv/src" "pyinfra==$version"
    tar -xzf "$venv/src/pyinfra-$version.tar.gz" -C "$venv/src"
    if [ ! -d "$source/tests" ]; then
      echo "pyinfra-compat: pyinfra $version's sdist has no tests/ to run" >&2
      exit 1
    fi
  fi
  # shellcheck disable=SC2046 # one requirement a line, none with a space
  PYTHONWARNINGS=ignore "$venv/bin/pip" install -q \
    $("$venv/bin/python" -c "$test_requirements" "$source/pyproject.toml")
  mkdir -p "$venv/plugin"
  printf '%s' "$plugin" >"$venv/plugin/podstate_loaded.py"
  status=0
  (cd "$source" && PYTHONPATH="$root/$venv/plugin" timeout -k 10 180 \
    "$root/$venv/bin/python" -m pytest -q -p no:cacheprovider -p podstate_loaded tests) ||
    status=$?
  if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    echo "pyinfra-compat: pyinfra $version's tests did not end within 180 s" >&2
  fi
  [ "$status" = 0 ] || exit "$status"
done
