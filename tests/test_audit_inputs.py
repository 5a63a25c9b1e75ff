"""Inputs the audit of issue 55 found mishandled, each through the real code: two runs
recording one pod's host key at once, names and ids that end in a newline, and numbers
from the environment that are not whole seconds in their range. No sandbox pods."""

from __future__ import annotations

import json
import multiprocessing
import re
import subprocess
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podstate import settings as podstate_settings
from podstate.desired.errors import SpecError
from podstate.facts import start
from podstate.inventory import hostkeys, keylog, naming, podsfile
from podstate.inventory.api_http import InventoryError
from tests.e2e import BIN, ROOT

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPZTTw0CxM1ZLfg2o7C1qcUDNfGZqJ6Pp7H4nqGJtZ2J"
WRITERS = 16
RECORDS = 60


# --- 5. two runs recording one pod's host key at once -------------------------------------


def _record_many(directory: str, writer: int, start_line: Any, errors: Any) -> None:
    """Record pod ``p1``'s key RECORDS times, as run ``writer`` would (its own address, so
    every record rewrites the known_hosts file and its JSON); put the traceback of the first
    error on ``errors``, or None when there was none."""
    try:
        start_line.wait()
        known_hosts = Path(directory) / "p1.known_hosts"
        for n in range(RECORDS):
            trust = hostkeys.HostKeyTrust(
                pod_id="p1",
                name="trainer",
                address=f"[10.0.0.{writer}]:{2200 + n}",
                known_hosts=known_hosts,
                state=hostkeys.NEW,
                recorded_at=None,
                started_at=f"2026-12-01T10:{writer:02d}:{n % 60:02d}Z",
            )
            hostkeys.record(trust)
    except BaseException:
        errors.put(traceback.format_exc())
        return
    errors.put(None)


def test_runs_recording_one_pods_key_at_once_never_fail_and_leave_one_whole_record(tmp_path):
    (tmp_path / "p1.known_hosts").write_text(f"[10.0.0.99]:22 {KEY}\n")
    context = multiprocessing.get_context("fork")
    start_line, results = context.Barrier(WRITERS), context.Queue()
    runs = [
        context.Process(target=_record_many, args=(str(tmp_path), w, start_line, results))
        for w in range(WRITERS)
    ]
    for run in runs:
        run.start()
    errors = [results.get(timeout=120) for _ in runs]
    for run in runs:
        run.join(timeout=30)
    assert [e for e in errors if e] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p1.json", "p1.known_hosts"]
    meta = json.loads((tmp_path / "p1.json").read_text())
    assert set(meta) == {"pod_id", "name", "address", "recorded_at"}
    assert re.fullmatch(r"\[10\.0\.0\.\d+\]:\d+", meta["address"])
    (line,) = (tmp_path / "p1.known_hosts").read_text().splitlines()
    assert re.fullmatch(r"\[10\.0\.0\.\d+\]:\d+ " + re.escape(KEY), line)


def test_a_restarted_pods_key_moved_aside_by_another_run_is_no_error(tmp_path):
    stored = tmp_path / "p1.known_hosts"
    trust = hostkeys.HostKeyTrust(
        "p1", "trainer", "[h]:22", stored, hostkeys.RESTARTED, "2026-01-01", "2026-02-01"
    )
    stored.write_text(f"[h]:22 {KEY}\n")
    hostkeys.record(trust)
    hostkeys.record(trust)  # the other run: the key is gone to .old already
    assert stored.read_text() == ""
    assert (tmp_path / "p1.known_hosts.old").read_text() == f"[h]:22 {KEY}\n"


def test_a_failed_write_leaves_no_temp_file(tmp_path):
    with pytest.raises(UnicodeEncodeError):
        hostkeys._write_atomic(tmp_path / "p1.json", "\udcff")
    assert list(tmp_path.iterdir()) == []


# --- 6. names and ids that end in a newline ------------------------------------------------


