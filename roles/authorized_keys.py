"""SSH keys: the ``authorized_keys`` list in one podstate block of ~/.ssh/authorized_keys.

Only the lines between podstate's marks are podstate's: keys outside them (RunPod's
``PUBLIC_KEY``, the key podstate connects with) are never touched, and a key removed from
the list leaves the block. An empty list removes the block.
"""

from __future__ import annotations

from collections.abc import Sequence

from podstate.desired.state import State
from podstate.facts import blocks, made
from podstate.facts.probe import Probe
from podstate.facts.request import Request
from podstate.limits import MAX_FILE
from podstate.run import bookkeeping, findings
from podstate.run.role import role
from podstate.sizes import format_size

FILE = "~/.ssh/authorized_keys"
MARK_BEGIN = "# >>> podstate authorized_keys >>>"
MARK_END = "# <<< podstate authorized_keys <<<"
BANNER = " managed: edit authorized_keys in the desired state, not this block"


def reads(wanted: State) -> Request:
    """Return what the probe reads for this role: the SSH user's authorized_keys when the
    desired state lists keys (an empty list too: the block then goes)."""
    if wanted.authorized_keys is None:
        return Request()
    return Request(files=(FILE,), made=made.request(wanted))


def render(current: str | None, keys: Sequence[str]) -> str:
    """Return ``current`` with podstate's block holding ``keys``, every other line as it was.

    The block stays where the first one was (or goes at the end), once; with no keys there
    is none. A lone mark (``blocks.split``: a begin mark without its end mark, say) drops only
    itself: the lines beside it are kept, since they may be keys someone relies on. A last
    line without its newline gets one, so the block starts on a line of its own (with no
    keys, it keeps the file's last line as it was).
    """
    found = blocks.split(current or "", MARK_BEGIN, MARK_END)
    if not keys:
        return "".join(found.lines)
    at = len(found.lines) if found.at is None else found.at
    before, after = list(found.lines[:at]), list(found.lines[at:])
    if before and not before[-1].endswith("\n"):
        before[-1] += "\n"
    block = [f"{MARK_BEGIN}{BANNER}\n", *(key + "\n" for key in keys), MARK_END + "\n"]
    return "".join(before + block + after)


@role("Authorized keys", reads, when=lambda wanted: wanted.authorized_keys is not None)
def apply(wanted: State, probe: Probe) -> None:
    """Make podstate's block of ~/.ssh/authorized_keys hold the listed keys (a new file is
    made 0600); a file podstate cannot edit is a violation, and nothing is written."""
    keys = wanted.authorized_keys or ()
    found = probe.files[FILE]
    # declared, whatever happens below; an empty list too: this role takes the block out
    was = made.previous(probe.made).get(FILE)
    findings.made(made.block(FILE, MARK_BEGIN, MARK_END, was, absent=found.state == "absent"))
    content = render(found.content, keys)
    lone = blocks.split(found.content or "", MARK_BEGIN, MARK_END).lone
    if lone:
        findings.violation(
            f"{blocks.lost(FILE, MARK_BEGIN, MARK_END, lone)}: podstate cannot tell that "
            "block's keys from yours, so it keeps every line beside the mark and takes out "
            "only the mark; a key that has left authorized_keys in the desired state may still "
            "be there: delete it by hand",
            "authorized_keys.block",
        )
    if found.state == "absent" and not keys:
        return
    size = len(content.encode("utf-8", "surrogateescape"))
    if size > MAX_FILE:  # the block fits alone (podstate.pod.fits): the file's own lines add up
        findings.violation(
            f"{FILE} would be {format_size(size)} with podstate's block, more than the "
            f"{format_size(MAX_FILE)} podstate writes in one command: remove the keys nobody "
            "uses from it",
            "authorized_keys",
        )
        return
    bookkeeping.managed_file(
        name=f"Keys in {FILE}", path=FILE, content=content, found=found, own=False, mode="600"
    )
