"""Records every remote command a podstate or pyinfra process sends, with its stdin.

Loaded by Python at start-up (``sitecustomize``) when this directory is on PYTHONPATH and
``PODSTATE_BENCH_RECORD`` names a directory: then paramiko's ``Channel`` is patched so that
each exec request is written, at the process's exit, to ``<dir>/<pid>.jsonl`` as one JSON
line: the SSH server's port, the order it was sent in, the command, its stdin (base64) and
its exit status (None if the pod never sent one). A subsystem (SFTP) is recorded with its name
instead of a command, so a replay can refuse what it cannot repeat.
bench/fleet/rivals/replay.py reads them. Nothing else changes: the patched methods call
paramiko's own.
"""

from __future__ import annotations

import os

if os.environ.get("PODSTATE_BENCH_RECORD"):
    import atexit
    import base64
    import itertools
    import json
    from pathlib import Path

    import paramiko

    _OUT = Path(os.environ["PODSTATE_BENCH_RECORD"])
    _ORDER = itertools.count()
    _RECORDS: dict[int, dict] = {}  # id(channel) -> its record

    def _record(channel: paramiko.Channel, **fields: object) -> None:
        try:
            port = channel.get_transport().getpeername()[1]
        except (OSError, AttributeError, IndexError):
            port = None
        _RECORDS[id(channel)] = {
            "port": port,
            "order": next(_ORDER),
            "stdin": b"",
            "channel": channel,
            **fields,
        }

    _exec, _subsystem = paramiko.Channel.exec_command, paramiko.Channel.invoke_subsystem
    _send = paramiko.Channel.send

    def send(self, s):  # what sendall sends too, a part at a time
        sent = _send(self, s)
        record = _RECORDS.get(id(self))
        if record is not None and "command" in record:
            record["stdin"] += (s.encode() if isinstance(s, str) else bytes(s))[:sent]
        return sent

    def exec_command(self, command):
        _record(self, command=command if isinstance(command, str) else command.decode())
        return _exec(self, command)

    def invoke_subsystem(self, subsystem):
        _record(self, subsystem=subsystem)
        return _subsystem(self, subsystem)

    paramiko.Channel.exec_command = exec_command
    paramiko.Channel.invoke_subsystem = invoke_subsystem
    paramiko.Channel.send = send

    @atexit.register
    def _write() -> None:
        with open(_OUT / f"{os.getpid()}.jsonl", "w") as out:
            for record in sorted(_RECORDS.values(), key=lambda r: r["order"]):
                channel = record.pop("channel")
                status = channel.exit_status if channel.exit_status_ready() else None
                record["stdin"] = base64.b64encode(record["stdin"]).decode()
                out.write(json.dumps({**record, "status": status}) + "\n")
