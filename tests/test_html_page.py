"""``podstate check --html``: the fleet at a glance in one page that loads and runs nothing.

Unit tests render reports and read the page back with Python's HTML parser: what a pod or the
desired state says is text, never markup, whatever it holds. The end-to-end test writes the
page with a real check over sandbox pods and opens it in headless Chromium, which takes a
screenshot and gives back the DOM it rendered.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import subprocess
import threading
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from podstate import cli
from podstate.check import html as page
from podstate.check.result import PodResult, to_json
from podstate.commands.check import _write
from podstate.terminal import visible
from tests.e2e import check

SANDBOX = {"pods": 2}


class Page(HTMLParser):
    """A page as the parser reads it: every tag with its attributes, all its text, and each
    table row's cells as text."""

    def __init__(self, document: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self.feed(document)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def row(self, pod: str) -> list[str]:
        """Return the cells of ``pod``'s row: pod, status, changes, violations, $/h, use, GPUs."""
        (found,) = [cells for cells in self.rows if cells and cells[0] == pod]
        return found


ACTIVITY = {"in_use": [], "unknown": [], "processes": [], "sessions": []}


def _report() -> dict:
    """Return the JSON report of a fleet with one pod of each kind the page tells apart."""
    results = {
        "idle-a100": PodResult(
            cost_per_hour=1.5,
            idle=True,
            activity={
                **ACTIVITY,
                "idle": True,
                "gpus": [{"index": 0, "utilization": 0}, {"index": 1, "utilization": 0}],
                "idle_for": 7500,
                "idle_since": "2026-12-04T08:00:00Z",
            },
        ),
        "busy-h100": PodResult(
            status="drift",
            changes=[
                {"role": "Environment", "operation": "Write profile", "diff": "-a\n+b"},
                {"role": "Secrets", "operation": "Upload token", "secret": True},
            ],
            cost_per_hour=2.25,
            idle=False,
            activity={
                **ACTIVITY,
                "idle": False,
                "in_use": ["GPU 0 at 87 %"],
                "gpus": [{"index": 0, "utilization": 87}],
            },
        ),
        "twin": PodResult(
            status="drift",
            changes=[{"role": "Environment", "operation": "Write profile", "diff": "-a\n+b"}],
        ),
        "hot": PodResult(
            status="violation",
            violations=[
                {
                    "role": "GPU",
                    "id": "gpu.max_temperature",
                    "message": "GPU 0 is at 91 °C, above 85 °C: it will throttle; recreate the pod"
                    " on another host",
                }
            ],
            waived=[
                {
                    "role": "GPU",
                    "id": "gpu.healthy",
                    "message": "GPU 1: PCIe link narrower",
                    "reason": "ticket 1234",
                    "until": "2026-12-31",
                }
            ],
            cost_per_hour=0.5,
            idle=True,
            idle_since="2026-12-04T09:00:00Z",
            cost_since=1.25,
            activity={**ACTIVITY, "idle": True, "gpus": []},
        ),
        "gone": PodResult(status="unreachable", error="connection refused"),
    }
    return to_json(results)


def test_the_page_shows_each_pods_status_changes_fixes_price_use_and_gpus():
    shown = Page(page.render(_report()))
    assert shown.row("gone")[1:] == [
        "unreachable",
        "connection refused",
        "",
        "price unknown",
        "",
        "not read",
    ]
    assert shown.row("idle-a100")[1:] == [
        "ok",
        "nothing would change",
        "",
        "$1.50/h",
        "idle since 2026-12-04T08:00:00Z, for 2 h 5 min",
        "fit2 GPUs, 0 %",
    ]
    busy = shown.row("busy-h100")
    assert busy[2] == (
        "Environment · Write profile diff 1"
        "Secrets · Upload token (a secret file: its diff is never shown)"
    )
    assert busy[4:] == ["$2.25/h", "in use: GPU 0 at 87 %", "fit1 GPU, 87 %"]
    hot = shown.row("hot")
    assert hot[3] == (
        "gpu.max_temperature GPU 0 is at 91 °C, above 85 °C: it will throttle; recreate the pod"
        " on another host"
        "waived gpu.healthy until 2026-12-31, ticket 1234: GPU 1: PCIe link narrower"
    )
    assert hot[5] == "idle since 2026-12-04T09:00:00Z, $1.25 since"
    assert hot[6] == "unfit: gpu.max_temperature (waived: gpu.healthy)no GPU"


def test_what_to_do_is_in_bold_and_the_message_is_unchanged():
    message = "GPU 0 is hot: it will throttle; recreate the pod on another host"
    assert page.with_fix(message).endswith('<b class="fix">recreate the pod on another host</b>')
    assert "".join(Page(page.with_fix(message)).text) == message
    assert page.with_fix("cannot be read: run apply again").endswith('<b class="fix"></b>')


def test_the_totals_count_pods_by_status_and_what_the_fleet_and_its_idle_pods_cost():
    text = " ".join(Page(page.render(_report())).text)
    for count, status in ((1, "ok"), (2, "drift"), (0, "restarted"), (1, "violation")):
        assert f"{count} {status}" in text
    assert "$4.25/h 5 pods in all, 2 of unknown price (not counted)" in text
    assert "$2.00/h 2 pods idle now" in text
    assert "podstate check: 2 drift, 1 violation, 1 unreachable (5 pods, exit 1)" in text


def test_pods_are_listed_worst_first_and_each_distinct_diff_once():
    shown = Page(page.render(_report()))
    assert [cells[0] for cells in shown.rows[1:]] == [
        "gone",
        "hot",
        "busy-h100",
        "twin",
        "idle-a100",
    ]
    summaries = [t for t in shown.text if t.startswith("diff 1:")]
    assert summaries == ["diff 1: Environment · Write profile: 2 pods: busy-h100, twin"]


def test_a_status_a_later_format_adds_is_shown_and_counted():
    report = _report()
    report["pods"]["gone"]["status"] = "hibernating"
    shown = Page(page.render(report))
    assert shown.rows[1][:2] == ["gone", "hibernating"]
    assert "1 hibernating" in " ".join(shown.text)


def test_an_empty_fleet_is_a_page_too():
    shown = Page(page.render(to_json({})))
    assert "no pod" in shown.text and "$0.00/h" in shown.text


def test_the_page_loads_and_runs_nothing():
    document = page.render(_report())
    tags = Page(document).tags
    assert {tag for tag, _ in tags} <= {
        *("html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div", "b"),
        *("table", "thead", "tbody", "tr", "th", "td", "span", "ul", "li", "small", "code"),
        *("a", "br", "details", "summary", "pre"),
    }
    attributes = [(name, value) for _, attrs in tags for name, value in attrs]
    assert all(value.startswith("#diff-") for name, value in attributes if name == "href")
    assert not [name for name, _ in attributes if name in ("src", "action") or name[:2] == "on"]
    assert ("content", page.POLICY) in attributes
    assert "url(" not in document and "@import" not in document and "://" not in document


def test_a_pod_name_with_a_script_is_text():
    name = "<script>alert(1)</script>"
    report = to_json({name: PodResult(status="error", error='<img src=x onerror="alert(2)">')})
    shown = Page(page.render(report))
    assert "script" not in {tag for tag, _ in shown.tags}
    assert "img" not in {tag for tag, _ in shown.tags}
    assert shown.row(name)[2] == '<img src=x onerror="alert(2)">'


def _one_pod(name: str, text: str) -> dict:
    """Return the report of one pod whose name is ``name`` and every detail ``text``."""
    result = PodResult(
        status="violation",
        error=text,
        changes=[{"role": text, "operation": text, "diff": "@" + text}],
        violations=[{"role": text, "id": text, "message": text}],
    )
    return to_json({name: result})


@settings(max_examples=150, deadline=None)
@given(name=st.text(min_size=1), text=st.text(min_size=1))
def test_any_pod_name_and_detail_is_text_and_never_markup(name, text):
    """The page's tags are the same as for plain words, and each string is read back as its
    text (control characters written visibly, as in every report)."""
    shown = Page(page.render(_one_pod(name, text)))
    plain = Page(page.render(_one_pod("pod", "word")))
    assert shown.tags == plain.tags
    shown_name, shown_text = visible(name), visible(text)
    assert shown.rows[1][0] == shown_name
    assert shown.rows[1][2] == f"{shown_text}{shown_text} · {shown_text} diff 1"
    assert shown.rows[1][3] == f"{shown_text} {shown_text}"
    assert "\n".join(visible("@" + text).splitlines()) in shown.text  # the diff's <pre>


def test_a_report_file_is_replaced_in_one_step(tmp_path):
    """A reader that opened the old page reads the old page whole, never a cut new one."""
    target = tmp_path / "page.html"
    target.write_text("old page\n")
    with target.open() as reader:
        _write(str(target), "new page\n")
        assert reader.read() == "old page\n"
    assert target.read_text() == "new page\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]


def test_a_report_to_a_pipe_is_written_into_it(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    _write(str(fifo), "page\n")
    reader.join(10)
    assert got == ["page\n"] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_an_html_path_that_cannot_be_written_is_one_line_before_any_pod(tmp_path, capsys):
    status = cli.main(["check", "--html", str(tmp_path / "no" / "page.html")])
    assert status == 1
    assert capsys.readouterr().err == (
        f"podstate: cannot write the report {tmp_path}/no/page.html: no directory {tmp_path}/no\n"
    )


# --- a real check's page in headless Chromium ------------------------------------------


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    """Run headless Chromium with a profile of the test's own, within 60 s."""
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("chromium is not installed: `make deps` installs it", pytrace=False)
    return subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def png_pixels(png: bytes) -> tuple[int, int, bytes]:
    """Return a PNG's width, height and its decompressed image data."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    data, at = b"", 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        if png[at + 4 : at + 8] == b"IDAT":
            data += png[at + 8 : at + 8 + length]
        at += 12 + length
    return width, height, zlib.decompress(data)


def test_a_checks_page_renders_in_chromium_with_each_pods_status_and_cost(fleet, tmp_path):
    priced = yaml.safe_load(fleet.pods_file.read_text())  # the sandbox's, with prices
    priced["pods"]["pod-1"]["cost_per_hour"] = 0.5
    priced["pods"]["pod-2"]["cost_per_hour"] = 1.25
    pods_file = tmp_path / "pods.yaml"
    pods_file.write_text(yaml.safe_dump(priced))
    # pod-2 cannot remount /dev/shm, and has 8 GPUs: two violations, one an unfit GPU
    fleet.host_vars("pod-2", {"shm": {"min_size": "512G"}, "gpu": {"count": 4}})
    try:
        result = check(
            fleet,
            "--json",
            str(tmp_path / "r.json"),
            "--html",
            str(tmp_path / "page.html"),
            pods_file=pods_file,
        )
    finally:
        fleet.host_vars("pod-2", None)
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["pods"]["pod-2"]["status"] == "violation", result.stdout
    url = (tmp_path / "page.html").as_uri()

    shot = tmp_path / "page.png"
    taken = chromium(
        f"--screenshot={shot}", "--window-size=1280,900", url, profile=tmp_path / "profile-1"
    )
    assert shot.exists(), taken.stderr
    width, height, pixels = png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 900)
    assert 10_000 < shot.stat().st_size < 5_000_000
    assert len(set(pixels)) > 100  # text and colour, not a blank or an error page

    dom = chromium("--dump-dom", url, profile=tmp_path / "profile-2")
    assert dom.returncode == 0, dom.stderr
    shown = Page(dom.stdout)
    pod1, pod2 = shown.row("pod-1"), shown.row("pod-2")
    assert pod1[1] == report["pods"]["pod-1"]["status"] and pod1[4] == "$0.50/h"
    assert pod2[1] == "violation" and pod2[4] == "$1.25/h"
    assert "shm.min_size /dev/shm is 32G, below the minimum 512G" in pod2[3]
    assert pod2[6].startswith("unfit: gpu.count") and pod1[6].startswith("fit")
    assert "$1.75/h2 pods in all" in "".join(shown.text)
    checked = report["checked_at"].replace("T", " ").removesuffix("Z")
    assert f"checked {checked} UTC; exit" in "".join(shown.text)  # how old the page is
