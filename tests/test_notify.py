"""Notifications of ``podstate watch --notify``: the events a pass makes, their JSON against
schema/notify-event.schema.json, and their delivery to a real HTTP server on 127.0.0.1 that
answers, answers 500, never answers, or is not there; and, end to end, a restart put back on
a sandbox pod told to a receiver with how long it took.

Every wait is for an event: a request that reached the receiver, a worker that ended.
"""

from __future__ import annotations

import io
import json
import queue
import signal
import socket
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from podstate.inventory.podsfile import Pod
from podstate.sandbox import container
from podstate.watch.decisions import Event, Sighting
from podstate.watch.hooks import Applied, Hooks, Pass, PodView
from podstate.watch.idle import Period
from podstate.watch.loop import Watch
from podstate.watch.notify import Notifier
from podstate.watch.options import Options, WatchError
from tests.e2e import Watching, apply

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "schema" / "notify-event.schema.json").read_text())
SECRET = "/services/T000/B000/s3cr3t-t0ken"  # a webhook's path: never in a log line
SANDBOX = {"pods": 1}


class Receiver:
    """A real HTTP server on 127.0.0.1 that records each POST; it answers ``status``, or
    first waits for ``release`` when ``hold`` is set (``got`` is set as a request comes,
    ``answered`` once it answered one)."""

    def __init__(self, status: int = 204, hold: bool = False) -> None:
        self.status, self.hold = status, hold
        self.bodies: queue.Queue[dict] = queue.Queue()
        self.count = 0
        self.got, self.release = threading.Event(), threading.Event()
        self.answered = threading.Event()  # it answered a request
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.count += 1
                receiver.bodies.put({"path": self.path, **json.loads(data)})
                receiver.got.set()
                if receiver.hold:
                    receiver.release.wait(30)
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                receiver.answered.set()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}{SECRET}"

    def received(self) -> list[dict]:
        return list(self.bodies.queue)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made: list[Receiver] = []

    def make(status: int = 204, hold: bool = False) -> Receiver:
        made.append(Receiver(status, hold))
        return made[-1]

    yield make
    for each in made:
        each.close()


def notifier(*urls: str, log: io.StringIO | None = None, **kwargs) -> Notifier:
    """A notifier with short waits: 0.5 s a try, 0.01 s between tries."""
    return Notifier(urls, **{"timeout": 0.5, "backoff": 0.01, "log": log, **kwargs})


def seen(number: int, **kwargs) -> Pass:
    """A pass's record: ``pod-1`` ok but for what ``kwargs`` say."""
    pods = kwargs.pop(
        "pods", {"pod-1": PodView("ok", "runpod", ("community",), 0.5, violations={})}
    )
    return Pass(number, 1_780_000_000.0 + number, 1.0, pods, **kwargs)


def violating(**found: str) -> dict[str, PodView]:
    return {"pod-1": PodView("violation", "runpod", (), 0.5, violations=found)}


def valid(body: dict) -> dict:
    errors = [e.message for e in Draft202012Validator(SCHEMA).iter_errors(body)]
    assert errors == [], errors
    return body


# --- the events ---------------------------------------------------------------------------


def test_a_restart_put_back_says_how_long_from_the_container_start_to_ready():
    put_back = Applied("pod-1", "restarted", None, 41.25, ready_after=125.0)
    (body,) = notifier("http://127.0.0.1:9/").events(seen(3, applied=(put_back,)))
    valid(body)
    assert (body["event"], body["pod"], body["pass"]) == ("restarted", "pod-1", 3)
    assert (body["seconds"], body["apply_seconds"]) == (125.0, 41.25)
    assert body["text"] == body["content"]
    assert body["text"] == (
        "podstate watch: pod-1 restarted and was put back: ready 2 min after its container "
        "started (apply 41.2 s)"
    )
    assert body["time"] == "2026-05-28T20:26:43Z"


