"""Fuzzing the loaders: any input is a valid state or one line naming the file and key."""

import os
import string
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podstate.desired.errors import SpecError
from podstate.desired.load import VarsDir
from podstate.desired.spec import resolve
from podstate.inventory.podsfile import read_pods_file
from tests.e2e import write_vars

KEYS = [
    "scratch",
    "dirs",
    "env",
    "shm",
    "nccl",
    "path",
    "size",
    "mode",
    "min_size",
    "p2p",
    "ib",
    "/scratch",
    "/workspace/x",
    "TMPDIR",
    "PIP_CACHE_DIR",
    "defaults",
    "pods",
    "pod-1",
    "ssh_hostname",
    "ssh_port",
    "ssh_user",
    "cloud",
    "groups",
    "auto",
    "disable",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["16G", "64M", "1.5T", "8X", "/abs", "rel", "1777"]),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=8), st.integers(), st.booleans())
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=25,
)
raw_text = st.text(alphabet=string.printable + "\x00\x85\u2028é", max_size=200)
CASES = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _as_yaml(document) -> str:
    try:
        return yaml.safe_dump(document)
    except yaml.YAMLError:
        return repr(document)


def assert_one_line_naming(error: SpecError, filename: str) -> None:
    message = str(error)
    assert message and "\n" not in message and "\r" not in message
    assert filename in message


@CASES
@given(document=documents, text=raw_text, use_text=st.booleans())
def test_desired_state_loader(tmp_path_factory, document, text, use_text):
    root = tmp_path_factory.mktemp("vars")
    write_vars(root, "group_vars/all.yaml", text if use_text else _as_yaml(document))
    try:
        state = resolve(VarsDir(root).layers(["community"], "pod-1"), "pod-1")
    except SpecError as error:
        assert_one_line_naming(error, "all.yaml")
    else:
        assert isinstance(state, dict)
        assert set(state) <= {
            "scratch",
            "dirs",
            "env",
            "shm",
            "nccl",
            "gpu",
            "disk",
            "download",
            "path",
            "venv",
            "waivers",
            "disk_reserve",
        }


@CASES
@given(document=documents, text=raw_text, use_text=st.booleans())
def test_pods_file_reader(tmp_path_factory, document, text, use_text):
    path: Path = tmp_path_factory.mktemp("pods") / "pods.yaml"
    path.write_text(text if use_text else _as_yaml(document), encoding="utf-8")
    try:
        pods = read_pods_file(path)
    except SpecError as error:
        assert_one_line_naming(error, "pods.yaml")
    else:
        assert pods and all(pod.groups[0] in ("community", "secure") for pod in pods)


@CASES
@given(document=st.dictionaries(st.sampled_from(KEYS[:6]), documents, max_size=4))
def test_desired_state_loader_near_valid(tmp_path_factory, document):
    """Documents whose top-level keys are real sections reach the schema's deeper checks."""
    test_desired_state_loader.hypothesis.inner_test(tmp_path_factory, document, "", False)


def _real_probe_output() -> list[str]:
    """Return the lines the probe prints on this machine, with files of every kind."""
    import tempfile

    from tests import probing

    root = Path(tempfile.mkdtemp())
    (root / "f").write_text("export A=1\n")
    (root / "link").symlink_to(root / "f")
    (root / "dir").mkdir()
    files = [str(root / name) for name in ("f", "link", "dir", "absent")]
    venv = {"path": str(root / "venv"), "python": "python3", "uv": str(root / "uv")}
    return probing.run([str(root), "/nonexistent/x"], files, venv).stdout.splitlines()


PROBE_OUTPUT = _real_probe_output()


def assert_parsed_or_one_line(output: list[str]) -> None:
    """The probe's parser returns its Probe, or fails this pod with one line; nothing else."""
    from pyinfra.api.exceptions import FactProcessError

    from podstate.facts.probe import PodProbe, Probe

    try:
        probe = PodProbe().process(output)
    except FactProcessError as error:
        assert str(error) and "\n" not in str(error)
    else:
        assert isinstance(probe, Probe)


def test_real_probe_output_parses():
    assert PROBE_OUTPUT[0] == "begin" and PROBE_OUTPUT[-1] == "end"
    assert_parsed_or_one_line(PROBE_OUTPUT)


@CASES
@given(cut=st.integers(min_value=0), chars=st.integers(min_value=0, max_value=200))
def test_truncated_probe_output(cut, chars):
    lines = PROBE_OUTPUT[: cut % len(PROBE_OUTPUT)]
    if lines and chars:
        lines[-1] = lines[-1][: chars % (len(lines[-1]) + 1)]
    assert_parsed_or_one_line(lines)


@CASES
@given(
    index=st.integers(min_value=0),
    line=st.one_of(
        st.text(max_size=80),
        st.builds(
            " ".join,
            st.lists(
                st.one_of(
                    st.sampled_from(["file", "path", "shm", "disk", "caps", "venv.free"]),
                    st.text(alphabet=string.ascii_letters + string.digits + "+/=-_:", max_size=12),
                ),
                max_size=9,
            ),
        ),
    ),
    replace=st.booleans(),
)
def test_malformed_probe_section(index, line, replace):
    lines = list(PROBE_OUTPUT)
    position = 1 + index % (len(lines) - 1)
    if replace and position < len(lines) - 1:
        lines[position] = line
    else:
        lines.insert(position, line)
    assert_parsed_or_one_line(lines)