def test_a_pods_file_name_ending_in_a_newline_is_refused_in_one_line(tmp_path):
    pods = tmp_path / "pods.yaml"
    pods.write_text('pods:\n  trainer: {ssh_hostname: 10.0.0.1}\n  "trainer\\n": {}\n')
    with pytest.raises(SpecError, match="not a valid pod name"):
        podsfile.read_pods_file(pods)
    result = subprocess.run(
        [str(BIN / "podstate"), "inventory"],
        cwd=ROOT,
        env={"PODSTATE_PODS": str(pods), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line == (
        f"podstate: {pods}: pods.'trainer\\n': "
        "not a valid pod name (letters, digits, '.', '_', '-')"
    )


@dataclass
class Listed:
    key: str
    id: str
    name: str
    created_at: str = "2026-12-01T10:00:00Z"


def test_a_listed_pod_named_with_a_newline_gets_a_name_of_its_own():
    names = naming.host_names([Listed("runpod:p1", "p1", "trainer\n")])
    assert names == {"runpod:p1": "trainer-p1"}


def test_a_pod_id_ending_in_a_newline_is_no_file_stem():
    assert hostkeys._file_stem("p1") == "p1"
    stem = hostkeys._file_stem("p1\n")
    assert stem.startswith("id-") and "\n" not in stem


def test_a_boot_id_ending_in_a_newline_or_other_digits_is_unknown():
    boot_id = "0123abcd-0123-4567-89ab-0123456789ab"
    assert start.parse(f"{boot_id} 42") == f"{boot_id}:42"
    assert start.parse(f"{boot_id}\n 42") is None
    assert start.parse(f"{boot_id} ٤٢") is None  # digits, but not ASCII ones


NAMEISH = st.text(alphabet=st.sampled_from("aZ09_.-+/:\n \t\r"), max_size=70)
ANY_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=70)


def _takes(document: dict) -> bool:
    """Return whether the pods file ``document`` (written as JSON, which YAML reads) is
    taken; False when it is refused with a one-line SpecError."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "pods.yaml"
        path.write_text(json.dumps(document), encoding="utf-8")
        try:
            podsfile.read_pods_file(path)
        except SpecError as e:
            assert "\n" not in str(e)
            return False
    return True


def _whole(charset: str, text: str) -> bool:
    """Return whether all of ``text`` is of ``charset`` (ASCII: a newline is not of it)."""
    return bool(re.fullmatch(charset, text, re.ASCII)) and "\n" not in text


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(NAMEISH, NAMEISH.map(lambda t: t + "\n"), ANY_TEXT))
def test_names_and_ids_are_taken_whole_or_not_at_all(text):
    """Where podstate takes a pod name, a group name, a fingerprint or a pod id as it is,
    it takes ``text`` iff all of it is of its charset and length: never with a newline."""
    name = _whole(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", text)
    assert _takes({"pods": {text: {}}}) == name
    assert (naming.host_names([Listed("k", "p1", text)])["k"] == text) == name
    group = _whole(r"[A-Za-z_][A-Za-z0-9_]{0,62}", text)
    assert _takes({"pods": {"p": {"groups": [text]}}}) == group
    fingerprint = _whole(r"SHA256:[A-Za-z0-9+/]{43}", text)
    assert _takes({"pods": {"p": {"host_key_fingerprints": [text]}}}) == fingerprint
    assert (hostkeys._file_stem(text) == text) == _whole(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}", text)


@pytest.mark.parametrize("value", ["trainer\n", "gpu\n", "SHA256:" + "A" * 43 + "\n"])
def test_a_trailing_newline_is_refused_everywhere(value):
    assert not _takes({"pods": {value: {}}})
    assert not _takes({"pods": {"p": {"groups": [value]}}})
    assert not _takes({"pods": {"p": {"host_key_fingerprints": [value]}}})


# --- 7. numbers from the environment ------------------------------------------------------

BAD = ["²", "-1", "1e3", "99999999999999999999", "0", "1.5", "٣", "60s", "0x10", "86401"]


@pytest.mark.parametrize("value", BAD)
def test_a_bad_lock_wait_is_one_line_and_exit_1(value):
    result = subprocess.run(
        [str(BIN / "podstate"), "inventory"],
        cwd=ROOT,
        env={"PODSTATE_LOCK_WAIT": value, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"podstate: PODSTATE_LOCK_WAIT={value!r}: expected whole seconds from 1 to 86400\n"
    )


def test_every_bad_number_is_named_each_on_its_line():
    result = subprocess.run(
        [str(BIN / "podstate"), "report", "merge", "-", "none.json"],
        cwd=ROOT,
        env={"PODSTATE_CONNECT_TIMEOUT": "²", "PODSTATE_PARALLEL": "0", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "podstate: PODSTATE_CONNECT_TIMEOUT='²': expected whole seconds from 1 to 3600",
        "podstate: PODSTATE_PARALLEL='0': expected a whole number of pods from 1 to 100000",
    ]


@pytest.mark.parametrize(("value", "wait"), [("", 60), (" 45 ", 45), ("007", 7), ("86400", 86400)])
def test_a_good_or_empty_number_is_taken(value, wait):
    code = "from podstate import settings; print(settings.LOCK_WAIT)"
    result = subprocess.run(
        [str(BIN / "python"), "-c", code],
        cwd=ROOT,
        env={"PODSTATE_LOCK_WAIT": value},
        capture_output=True,
        text=True,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, f"{wait}\n", "")


def test_pyinfra_itself_stops_on_a_bad_number_in_one_line(tmp_path):
    result = subprocess.run(
        [str(BIN / "pyinfra"), "-y", "inventories/pods.py", "deploy/pod.py"],
        cwd=ROOT,
        env={"PODSTATE_COMMAND_TIMEOUT": "1e9", "PATH": f"{BIN}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    assert (
        "podstate: PODSTATE_COMMAND_TIMEOUT='1e9': expected whole seconds from 1 to 86400"
        in result.stderr.splitlines()
    )


@settings(max_examples=400, deadline=None)
@given(
    text=st.one_of(
        st.text(max_size=14),
        st.text(alphabet="0123456789", max_size=14),
        st.integers(-10, 10**6).map(str),
    ),
    high=st.sampled_from([3600, 86400, 100000]),
)
def test_the_parser_takes_ascii_whole_numbers_in_range_and_nothing_else(text, high):
    stripped = text.strip(" \t\r\n")
    if not stripped:
        assert podstate_settings.parse("X", text, 5, high) == 5
        return
    good = re.fullmatch(r"[0-9]+", stripped) and 1 <= int(stripped) <= high
    if good:
        assert podstate_settings.parse("X", text, 5, high) == int(stripped)
    else:
        with pytest.raises(podstate_settings.SettingError) as raised:
            podstate_settings.parse("X", text, 5, high)
        assert "\n" not in str(raised.value) and str(raised.value).startswith(f"X={text!r}: ")


@pytest.mark.parametrize("value", ["²", "0", "-1", "nan", "inf", "1e3", "601", "٣"])
def test_a_bad_key_log_limit_is_one_line(monkeypatch, value):
    monkeypatch.setenv(keylog.IDLE_ENV, value)
    with pytest.raises(InventoryError) as raised:
        keylog.limits()
    assert str(raised.value) == (
        f"{keylog.IDLE_ENV}={value!r}: expected seconds above 0, up to 600"
    )


def test_a_good_or_empty_key_log_limit_is_taken(monkeypatch):
    monkeypatch.setenv(keylog.IDLE_ENV, "0.5")
    monkeypatch.setenv(keylog.TIMEOUT_ENV, "")
    assert keylog.limits() == (0.5, keylog.TIMEOUT_S)
