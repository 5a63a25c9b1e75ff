"""Folding: podstate's changes to a pod run as one remote command, reported per operation.

Real pods are 50-200 ms away, so a change that costs a command per step costs a round trip
per step. When the run executes, ``plan`` takes the commands every podstate operation
would run on a pod, in order, and joins them into segments: one command each, under the
pod lock, which the last one releases when no other deploy file's operation follows. Each
operation keeps its place in pyinfra's run and its own result: the one holding a
segment's first step runs the segment, and every operation then reports how its own steps
went, from markers the segment prints. A step that fails ends the segment (the lock is
released, no later step runs, earlier steps stay done) and fails its own operation with
its own output.

The command line is the same few kilobytes whatever the steps are: the lock's script, and a
reader that takes the steps' shell from the command's stdin (``Segment.payload``), checks that
all of it arrived, and runs it. So a segment never ends for its size, and no step's text
(file contents, secrets) is ever on a command line. A segment ends before a command it
cannot hold, which runs as it is: an upload of a file larger than ``UPLOAD_MAX`` (smaller ones
ride in the steps' shell, on stdin), or a Python callback (then the rest of its operation runs
unfolded: what it yields next may depend on how the callback went).
"""

from __future__ import annotations

import base64
import io
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from paramiko import Channel, SSHException
from pyinfra.api import FileUploadCommand, FunctionCommand, Host, State
from pyinfra.api.command import PyinfraCommand

from podstate import settings
from podstate.pyinfra_api import execute
from podstate.pyinfra_api import plan as pyinfra_plan
from podstate.run import lock
from podstate.run.markers import MARK, Stream
from podstate.shell import script

# What steps carry each time (every file write holds scripts/write_file.sh, every proved
# removal scripts/made_proof.sh): a segment defines each once, as a function, and its steps
# call it, so its command carries it once.
SHARED = {
    script("write_file.sh"): "podstate_write_file",
    script("made_proof.sh"): "podstate_made_proof",
}
PROOF = script("fold_proof.sh")  # podstate_later and podstate_prove, for every segment
UPLOAD_MAX = 32_768  # bytes of a file sent in the steps' shell (as one base64 word)
CHUNK = 32_768  # bytes of the payload sent at a time
END = f": {MARK} end"  # the payload's last line: the reader runs nothing without it
# The command's own shell: the steps' shell from stdin, run once it all arrived. Its size is
# fixed: nothing in it grows with the steps.
READER = (
    "exec 2>&1; b=$(cat) || exit 75; case $b in\n"
    f'*"\n{END}") eval "$b" ;;\n'
    "*) echo 'podstate: the changes did not all reach the pod; none was made' >&2; exit 75 ;;\n"
    "esac"
)