def test_violations_are_told_as_they_appear_and_as_they_clear():
    told = notifier("http://127.0.0.1:9/")
    first = told.events(seen(1, pods=violating(**{"shm.min_size": "64M is too small"})))
    assert [(b["event"], b["violations"]) for b in map(valid, first)] == [
        ("violation", [{"id": "shm.min_size", "message": "64M is too small"}])
    ]
    assert told.events(seen(2, pods=violating(**{"shm.min_size": "64M is too small"}))) == []
    unread = {"pod-1": PodView("unreachable", "runpod", ())}  # says nothing of violations
    assert told.events(seen(3, pods=unread)) == []
    (cleared,) = told.events(seen(4))
    assert valid(cleared)["event"] == "violation_cleared"
    assert cleared["violations"] == [{"id": "shm.min_size", "message": "64M is too small"}]


def test_an_unreachable_pod_is_told_once_at_its_third_pass_and_again_when_it_is_back():
    told = notifier("http://127.0.0.1:9/")
    events = [told.events(seen(n, unreachable={"pod-1": 4})) for n in (4, 5, 6, 7)]
    assert [len(e) for e in events] == [0, 0, 1, 0]
    assert (valid(events[2][0])["event"], events[2][0]["passes"]) == ("unreachable", 3)
    (back,) = told.events(seen(8, unreachable={}))
    assert valid(back)["event"] == "reachable"


def test_an_apply_failure_is_told_at_the_first_of_a_row_and_a_stop_with_its_price():
    first = Applied("pod-1", "drift", "Permission denied", 3.0, first_failure=True)
    again = Applied("pod-1", "drift", "Permission denied", 3.0)
    told = notifier("http://127.0.0.1:9/")
    failed, stopped = told.events(seen(2, applied=(first,), stopped=(("pod-1", 0.69),)))
    assert (valid(failed)["event"], failed["detail"], failed["why"]) == (
        "apply_failed",
        "Permission denied",
        "drift",
    )
    assert (valid(stopped)["event"], stopped["cost_per_hour"]) == ("idle_stopped", 0.69)
    assert "saves $0.69/h" in stopped["text"]
    assert told.events(seen(4, applied=(again,))) == []


def test_text_from_a_pod_cannot_ping_a_channel():
    failure = Applied("pod-1", "drift", "<!channel> @everyone", 1.0, first_failure=True)
    (body,) = notifier("http://127.0.0.1:9/").events(seen(1, applied=(failure,)))
    assert "<" not in body["text"] and body["detail"] == "<!channel> @everyone"
    assert body["allowed_mentions"] == {"parse": []}


def test_a_bad_url_is_one_line_that_does_not_show_it():
    with pytest.raises(WatchError) as raised:
        Notifier(("http://127.0.0.1:9/", f"ftp://example.com{SECRET}"))
    assert str(raised.value) == (
        "--notify (URL 2 of 2): expected an http:// or https:// URL with a host"
    )


# --- delivery --------------------------------------------------------------------------------


def test_each_event_is_posted_once_and_a_pass_is_told_once(receiver):
    got = receiver()
    told = notifier(got.url)
    failure = Applied("pod-1", "drift", "boom", 1.0, first_failure=True)
    record = seen(1, applied=(failure, failure), stopped=(("pod-1", 0.5),))
    told.passed(record)
    told.passed(record)  # the same pass again: nothing more
    told.close(30)  # waits for the worker to end
    bodies = got.received()
    assert [b["event"] for b in bodies] == ["apply_failed", "idle_stopped"]
    assert all(b["path"] == SECRET for b in bodies)


def test_a_500_is_tried_three_times_then_logged_once_by_host_alone(receiver):
    failing, fine = receiver(500), receiver()
    log = io.StringIO()
    told = notifier(failing.url, fine.url, log=log)
    stops = tuple((f"pod-{n}", 0.5) for n in (1, 2))
    pods = {f"pod-{n}": PodView("ok", "runpod", ()) for n in (1, 2)}
    told.passed(seen(1, pods=pods, stopped=stops))
    told.close(30)  # waits for the worker to end
    assert failing.count == 3  # the first event, three tries; the second not sent there
    assert log.getvalue() == (
        "podstate: a notification to 127.0.0.1 failed: HTTP 500 (3 tries); 1 more events "
        "of pass 1 not sent there\n"
    )
    assert [b["pod"] for b in fine.received()] == ["pod-1", "pod-2"]  # the other URL: both


