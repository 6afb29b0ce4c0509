"""[tools/mcp] One MCP server as xclaw uses it: started on first use, restarted when it died, with a
call timeout, its stderr in the log. Built on the official `mcp` SDK (ClientSession over the stdio
or streamable HTTP transport).

One connection per configured server per xclaw process, shared by every session that process
drives: MCP servers are made to serve concurrent requests over one session, a process per
session would multiply start-up time and memory by the number of sessions, and what a tool
does to the world is not per session anyway (the workspace is the per-session part, and an MCP
server does not live in it). A server that keeps per-connection state (a browser page, a
login) therefore shares that state between sessions; docs/tools.md says so.

The SDK's transports are anyio context managers that must be entered and left in one task,
so each connection lives in a task of its own (`_hold`) that opens them, publishes the
ClientSession, and closes them when told to or when the server goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import threading
import time
from typing import Any

from mcp.types import CallToolResult
from mcp.types import Tool as McpToolSpec
from pydantic import ValidationError

from xclaw.tools.mcp.config import McpServerConfig

log = logging.getLogger("xclaw.mcp")

# After a failed start, how long until the next run tries that server again.
RETRY_AFTER_S = 30.0


class _StdoutNoise:
    """Lines a stdio server wrote on stdout that are not JSON-RPC (a banner, a debug print):
    logged once each as one line naming the server, and quoted if the server never answers."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        log.warning("event=mcp_stdout server=%s reason='not JSON-RPC' line=%r", self.server, line)
        self.lines = ([*self.lines, line])[-3:]

    def quoted(self) -> str:
        if not self.lines:
            return ""
        return "; it wrote on stdout lines that are not JSON-RPC: " + " | ".join(self.lines)


# The connection task's collector; the SDK's stdout reader task inherits it (anyio tasks copy
# the context of the task that starts them), so the filter below knows which server spoke.
_NOISE: contextvars.ContextVar[_StdoutNoise | None] = contextvars.ContextVar(
    "mcp_noise", default=None
)