@dataclass
class Segment:
    """Steps run as one command: their shell and time limits."""

    op_hash: str  # the operation that runs it: the one with its first step
    steps: list[str] = field(default_factory=list)
    ttls: list[int] = field(default_factory=list)
    release: bool = False
    done: set[int] = field(default_factory=set)
    # what each step printed, byte for byte, from its marker on (-1: before any step)
    output: dict[int, bytearray] = field(default_factory=dict)
    status: int | None = None  # the command's exit status; -1: none (a signal ended it)
    why: str = ""  # why the command was given up on (a time limit, a lost connection)

    later: list[bool] = field(default_factory=list)

    def add(self, shell: str, ttl: int, later: bool = False) -> None:
        """Add a step: its shell, its time limit, and whether it may run before the writes of
        the steps before it are proved (``lock.Change.later``)."""
        self.steps.append(shell)
        self.ttls.append(ttl)
        self.later.append(later)

    @property
    def timeout(self) -> int:
        """Return the segment's time limit: its steps' together, and the wait for the lock."""
        return sum(self.ttls) + self.ttls[0] + lock.MARGIN

    def command(self, held: bool = False, seen: str = "") -> str:
        """Return the segment's command line: ``READER`` under the pod lock (taken, or
        ``held`` by this run already; ``seen``: see ``lock.guarded``). Its size does not
        depend on the steps, which travel on stdin (``payload``)."""
        return lock.guarded(READER, self.ttls[0], self.release, held, seen, inline=True)

    def payload(self) -> bytes:
        """Return the steps' shell, for the command's stdin: each step in turn, which renews
        the lock for its own time limit (as it would, run alone), and which a step finding
        it lost stops at; then ``END``, without which ``READER`` runs none of it (a
        connection lost while it was sent). Each step's output follows its marker line,
        stderr and stdout in one stream, in order; each marker has a line of its own.

        The files the steps write are proved together (scripts/fold_proof.sh), before each
        step that is not ``later`` and at the end; a step is reported done (``ok``) once its
        writes are proved. A step that fails ends the segment once those before it are."""
        body = [
            f"m={MARK} podstate_steps='' podstate_list=$L.proofs",
            '{ : >"$podstate_list" && : >"$podstate_list.last"; } 2>/dev/null ||',
            "podstate_list=",  # none: each write proves itself
            PROOF,
            'step() { printf \'\\n%s %s\\n\' "$m" "$1"; podstate_i=$1; renew "$2"; }',
        ]
        body += [
            f"{name}() {{\n{shared}\n}}"
            for shared, name in SHARED.items()
            if any(name in step for step in self.steps)
        ]
        for i, (step, ttl) in enumerate(zip(self.steps, self.ttls, strict=True)):
            if not self.later[i]:
                body.append("podstate_prove || exit 1")
            body += [
                f"step {i} {ttl + lock.MARGIN} || {{ podstate_prove; exit 75; }}",
                step,
                'r=$?; [ "$r" -eq 0 ] || { podstate_prove; exit "$r"; }',
                f'podstate_steps="$podstate_steps {i}"',
            ]
        body += ["podstate_prove || exit 1", END]
        return "\n".join(body).encode("utf-8", "surrogateescape") + b"\n"


def _step(command: PyinfraCommand) -> tuple[str, int, bool] | None:
    """Return the shell, the time limit and ``later`` of ``command`` as a step of a segment;
    None if a segment cannot hold it. A small upload's data rides in its shell, base64-encoded: on
    the command's stdin, never on a command line."""
    if isinstance(command, lock.Change):
        inner = command.inner
        for shared, name in SHARED.items():
            inner = inner.replace(shared, f'{name} "$@"')
        shell = f"(set --; eval {shlex.quote(inner)}) </dev/null"
        return shell, command.ttl or settings.COMMAND_TIMEOUT, command.later
    if (
        isinstance(command, FileUploadCommand)
        and isinstance(command.src, io.BytesIO)
        and len(command.src.getvalue()) <= UPLOAD_MAX
    ):
        dest = shlex.quote(command.dest)
        data = base64.b64encode(command.src.getvalue()).decode()
        shell = f"(umask 077 && printf %s {data} | base64 -d >{dest})"
        return shell, settings.COMMAND_TIMEOUT, False
    return None


def plan(state: State, host: Host, ops: list[str], release: bool) -> int:
    """Fold the commands of ``ops`` (podstate's operations on ``host``, in run order) into
    segments, and make each operation run or report its steps; return how many segments.

    With ``release``, the segment that ends the operations releases the pod lock: no other
    deploy file's operation follows them.
    """
    segments: list[Segment] = []
    segment: Segment | None = None
    with pyinfra_plan.op_context_kept(host):
        for op_hash in ops:
            produced = pyinfra_plan.commands(state, host, op_hash)
            items: list[tuple[Segment, int] | PyinfraCommand] = []
            for command in produced:
                step = _step(command)
                if step is None:
                    items.append(command)
                    segment = None
                    if isinstance(command, FunctionCommand):
                        break  # what the operation yields next may depend on how it went
                    continue
                if segment is None:
                    segment = Segment(op_hash)
                    segments.append(segment)
                segment.add(*step)
                items.append((segment, len(segment.steps) - 1))
            folded = _replay(items, produced)
            pyinfra_plan.replace_commands(state, host, op_hash, _returning(folded))
    if segment is not None:
        segment.release = release
    for one in segments:
        pyinfra_plan.set_timeout(state, host, one.op_hash, one.timeout)
    return len(segments)