def test_a_receiver_that_never_answers_is_given_up_after_three_timeouts(receiver):
    silent = receiver(hold=True)
    log = io.StringIO()
    told = notifier(silent.url, log=log, timeout=0.2)
    told.passed(seen(1, stopped=(("pod-1", 0.5),)))
    told.close(30)  # waits for the worker to end
    assert silent.count == 3
    assert log.getvalue() == (
        "podstate: a notification to 127.0.0.1 failed: no answer within 0.2 s (3 tries)\n"
    )


def test_a_url_nothing_listens_on_is_logged_once():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]  # closed at the end of the block: nothing listens
    log = io.StringIO()
    told = notifier(f"http://127.0.0.1:{port}{SECRET}", log=log)
    told.passed(seen(1, stopped=(("pod-1", 0.5),)))
    told.close(30)  # waits for the worker to end
    assert log.getvalue() == (
        "podstate: a notification to 127.0.0.1 failed: Connection refused (3 tries)\n"
    )


def test_a_404_is_not_tried_again(receiver):
    gone = receiver(404)
    log = io.StringIO()
    told = notifier(gone.url, log=log)
    told.passed(seen(1, stopped=(("pod-1", 0.5),)))
    told.close(30)  # waits for the worker to end
    assert gone.count == 1
    assert "HTTP 404" in log.getvalue() and SECRET not in log.getvalue()


def test_a_pass_ends_while_its_notification_is_still_being_posted(tmp_path, receiver):
    """Through the watch's own hooks: the pass's line returns while the receiver holds the
    request, and a restart's ready time is counted from the listing's startedAt."""
    slow = receiver(hold=True)
    watch = Watch(Options(deploys=["deploy/pod.py"], state=str(tmp_path / "state.json")))
    started = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
    watch.hooks = Hooks(
        [notifier(slow.url, timeout=30)], wall=lambda: started + timedelta(seconds=90)
    )
    watch.number, watch.present = 2, {"pod-1"}
    watch.known["pod-1"] = Sighting("id-1", ("10.0.0.1", 22), started, None)
    watch.idler.periods["pod-1"] = Period("id-1", None, started)
    pod = Pod("pod-1", {"provider": "runpod", "cost_per_hour": 0.5}, ["community"])
    watch.emit(Event("pod-1", "restarted", "apply", "ok", 30.0))
    watch.hooks.passed(watch, [pod], None, {"pod-1": "ok"})
    watch.emit(Event(None, "pass", "list", "done", 31.0))  # hands the pass on, and returns
    assert slow.got.wait(30)  # the receiver has it, and holds it: the pass is over already
    assert slow.count == 1 and not slow.answered.is_set()
    slow.release.set()
    (body,) = slow.received()
    assert (body["event"], body["seconds"], body["apply_seconds"]) == ("restarted", 90.0, 30.0)


# --- end to end ------------------------------------------------------------------------------


def test_a_restart_put_back_on_a_sandbox_pod_is_told_once_with_its_duration(
    fleet, tmp_path, receiver
):
    """A watch with ``--notify`` over a sandbox pod listed by the sandbox's RunPod API: the
    pod restarts, the next pass puts it back, and the receiver gets one ``restarted`` event
    with the seconds from the container's start to ready."""
    got = receiver()
    env = fleet.api_env(tmp_path / "hostkeys")
    assert apply(fleet, env=env).returncode == 0  # converged, host keys trusted
    watching = Watching(fleet, "--notify", got.url, env=env)
    try:
        watching.end_of_pass(1)
        container.restart("pod-1")
        watching.signal(signal.SIGHUP)
        watching.end_of_pass(2)
        bodies = [got.bodies.get(timeout=60)]  # a bound for a lost event, not a wait
        while bodies[-1]["event"] != "restarted":
            bodies.append(got.bodies.get(timeout=60))
        told = bodies[-1]
        watching.signal(signal.SIGTERM)
        assert watching.finish() == 0
        stderr = watching.stderr()
    finally:
        watching.stop()
    assert (told["pod"], told["pass"], told["path"]) == ("pod-1", 2, SECRET)
    valid({k: v for k, v in told.items() if k != "path"})
    assert 0 < told["apply_seconds"] < told["seconds"]  # the start came before the apply
    bodies += got.received()  # those that came later: the watch waited for them
    assert [b["event"] for b in bodies].count("restarted") == 1
    assert SECRET not in stderr
