"""scripts/gpu_state.sh function by function, under dash, bash and busybox sh, against a
stand-in nvidia-smi (a script on PATH that answers from fixture files and logs its calls);
no GPU, no pod.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from tests.shell_probe import run

FIELDS = "index,uuid,memory.used,driver_version"
NVIDIA_SMI = """#!/bin/sh
echo "$*" >>"$FAKE/calls"
case $1 in
--query-gpu=*)
    case $1 in *bogus*) echo 'Field "bogus" is not a valid field to query.'; exit 2 ;; esac
    cat "$FAKE/query"; exit "$(cat "$FAKE/status")" ;;
--query-compute-apps=*) cat "$FAKE/apps" ;;
topo) cat "$FAKE/topo" ;;
*) cat "$FAKE/header" ;;
esac
"""
TWO_GPUS = "0, GPU-a, 0, 550.54\n1, GPU-b, 812, 550.54\n"


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    """Return the directory of the stand-in nvidia-smi's answers: two GPUs, one busy."""
    where = tmp_path / "fake"
    (where / "bin").mkdir(parents=True)
    smi = where / "bin" / "nvidia-smi"
    smi.write_text(NVIDIA_SMI)
    smi.chmod(0o755)
    answers = {"query": TWO_GPUS, "status": "0", "apps": "GPU-b, 7, python, 800\n"}
    answers |= {"header": "h1\nh2\nh3\nh4\nh5\nh6\n", "topo": "GPU0 X\n", "calls": ""}
    for name, text in answers.items():
        (where / name).write_text(text)
    return where


def call(shell: str, fake: Path, program: str, *args: str) -> list[str]:
    """Return the lines ``program`` printed after enc.sh and gpu_state.sh, with the stand-in
    first on PATH; the shell must exit 0 with nothing on stderr."""
    done = run(
        shell,
        ["enc.sh", "gpu_state.sh"],
        f'export FAKE={fake}; PATH="{fake}/bin:$PATH"\n{program}',
        *args,
    )
    assert (done.returncode, done.stderr) == (0, ""), done
    return done.stdout.splitlines()


def b64(text: str) -> str:
    """Return ``text`` in base64, as the probe's b64 sends it."""
    return base64.b64encode(text.encode()).decode()


def calls(fake: Path) -> list[str]:
    """Return the stand-in's calls, each its arguments."""
    return (fake / "calls").read_text().splitlines()


@pytest.mark.parametrize(
    ("name", "cell"),
    [("index", "1"), ("memory.used", "812"), ("driver_version", "550.54"), ("power", "")],
)
def test_gpu_cell_reads_a_fields_cell_by_its_place_in_the_query(
    shell: str, fake: Path, name: str, cell: str
) -> None:
    program = f'fields={FIELDS}; gpu_cell "1, GPU-b, 812, 550.54" "$1"; echo "[$cell]"'
    assert call(shell, fake, program, name) == [f"[{cell}]"]


def test_gpu_put_and_gpu_end_carry_a_value_of_many_lines_as_one_word(
    shell: str, fake: Path
) -> None:
    program = 'gpu_put "gpu.query 0" "$1" | gpu_end'
    value = "a b\nc"
    assert call(shell, fake, program, value) == ["gpu.query 0 " + b64(value)]
    assert call(shell, fake, "gpu_put x y; echo topo T") == ["x", "+y", "topo T"]


def test_gpu_query_asks_again_without_a_field_it_does_not_know(shell: str, fake: Path) -> None:
    program = 'gpu_query "index,bogus,uuid"; printf "%s|" "$status" "$fields" "$unknown"'
    assert call(shell, fake, program) == ["0|index,uuid|,bogus|"]
    assert calls(fake) == [
        "--query-gpu=index,bogus,uuid --format=csv,noheader,nounits",
        "--query-gpu=index,uuid --format=csv,noheader,nounits",
    ]


@pytest.mark.parametrize(
    ("query", "asked"),
    [
        (TWO_GPUS, True),  # GPU 1 has 812 MiB in use
        (TWO_GPUS.replace("812", "3"), False),  # both below IDLE_MIB
        (TWO_GPUS.replace("812", "[N/A]"), True),  # unknown
    ],
)
def test_gpu_apps_asks_for_processes_only_when_a_gpu_may_run_one(
    shell: str, fake: Path, query: str, asked: bool
) -> None:
    program = f'fields={FIELDS} answer="$1"; gpu_apps 100 gpu_uuid,pid'
    lines = call(shell, fake, program, query.rstrip("\n"))
    assert lines == (["gpu.apps 0", "+GPU-b, 7, python, 800"] if asked else [])


def test_gpu_key_is_the_count_and_the_first_driver(shell: str, fake: Path) -> None:
    program = (
        f'fields={FIELDS} answer="$1"; gpu_key; echo "$key"; fields=index; gpu_key; echo "[$key]"'
    )
    assert call(shell, fake, program, TWO_GPUS.rstrip("\n")) == ["key 2 550.54", "[]"]


def test_gpu_state_reads_header_and_topology_once_then_from_the_cache(
    shell: str, fake: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    program = f'gpu_state {FIELDS} "$1" 100 gpu_uuid,pid | gpu_end'
    first = call(shell, fake, program, str(cache))
    assert first == [
        f"gpu.query 0 {b64(TWO_GPUS.rstrip())}",
        f"gpu.apps 0 {b64('GPU-b, 7, python, 800')}",
        "gpu.header " + b64("h1\nh2\nh3\nh4\nh5\n"),
        "topo " + b64("GPU0 X\n"),
    ]
    assert cache.read_text().splitlines() == ["key 2 550.54", *first[2:]]
    (fake / "calls").write_text("")
    assert call(shell, fake, program, str(cache)) == first
    assert [c.split(" ")[0].split("=")[0] for c in calls(fake)] == [
        "--query-gpu",
        "--query-compute-apps",
    ]


def test_gpu_state_asks_nothing_more_of_a_failing_nvidia_smi(
    shell: str, fake: Path, tmp_path: Path
) -> None:
    (fake / "status").write_text("9")
    (fake / "query").write_text("NVML: driver mismatch\n")
    program = f'gpu_state {FIELDS} "$1" 100 gpu_uuid,pid | gpu_end'
    assert call(shell, fake, program, str(tmp_path / "c")) == [
        f"gpu.query 9 {b64('NVML: driver mismatch')}"
    ]
    assert len(calls(fake)) == 1 and not (tmp_path / "c").exists()


def test_gpu_state_prints_nothing_without_nvidia_smi(
    shell: str, fake: Path, tmp_path: Path
) -> None:
    os.unlink(fake / "bin" / "nvidia-smi")
    assert call(shell, fake, 'PATH="$FAKE/bin"; gpu_state a b 1 c; echo $?') == ["0"]
