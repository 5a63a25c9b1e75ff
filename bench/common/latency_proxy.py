"""A TCP proxy that adds network round-trip time: one asyncio process, one port per pod.

Kernels without ``netem`` cannot add latency to loopback traffic, so the benchmark puts this
proxy between the SSH clients and the sandbox pods. For each target port it listens on a
port of 127.0.0.1 and forwards every connection to the target, holding each chunk for half
the round-trip time in each direction:

* order is kept (a chunk's due time is its arrival time plus RTT/2, and each direction is
  delivered by one task in arrival order), and there is no throughput cap unless one is
  given (``--rate-mbs``: each direction of each connection then delivers at most that many
  MB/s): chunks in flight overlap, so a bulk transfer costs RTT/2 once, not per chunk;
* a new connection costs what TCP's handshake costs over a real link: the upstream
  connection is opened 1.5 RTT after the client's (SYN out, SYN-ACK back, ACK out), so the
  server's first byte (SSH's banner) reaches the client 2 RTT after ``connect()``, and the
  client's first bytes reach the server together with the handshake's last ACK;
* end of stream (FIN) is delayed like data, so ``close()`` is seen RTT/2 later.

Run it as ``python -m bench.common.latency_proxy --rtt-ms 150 TARGET_PORT...``; it prints
one JSON line ``{"TARGET_PORT": LISTEN_PORT, ...}`` once every port listens, then serves
until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

CHUNK = 256 * 1024
DEFAULT_RTT_MS = 150.0


def _nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _pump(
    reader: asyncio.StreamReader,
    queue: asyncio.Queue[tuple[float, bytes]],
    delay: float,
) -> None:
    """Read chunks as they come and queue each with its due time; b"" marks end of stream."""
    loop = asyncio.get_running_loop()
    try:
        while True:
            data = await reader.read(CHUNK)
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                return
    except (ConnectionError, OSError):
        queue.put_nowait((loop.time() + delay, b""))


async def _deliver(
    queue: asyncio.Queue[tuple[float, bytes]],
    writer_ready: asyncio.Future[asyncio.StreamWriter],
    rate: float | None = None,
) -> None:
    """Write queued chunks at their due times, in order, at most ``rate`` bytes per second
    (None: no cap); half-close on end of stream."""
    loop = asyncio.get_running_loop()
    writer = await writer_ready
    free_at = 0.0  # when the capped link has sent what it was given before
    try:
        while True:
            due, data = await queue.get()
            if rate:
                due = max(due, free_at)
                free_at = due + len(data) / rate
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        return


class Link:
    """One emulated network path: a fixed round-trip time for every connection through it."""

    def __init__(self, rtt_s: float, rate: float | None = None) -> None:
        self.rtt = rtt_s
        self.rate = rate  # bytes per second in each direction, None: no cap
        self.open_connections = 0

    async def handle(
        self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, target: int
    ) -> None:
        """Forward one client connection to 127.0.0.1:target with RTT/2 each way."""
        loop = asyncio.get_running_loop()
        self.open_connections += 1
        _nodelay(client_w)
        half = self.rtt / 2
        upstream_w: asyncio.Future[asyncio.StreamWriter] = loop.create_future()
        client_w_ready: asyncio.Future[asyncio.StreamWriter] = loop.create_future()
        client_w_ready.set_result(client_w)
        to_server: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        to_client: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        tasks = [
            asyncio.create_task(_pump(client_r, to_server, half)),
            asyncio.create_task(_deliver(to_server, upstream_w, self.rate)),
        ]
        server_w: asyncio.StreamWriter | None = None
        try:
            await asyncio.sleep(1.5 * self.rtt)  # the handshake, as seen by the server
            try:
                server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
            except OSError:
                for task in tasks:
                    task.cancel()
                return
            _nodelay(server_w)
            upstream_w.set_result(server_w)
            tasks += [
                asyncio.create_task(_pump(server_r, to_client, half)),
                asyncio.create_task(_deliver(to_client, client_w_ready, self.rate)),
            ]
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for task in tasks:
                task.cancel()
            for writer in (client_w, server_w):
                if writer is not None:
                    writer.close()
            self.open_connections -= 1


async def serve(
    targets: Iterable[int], rtt_ms: float, announce: bool = True, rate_mbs: float | None = None
) -> None:
    """Listen for every target port, print the port map as JSON, and serve until signalled."""
    link = Link(rtt_ms / 1000.0, rate_mbs * 1e6 if rate_mbs else None)
    servers = []
    mapping: dict[str, int] = {}
    for target in targets:

        async def handler(r, w, target=target) -> None:
            with contextlib.suppress(asyncio.CancelledError):  # cancelled at shutdown
                await link.handle(r, w, target)

        server = await asyncio.start_server(handler, "127.0.0.1", 0, backlog=1024)
        servers.append(server)
        mapping[str(target)] = server.sockets[0].getsockname()[1]
    if announce:
        print(json.dumps(mapping), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


@contextlib.contextmanager
def routes(rtt_ms: float, rate_mbs: float | None = None) -> Iterator[Callable[[int], int]]:
    """Yield a function that puts a proxy of ``rtt_ms`` (capped at ``rate_mbs`` MB/s each
    way, None: no cap) in front of a port and returns the port to connect to instead
    (``sandbox.up``'s ``storage_route``); the proxies it started are stopped when the
    block ends.

    Each proxy is a process of its own, so the benchmark's timing never shares its loop.
    """
    proxies: list[subprocess.Popen] = []

    def route(port: int) -> int:
        rate = ["--rate-mbs", str(rate_mbs)] if rate_mbs else []
        proxy = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.common.latency_proxy",
                "--rtt-ms",
                str(rtt_ms),
                *rate,
                str(port),
            ],
            cwd=Path(__file__).resolve().parents[2],
            stdout=subprocess.PIPE,
            text=True,
        )
        proxies.append(proxy)
        return int(json.loads(proxy.stdout.readline())[str(port)])

    try:
        yield route
    finally:
        for proxy in proxies:
            proxy.terminate()
            proxy.wait()


def main(argv: list[str] | None = None) -> int:
    """Run the proxy; returns the exit status (0 after a clean stop)."""
    parser = argparse.ArgumentParser(prog="latency_proxy", description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="+", type=int, help="ports on 127.0.0.1 to front")
    parser.add_argument(
        "--rtt-ms", type=float, default=DEFAULT_RTT_MS, help="round-trip time to add (ms)"
    )
    parser.add_argument(
        "--rate-mbs", type=float, default=None, help="cap each direction at this many MB/s"
    )
    args = parser.parse_args(argv)
    if args.rtt_ms < 0:
        parser.error("--rtt-ms must be >= 0")
    asyncio.run(serve(args.targets, args.rtt_ms, rate_mbs=args.rate_mbs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
