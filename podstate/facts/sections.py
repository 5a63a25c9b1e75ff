"""The probe's sections, in the order its program runs them: ``SECTIONS``, the one registry.

``PodProbe``'s arguments, ``Request.arguments()``, the program and the parse are read from
it (podstate.facts.section); ``Request``'s fields and ``Probe``'s are in its order
(tests/test_probe_sections.py holds them to it). A section is a module beside this one with
its lines, its parser, its result and its ``Section`` record, and one line here.
"""

from __future__ import annotations

from podstate.facts import (
    apt,
    boot,
    download,
    files,
    gpu,
    lock,
    made,
    mounts,
    processes,
    repos,
    secrets,
    sessions,
    space,
    start,
    user,
    venv,
    work,
)
from podstate.facts.section import Argument, Section

# The records of what podstate made: their own module's parser and lines, which read the
# files and paths the probe reads anyway only once.
MADE = Section(
    "made",
    fields=("made",),
    parse=lambda answer: {"made": made.parse(answer.lines("made")) if "made" in answer else None},
    lines=lambda arguments: made.probe_lines(
        arguments["made"], [*arguments["files"], *arguments["paths"]]
    ),
    arguments=(Argument("made", sent=made.sent),),
)

SECTIONS = (
    lock.SECTION,  # first: a live run's lock is waited for before anything is read
    user.CAPS,
    space.SECTION,
    mounts.SECTION,  # read before the GPUs' query starts
    gpu.SECTION,  # its query starts first and is collected last, beside the rest
    user.USER,
    start.SECTION,
    files.SECTION,
    venv.SECTION,
    work.SECTION,  # first of the three that read /proc/PID/stat: the other two reuse it
    processes.SECTION,
    sessions.SECTION,
    space.FREE,
    files.OCCUPIED,
    download.SECTION,
    apt.SECTION,
    repos.SECTION,
    boot.SECTION,
    MADE,
    secrets.SECTION,
)
