"""The one place tests get TCP ports for the servers they start.

Not from the kernel (`bind(("127.0.0.1", 0))`): that port is in the ephemeral range
(/proc/sys/net/ipv4/ip_local_port_range), from which every outgoing connection of the machine
(a PostgreSQL client, an HTTP client, another test) also takes its local port, so a port
picked that way and used again to restart a server after a kill can be taken in between, and
the restart fails with "port already in use". These ports are below that range, in a slice of
their own for each pytest-xdist worker (so the workers of one run never hand out the same
port), taken in turn from a random point of the slice (so two runs at once on one machine
rarely meet), and each checked free on every local address before it is handed out.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

FIRST = 10_000  # below: well-known and registered services' ports


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (Linux's default where unreadable)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def worker_slice() -> range:
    """This process's ports: its xdist worker's share of [FIRST, ephemeral_start())."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(name.removeprefix("gw")) if name.removeprefix("gw").isdigit() else 0
    count = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1), index + 1)
    width = (ephemeral_start() - FIRST) // count
    start = FIRST + index * width
    return range(start, start + width)


def is_free(port: int) -> bool:
    """Nothing listens on or is connected from `port` on any local IPv4 address (bound
    without SO_REUSEADDR, so a connection still in TIME_WAIT counts as taken too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


class _Ports:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.slice = worker_slice()
        self.next = random.randrange(len(self.slice))

    def take(self) -> int:
        with self.lock:
            for _ in range(len(self.slice)):
                port = self.slice[self.next % len(self.slice)]
                self.next += 1
                if is_free(port):
                    return port
        raise RuntimeError(f"no free port in {self.slice}")


_PORTS: list[_Ports] = []  # made at first use: xdist names the worker before any test runs
_MADE = threading.Lock()


def free_port() -> int:
    """A port nothing uses now, not handed out before by this process, below the ephemeral
    range and in this xdist worker's slice: safe to restart a server on after a kill."""
    with _MADE:
        if not _PORTS:
            _PORTS.append(_Ports())
    return _PORTS[0].take()
