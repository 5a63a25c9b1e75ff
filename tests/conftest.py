import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import os  # noqa: E402

import pytest  # noqa: E402

from tests.shell_probe import SHELLS  # noqa: E402


def cannot_run_e2e(why: str) -> None:
    """Fail the test, saying ``why``: a suite that cannot run its end-to-end tests is not a
    green one. With PODSTATE_SKIP_E2E=1 (asked for, say, on a machine without root), skip it."""
    if os.environ.get("PODSTATE_SKIP_E2E") == "1":
        pytest.skip(why)
    pytest.fail(f"{why} (set PODSTATE_SKIP_E2E=1 to skip the end-to-end tests)", pytrace=False)


@pytest.fixture(params=list(SHELLS))
def shell(request: pytest.FixtureRequest) -> str:
    """Return, in turn, each shell a pod may have as /bin/sh (its name), for the tests that
    run podstate's shell functions under every one."""
    return str(request.param)


@pytest.fixture(scope="module")
def fleet(request, tmp_path_factory):
    """Fresh sandbox pods for a test module, taken down after it: five (one of each shape),
    or what the module's ``SANDBOX`` dict asks ``lifecycle.up`` for."""
    from podstate.sandbox import lifecycle
    from tests.e2e import Fleet, new_vars_dir

    if os.geteuid() != 0:
        cannot_run_e2e("sandbox pods need root")
    state = tmp_path_factory.mktemp("sandbox")
    old = os.environ.get("PODSTATE_SANDBOX")
    os.environ["PODSTATE_SANDBOX"] = str(state)
    try:
        pods_file = lifecycle.up(**getattr(request.module, "SANDBOX", {"pods": 5}))
        yield Fleet(state, pods_file, new_vars_dir(tmp_path_factory.mktemp("vars")))
    finally:
        lifecycle.down()
        if old is None:
            os.environ.pop("PODSTATE_SANDBOX", None)
        else:
            os.environ["PODSTATE_SANDBOX"] = old


@pytest.fixture(autouse=True)
def _not_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every test outside pyinfra's CLI (``pyinfra.is_cli`` false), as a library caller
    is: a check run in this process sets it for good, and a later test that plans operations
    on a host of its own would then be refused them outside the CLI's stages."""
    import pyinfra

    monkeypatch.setattr(pyinfra, "is_cli", False)


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Give the tests, and every program they start, a cache of their own
    (``XDG_CACHE_HOME``): a watch started without ``--state`` keeps its state there, not in
    the user's ``~/.cache``."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture
def provider_api():
    """Start a provider's API for the test, closed after it: ``provider_api("runpod")`` or
    ``provider_api("vast", key=...)`` returns a ``tests.api_server.ProviderApi``."""
    from tests.api_server import ProviderApi

    started: list[ProviderApi] = []

    def start(provider: str, key: str | None = None) -> ProviderApi:
        started.append(ProviderApi(provider, key))
        return started[-1]

    yield start
    for api in started:
        api.close()
