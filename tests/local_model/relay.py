"""A recording TCP relay in front of the model server: what xclaw sent, byte for byte.

It forwards both directions as they come (streaming untouched) and closes the other side as
soon as one side closes, so a client hanging up reaches the server as a hang-up. The bytes
the clients sent are kept and parsed back into HTTP requests for the tests to read.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from dataclasses import dataclass
from typing import Any, Self


@dataclass
class Request:
    method: str
    path: str
    body: Any  # the JSON body, or None


class Relay:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sent: list[bytearray] = []  # one buffer per client connection
        self._lock = threading.Lock()
        self._closed = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Self:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream_port))
            buffer = bytearray()
            with self._lock:
                self._sent.append(buffer)
            threading.Thread(target=self._pipe, args=(client, server, buffer), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, None), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, record: bytearray | None) -> None:
        try:
            while data := src.recv(65536):
                if record is not None:
                    record.extend(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def requests(self, path_end: str = "/chat/completions") -> list[Request]:
        """Every complete request sent so far whose path ends with `path_end`, in order of
        connection, then of sending."""
        with self._lock:
            buffers = [bytes(b) for b in self._sent]
        out: list[Request] = []
        for raw in buffers:
            out += [r for r in _parse(raw) if r.path.rstrip("/").endswith(path_end)]
        return out


def _parse(raw: bytes) -> list[Request]:
    out: list[Request] = []
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])
        }
        size = int(headers.get("content-length") or 0)
        if len(rest) < size:
            break
        body = rest[:size]
        out.append(Request(method, path, json.loads(body) if body else None))
        raw = rest[size:]
    return out
