"""Third-party mock LLM servers from the package index (`fakellm`, `llm-mock-api`) as real
processes on loopback, and a fault-injecting proxy to put in front of them.

Neither server can end a stream without its end marker, send an error inside a 200 stream,
or send Retry-After / request-id headers, so `FaultProxy` (our own, stdlib) forwards each
request to the server and alters the real reply on the way back: it drops the end marker,
cuts after N events, injects an error event in the provider's own shape, or adds headers.
The replies themselves (ids, chunking, tool-call framing) stay the third party's.
"""

from __future__ import annotations

import http.client
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from tests.ports import free_port

_BIN = Path(sys.executable).parent

FAKELLM_YAML = """\
version: 1
rules:
  - name: tool
    when: {turn: 1, messages_contain: "make the file"}
    respond:
      tool_calls:
        - name: write_file
          arguments: {path: a.txt, content: hi}
  - name: done
    when: {messages_contain: "make the file"}
    respond: {content: "Done: wrote a.txt."}
  - name: look
    when: {turn: 1, messages_contain: "look at pic.png"}
    respond:
      tool_calls:
        - name: view_file
          arguments: {path: pic.png}
  - name: looked
    when: {messages_contain: "look at pic.png"}
    respond: {content: "A red picture."}
  - name: talk
    respond: {content: "Hello there."}
"""

LLM_MOCK_API_RULES = """\
{
  rules: [
    { when: "make the file", replies: [
        { reply: { tools: [{ name: "write_file", args: { path: "a.txt", content: "hi" } }] } },
        { reply: "Done: wrote a.txt." } ] },
    // Anthropic sends the tool result as the last user message: answer it.
    { when: "/^wrote [0-9]+ bytes/", reply: "Done: wrote a.txt." },
    { when: "look at pic.png", replies: [
        { reply: { tools: [{ name: "view_file", args: { path: "pic.png" } }] } },
        { reply: "A red picture." } ] },
    // Anthropic: the tool result (its text, then the image) is the last user message.
    { when: "/^.image pic.png/", reply: "A red picture." },
    // OpenAI: the image follows the tool message as a user message of content parts, whose
    // text this server reads as "" (its pydantic parts are not dicts to its text extractor).
    { when: "/^$/", reply: "A red picture." },
    { when: "rate me", reply: "after the wait" },
    { when: "just talk", reply: "Hello there." },
  ],
}
"""


# llm-mock-api's JSON5 rules cannot say "answer with an HTTP error" (its loader drops
# `error`), so it is started through its Python API: two 429s for "rate me", then the file.
LLM_MOCK_API_MAIN = """\
import asyncio, sys
from llm_mock_api import ErrorReply, MockServer, MockServerOptions, ReplyObject

async def main():
    server = MockServer(MockServerOptions(
        port=int(sys.argv[1]), default_latency=0, default_chunk_size=0))
    server.when("rate me").reply(ReplyObject(error=ErrorReply(
        status=429, message="slow down", type="rate_limit_error"))).times(2)
    await server.load(sys.argv[2])
    await server.run_until_shutdown()

asyncio.run(main())
"""


def _wait_listening(
    port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mock server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"mock server not listening after {timeout}s: {log.read_text()[-2000:]}")


@contextmanager
def mock_server(kind: str, workdir: Path) -> Iterator[str]:
    """Run `fakellm` or `llm-mock-api` with our rules; yields its root URL."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    if kind == "fakellm":
        config = workdir / "fakellm.yaml"
        config.write_text(FAKELLM_YAML)
        cmd = [str(_BIN / "fakellm"), "serve", "--port", str(port), "--config", str(config)]
    else:
        rules = workdir / "rules.json5"
        rules.write_text(LLM_MOCK_API_RULES)
        cmd = [sys.executable, "-c", LLM_MOCK_API_MAIN, str(port), str(rules)]
    log = workdir / f"{kind}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=workdir, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_listening(port, proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# --- the fault proxy -----------------------------------------------------------------------

_FINISH = re.compile(r'"finish_reason":\s*"')


@dataclass
class Fault:
    """What to do to one reply. Default: pass it through (plus the proxy's headers)."""

    drop_end: bool = False  # drop the end marker(s): message_stop / finish_reason, usage, [DONE]
    cut_after: int | None = None  # forward only the first N events, then end the body
    stream_error: tuple[str, str] | None = None  # (type, message) after the first event
    headers: dict[str, str] = field(default_factory=dict)


def _is_end(event: str) -> bool:
    return (
        "event: message_stop" in event
        or "data: [DONE]" in event
        or bool(_FINISH.search(event))
        or ('"usage": {' in event and '"choices": []' in event)
    )


def _error_event(path: str, kind: str, message: str) -> str:
    import json

    if path.endswith("/messages"):
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return f"event: error\ndata: {json.dumps(body)}\n\n"
    return f"data: {json.dumps({'error': {'type': kind, 'message': message, 'code': None}})}\n\n"


class FaultProxy:
    """A loopback HTTP proxy to `upstream` applying queued Faults, one per request (then
    `default`). Every response gets `request-id` and `x-request-id: req_proxy_<n>`."""

    def __init__(self, upstream: str, default: Fault | None = None) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.default = default or Fault()
        self.faults: list[Fault] = []
        self.count = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def push(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def __enter__(self) -> Self:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                proxy._handle(self)

            def do_GET(self) -> None:
                proxy._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        body = h.rfile.read(int(h.headers.get("content-length") or 0))
        if not h.path.rstrip("/").endswith(("/chat/completions", "/messages")):
            self._pass_through(h, body)  # e.g. xclaw asking the server for its context window
            return
        with self._lock:
            self.count += 1
            n = self.count
            fault = self.faults.pop(0) if self.faults else self.default
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "connection")}
        conn.request("POST", h.path, body=body, headers=headers)
        up = conn.getresponse()
        payload = up.read().decode()
        conn.close()
        extra = {"request-id": f"req_proxy_{n}", "x-request-id": f"req_proxy_{n}", **fault.headers}
        try:
            h.send_response(up.status)
            for k, v in up.getheaders():
                if k.lower() not in (
                    "content-length",
                    "transfer-encoding",
                    "connection",
                    "date",
                    "server",
                ):
                    h.send_header(k, v)
            for k, v in extra.items():
                h.send_header(k, v)
            if up.status != 200 or "event-stream" not in (up.getheader("content-type") or ""):
                h.send_header("content-length", str(len(payload.encode())))
                h.end_headers()
                h.wfile.write(payload.encode())
                return
            h.end_headers()  # HTTP/1.0: the body ends when the connection closes
            events = [e + "\n\n" for e in payload.replace("\r\n", "\n").split("\n\n") if e.strip()]
            if fault.drop_end:
                events = [e for e in events if not _is_end(e)]
            if fault.cut_after is not None:
                events = events[: fault.cut_after]
            if fault.stream_error is not None:
                events = [*events[:1], _error_event(h.path, *fault.stream_error)]
            for e in events:
                h.wfile.write(e.encode())
                h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _pass_through(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        """Any other request goes to the server as it is, uncounted and unaltered."""
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(h.command, h.path, body=body or None, headers=headers)
        up = conn.getresponse()
        payload = up.read()
        conn.close()
        h.send_response(up.status)
        h.send_header("content-type", up.getheader("content-type") or "application/json")
        h.send_header("content-length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)
