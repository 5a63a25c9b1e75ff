"""The same-work replay (bench/fleet/rivals/replay.py) repeats podstate's own commands: the
first apply's on pods restarted since, so the ready marker it writes names the start the pod
has now."""

import hashlib
import json
import re

from bench.fleet.rivals.replay import restarted
from podstate.paths import READY_MARKER
from podstate.run import fold, lock
from podstate.run.bookkeeping import write_command


def test_the_replayed_marker_names_the_pods_start_now_with_its_sum():
    old = json.dumps({"digest": "d", "applied_at": "t", "container": "boot:1"}) + "\n"
    for shell in (
        write_command(READY_MARKER, old, True, "644"),  # alone: its content quoted once
        fold._step(lock.Change(write_command(READY_MARKER, old, True, "644")))[0],  # twice
    ):
        replayed = restarted(shell, "boot:2")
        found = re.search(rf"set -- {READY_MARKER} own 644 (\S+) \S*?=(\{{.*\}}\n)", replayed)
        sha, text = found[1], found[2].encode()
        assert json.loads(text) == {"digest": "d", "applied_at": "t", "container": "boot:2"}
        assert sha == hashlib.sha256(text).hexdigest()
        assert restarted(shell, "boot:1") == shell  # the same start: the same command
    assert restarted("echo other", "boot:2") == "echo other"


def test_the_marker_a_fold_sends_on_its_stdin_is_swapped_too():
    """A fold's steps travel on its stdin (fold.Segment.payload), the marker's write with them."""
    old = json.dumps({"digest": "d", "applied_at": "t", "container": "boot:1"}) + "\n"
    segment = fold.Segment("op")
    segment.add(fold._step(lock.Change(write_command(READY_MARKER, old, True, "644")))[0], 10)
    stdin = segment.payload().decode()
    replayed = restarted(stdin, "boot:2")
    assert '"container": "boot:2"' in replayed and '"container": "boot:1"' not in replayed