def _returning(commands: Iterator[PyinfraCommand]) -> Callable[[], Iterator[PyinfraCommand]]:
    """Return what pyinfra calls for an operation's commands: one that returns ``commands``."""
    return lambda: commands


def _replay(
    items: list[tuple[Segment, int] | PyinfraCommand], produced: Iterator[Any]
) -> Iterator[PyinfraCommand]:
    """Yield an operation's commands, folded: for each of its steps, a callback that runs
    the segment (at its first step) and one that reports the step; each command no segment
    could hold, as it is; then the rest of the operation, unfolded."""
    for item in items:
        if not isinstance(item, tuple):
            if isinstance(item, FileUploadCommand):
                yield FunctionCommand(_hold, (), {})
            yield item
            continue
        segment, index = item
        if index == 0:
            yield FunctionCommand(_run, (segment,), {})
        yield FunctionCommand(_report, (segment, index), {})
    yield from produced


def _run(state: State, host: Host, segment: Segment) -> bool:
    """Run ``segment`` on ``host``; record which steps succeeded and what each printed
    (``converse``). A step that fails, or that a lost connection or time limit cuts short, is
    reported by its own operation; so this returns True.
    """
    arguments = execute.connector_arguments(host, state, segment.op_hash)
    try:
        command = segment.command(lock.holds(host), lock.seen(host))
        channel = execute.start_command(state, host, command, arguments)
    except (OSError, EOFError, SSHException) as e:
        segment.why = str(e)
    else:
        converse(segment, channel, execute.echoer(state, host))
    lock.ran(host, not segment.release and len(segment.done) == len(segment.steps))
    return True


def converse(segment: Segment, channel: Channel, echo: Callable[[str], None] | None) -> None:
    """Send ``segment``'s payload on ``channel`` (its command, started), read back which steps
    succeeded, what each printed (each line also to ``echo``, as it comes) and how the command
    ended, and close the channel.

    Each step is held to its own time limit, from its marker (the wait for the lock, before
    the first, to the first step's), so a pod that stops answering, or a step that outlives
    its limit, is given up on as soon as it would be with one command per step.
    """
    current, limit = -1, segment.ttls[0]
    deadline = time.monotonic() + limit  # moved on at each step's marker
    stream, shown = Stream(len(segment.steps)), _Echo(echo)
    sender = threading.Thread(target=_send, args=(channel, segment.payload()), daemon=True)
    channel.settimeout(None)  # a send waits for room as long as it takes; reads wait on:
    arrived = threading.Event()  # set while bytes wait to be read, or once the channel closed
    channel.in_buffer.set_event(arrived)
    sender.start()
    try:
        with channel:
            while True:
                chunk = _receive(channel, arrived, deadline)
                for piece in stream.feed(chunk):
                    if isinstance(piece, bytes):
                        segment.output.setdefault(current, bytearray()).extend(piece)
                        shown.add(piece)
                    elif piece[0]:
                        segment.done.add(piece[1])
                    else:
                        shown.end()
                        current, limit = piece[1], segment.ttls[piece[1]]
                        segment.output.setdefault(current, bytearray())
                        deadline = time.monotonic() + limit
                if not chunk:
                    break
            shown.end()
            ready = channel.status_event.wait(max(deadline - time.monotonic(), 0))
            segment.status = channel.exit_status if ready else None
    except (TimeoutError, OSError, EOFError, SSHException) as e:
        segment.why = f"not done within {limit} s" if isinstance(e, TimeoutError) else str(e)
    sender.join(lock.MARGIN)  # the channel is closed: it ends at once


