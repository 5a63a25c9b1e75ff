"""The open-files limit: raised to the hard limit at start, so that pyinfra's cap on pods
worked on at once (a third of it) does not silently split a large fleet into waves."""

import resource
import subprocess

import pytest

from tests.e2e import BIN, ROOT

SOFT, HARD = resource.getrlimit(resource.RLIMIT_NOFILE)
LOW = min(256, HARD // 2)
# An inventory that stops the run, saying the limit and the parallelism the run has then.
REPORT = (
    "import resource\n"
    "from pyinfra.api import state\n"
    "from podstate import settings\n"
    "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
    "raise SystemExit(f'limit {soft} {hard} {state.MAX_PARALLEL} {settings.PARALLEL}')\n"
)


def _started_low() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LOW, HARD))


@pytest.mark.parametrize(
    "command", ["podstate check --inventory INVENTORY", "pyinfra -y INVENTORY deploy/pod.py"]
)
def test_a_run_started_with_a_low_soft_limit_raises_it_to_the_hard_one(tmp_path, command):
    inventory = tmp_path / "inventory.py"
    inventory.write_text(REPORT)
    program, *args = command.replace("INVENTORY", str(inventory)).split()
    result = subprocess.run(
        [str(BIN / program), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        preexec_fn=_started_low,
    )
    cap = round((HARD - 10) / 3)  # pyinfra's: a third of the limit, less a few
    assert f"limit {HARD} {HARD} {cap} {min(cap, 1000)}" in result.stderr, result.stderr