class _ParseErrorToOneLine(logging.Filter):
    """The SDK logs every unparsable stdout line with a full traceback (through Python's
    last-resort handler in `xclaw run`, on the user's terminal): turn it into one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith("Failed to parse JSONRPC message"):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        line = _offending_input(exc)
        noise = _NOISE.get()
        if noise is not None:
            noise.add(line)
        else:
            log.warning("event=mcp_stdout reason='not JSON-RPC' line=%r", line)
        return False


def _offending_input(exc: BaseException | None) -> str:
    """The line the server printed that is no JSON-RPC message (the SDK's parse failure is
    pydantic's ValidationError, which keeps it)."""
    if isinstance(exc, ValidationError):
        found = exc.errors(include_url=False)
        if found and "input" in found[0]:
            value = found[0]["input"]
            return (value if isinstance(value, str) else repr(value))[:200]
    return str(exc)[:200]


logging.getLogger("mcp.client.stdio").addFilter(_ParseErrorToOneLine())


class McpServerError(Exception):
    """A server that cannot be started or did not answer; the message names the server."""


class McpConnection:
    def __init__(self, name: str, config: McpServerConfig) -> None:
        self.config = config
        self.name = name
        self.tools: list[McpToolSpec] = []  # as listed at the last start
        self.server_info: Any = None
        self.starts = 0
        self._session: Any = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._dead = asyncio.Event()
        self._lock = asyncio.Lock()
        self._failure: tuple[str, float] | None = None  # why the last start failed, and when
        self._noise = _StdoutNoise(self.name)

    @property
    def alive(self) -> bool:
        return (
            self._session is not None
            and self._holder is not None
            and not self._holder.done()
            and not self._dead.is_set()
            and not _transport_closed(self._session)
        )

    async def ensure_started(self) -> None:
        """Start (or restart) the server unless it runs; McpServerError says why it cannot.
        After a failed start the next attempt waits RETRY_AFTER_S: a server that hangs on
        start-up must not cost every run its start-up timeout."""
        async with self._lock:
            if self.alive:
                return
            if self._failure is not None:
                why, when = self._failure
                wait = RETRY_AFTER_S - (time.monotonic() - when)
                if wait > 0:
                    raise McpServerError(f"{why} (tried again in {wait:.0f} s)")
            await self._close_locked()
            try:
                await self._start_locked()
            except McpServerError as e:
                self._failure = (str(e), time.monotonic())
                raise
            self._failure = None

    async def _start_locked(self) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._dead = asyncio.Event()
        self._holder = asyncio.create_task(self._hold(ready, self._stop, self._dead))
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.config.startup_timeout_s)
        except TimeoutError:
            await self._close_locked()
            raise McpServerError(
                f"MCP server {self.name!r} ({self.config.describe()}) did not start within "
                f"{self.config.startup_timeout_s:g} s{self._noise.quoted()}"
            ) from None
        except McpServerError:
            await self._close_locked()
            raise
        self.starts += 1
        log.info(
            "event=mcp_started server=%s tools=%d starts=%d",
            self.name,
            len(self.tools),
            self.starts,
        )

    async def _hold(
        self, ready: asyncio.Future[None], stop: asyncio.Event, dead: asyncio.Event
    ) -> None:
        errlog = _StderrToLog(self.name) if self.config.transport == "stdio" else None
        self._noise = _StdoutNoise(self.name)
        _NOISE.set(self._noise)
        try:
            from mcp import ClientSession

            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._transport(errlog))
                if errlog is not None:
                    errlog.close_write_end()  # the child holds its own copy now
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                init = await session.initialize()
                listed = await session.list_tools()
                self.server_info = init.server_info
                self.tools = list(listed.tools)
                self._session = session
                if not ready.done():
                    ready.set_result(None)
                while not stop.is_set():  # until told to stop, or the server goes away
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), 1.0)
                    if _transport_closed(session):
                        log.warning(
                            "event=mcp_lost server=%s reason='connection closed'", self.name
                        )
                        break
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # noqa: BLE001 - anything the SDK raises means "not usable"
            why = _describe(e) + self._noise.quoted()
            if errlog is not None:
                why += errlog.last_words()
            if not ready.done():
                ready.set_exception(
                    McpServerError(
                        f"MCP server {self.name!r} ({self.config.describe()}) failed to start: {why}"
                    )
                )
            else:
                log.warning("event=mcp_lost server=%s reason=%r", self.name, why)
        finally:
            self._session = None
            dead.set()
            if errlog is not None:
                errlog.close_write_end()

    def _transport(self, errlog: _StderrToLog | None) -> Any:
        c = self.config
        if c.transport == "stdio":
            from mcp import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=c.command or "", args=list(c.args), env=dict(c.env) or None, cwd=c.cwd
            )
            assert errlog is not None
            return stdio_client(params, errlog=errlog.file)
        from mcp.shared._httpx_utils import create_mcp_http_client  # where mcp itself gets it

        return _http(c.url or "", create_mcp_http_client(headers=dict(c.headers) or None))

    async def call(self, tool: str, args: dict[str, Any]) -> CallToolResult:
        """CallToolResult of one call; McpServerError if the server is gone or too slow
        (it is then stopped, and started afresh by the next call)."""
        await self.ensure_started()
        session, dead = self._session, self._dead
        if session is None:
            raise McpServerError(f"MCP server {self.name!r} is not running")
        call = asyncio.ensure_future(session.call_tool(tool, args))
        died = asyncio.ensure_future(dead.wait())
        try:
            done, _ = await asyncio.wait(
                {call, died}, timeout=self.config.timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            call.cancel()
            raise
        finally:
            died.cancel()
        if call in done:
            try:
                result: CallToolResult = call.result()
                return result
            except Exception as e:
                # The SDK fails the pending call with CONNECTION_CLOSED as soon as the pipe
                # closes (the server exited or was killed): drop the connection, so that the
                # next call starts the server afresh.
                if dead.is_set() or _closed_error(e) or _transport_closed(session):
                    await self.restart_later()
                    raise McpServerError(
                        f"MCP server {self.name!r} stopped during the call ({_describe(e)}); "
                        "it is started again for the next call"
                    ) from None
                raise
        call.cancel()
        if dead.is_set():
            raise McpServerError(
                f"MCP server {self.name!r} stopped during the call (it will be restarted for "
                "the next one)"
            )
        await self.restart_later()
        raise McpServerError(
            f"MCP server {self.name!r} did not answer {tool!r} within {self.config.timeout_s:g} s "
            "(timeout_s); the server is restarted for the next call"
        )

    async def restart_later(self) -> None:
        """Stop a server that stopped answering; the next call starts a fresh one."""
        async with self._lock:
            await self._close_locked()

    async def close(self) -> None:
        async with self._lock:
            await self._close_locked()

    async def _close_locked(self) -> None:
        holder, stop, serving = self._holder, self._stop, self._session is not None
        self._holder = None
        self._session = None
        if holder is None:
            return
        if stop is not None:
            stop.set()
        try:
            # A connection that is serving closes in order (the SDK ends the process); one
            # still starting (stuck in the handshake) is cancelled at once.
            await asyncio.wait_for(asyncio.shield(holder), 10.0 if serving else 0.0)
        except (TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001
            holder.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(holder, 5.0)


@contextlib.asynccontextmanager
async def _http(url: str, client: Any) -> Any:
    from mcp.client.streamable_http import streamable_http_client

    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


class _StderrToLog:
    """A pipe whose write end is the server's stderr; a thread logs what arrives, line by line
    (the server may print anything, at any rate: the log gets it, nothing else does)."""

    def __init__(self, server: str) -> None:
        self.tail: list[str] = []  # the last lines, for the error when the server exits
        r, w = os.pipe()
        self.file = os.fdopen(w, "w")
        self._closed = False
        self._thread = threading.Thread(
            target=self._pump,
            args=(os.fdopen(r, "rb"), server),
            daemon=True,
            name=f"mcp-stderr-{server}",
        )
        self._thread.start()

    def close_write_end(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(OSError):
                self.file.close()

    def last_words(self, wait_s: float = 1.0) -> str:
        """`; its stderr ends: ...` once the pipe is drained (the server has exited)."""
        self._thread.join(wait_s)
        lines = [line[:300] for line in self.tail[-3:]]
        return f"; its stderr ends: {' | '.join(lines)}" if lines else ""

    def _pump(self, stream: Any, server: str) -> None:
        with stream:
            for raw in stream:
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    log.info("mcp[%s] %s", server, line[:2000])
                    self.tail = [*self.tail[-9:], line]


def _closed_error(e: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp_types.jsonrpc import CONNECTION_CLOSED

    return isinstance(e, MCPError) and e.code == CONNECTION_CLOSED


def _transport_closed(session: Any) -> bool:
    """Whether the SDK saw the server's end of the connection close (its dispatcher's flag;
    best effort: if a later SDK renames it, a dead server is found by the next call)."""
    dispatcher = getattr(session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))


def _describe(e: BaseException) -> str:
    """The innermost meaningful message of an exception (task groups wrap them)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    if isinstance(e, FileNotFoundError):
        return f"command not found ({e.filename or e})"
    text = str(e).strip()
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