def _receive(channel: Channel, arrived: threading.Event, deadline: float) -> bytes:
    """Return the next bytes ``channel`` receives (b"": it closed); raise TimeoutError once
    ``deadline`` has passed, whether or not bytes still come.

    It waits on ``arrived``, the event the channel's buffer sets, not on ``select``: a
    channel's ``fileno`` costs two descriptors more, and ``select`` refuses any numbered
    1024 or above, which a run of some 300 pods or more reaches."""
    left = deadline - time.monotonic()
    if left > 0 and arrived.wait(left):
        return channel.recv(65536)
    raise TimeoutError


class _Echo:
    """Passes a command's output on to ``echo`` (if any) a whole line at a time, as it comes."""

    def __init__(self, echo: Callable[[str], None] | None) -> None:
        self.echo, self.line = echo, b""

    def add(self, data: bytes) -> None:
        if self.echo:
            *lines, self.line = (self.line + data).split(b"\n")
            for one in lines:
                self.echo(_text(one))

    def end(self) -> None:
        """The step's output ended: pass on its last line, which had no newline."""
        if self.echo and self.line:
            self.echo(_text(self.line))
        self.line = b""


def _text(line: bytes | bytearray) -> str:
    """Return a line of output as text, as pyinfra shows it."""
    return line.decode("utf-8", "replace").rstrip("\r")


def _as_lines(output: bytes | bytearray) -> execute.Lines:
    """Return ``output`` as pyinfra's lines (stdout and stderr are one stream)."""
    lines = output.split(b"\n")
    return [("stdout", _text(one)) for one in lines[:-1] + [lines[-1]] * bool(lines[-1])]


def _send(channel: Channel, payload: bytes) -> None:
    """Send ``payload`` on ``channel``'s stdin, then its end; return once it is sent, or once
    the channel closed first (a command that ended before reading it: the lock was busy, or
    lost, which its output then says; or one given up on). Apart from the reading of its
    output, so that a command that reads its stdin late (after waiting for the lock) never
    holds that up: each send waits, with no time limit, for the room the command's reading
    makes in the window, or for the channel's close."""
    data = memoryview(payload)
    try:
        while data:
            sent = channel.send(data[:CHUNK])  # type: ignore[arg-type]  # any buffer
            if sent == 0:  # closed
                return
            data = data[sent:]
        channel.shutdown_write()
    except (OSError, EOFError, SSHException):
        pass


def _hold(state: State, host: Host) -> bool:
    """Take the pod lock before an upload that no segment holds, unless this run holds it
    already (the usual case: a segment before the upload took it); return whether it could."""
    if lock.holds(host):
        return True
    status, output = execute.run_shell(
        state, host, lock.command_for(host, ":"), execute.connector_arguments(host)
    )
    if not status:
        lock.ran(host, False)
        execute.print_failed_output(host, output)
    return status


def _report(state: State, host: Host, segment: Segment, index: int) -> bool:
    """Return whether step ``index`` of ``segment`` succeeded; if not, print why
    (``_failure``)."""
    if index in segment.done:
        return True
    execute.print_failed_output(host, _failure(segment, index))
    return False


def _failure(segment: Segment, index: int) -> execute.Lines:
    """Return what to print for step ``index`` of ``segment``, which did not succeed: its
    output, or, if it never started, what the command printed before any step (the lock's
    message); then how the command ended, unless that output says it all (a step that failed,
    printing why)."""
    started = index in segment.output
    lines = _as_lines(segment.output.get(index if started else -1, b""))
    if segment.why:
        end = segment.why
    elif segment.status is None or segment.status < 0:
        end = (
            "the command ended with no exit status (a signal ended it, or its connection was lost)"
        )
    elif not lines:
        end = f"the command ended with exit status {segment.status}"
    else:
        return lines
    where = "while this step ran" if started else "before this step started"
    return [*lines, ("stderr", f"podstate: {end}, {where}")]
