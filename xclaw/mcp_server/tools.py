"""[mcp_server] xclaw as an MCP server: its tools (these names are the contract: `send_message`,
`session_status`, `list_sessions`, `steps`, `approve`, `rollback`, `fork`, `cancel`), each
answering with structured content and its text, and the sessions and transcripts as
resources. Built on `Sessions`, what the tools need of xclaw, so the same server runs over
the Python API (`xclaw mcp`, xclaw/mcp_server/over_api.py).

An approval a run waits for is asked through elicitation when the host supports it (a yes/no
question), else it is listed in the answer for the `approve` tool. Every answer is recorded
as a person's through `mcp`.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Iterator
from typing import Any, Protocol, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from pydantic import BaseModel, Field

from xclaw import __version__
from xclaw.errors import BadCommand, BadStep, UnknownAgent, UnknownSession, XclawError
from xclaw.store.steps.rows import SESSION_ID_RE
from xclaw.wire.protocol import parse_command

T = TypeVar("T")

MAX_WAIT_S = 300.0  # the longest a call waits for a run to finish
MAX_TEXT = 1_000_000
MAX_STEPS = 100_000
MAX_STEP_ID = 200  # `s0005`, or `<session id>:s0005`
MAX_TITLE = 200
QUOTED = 80  # characters of a bad argument an error quotes


class Sessions(Protocol):
    async def send(
        self, text: str, session_id: str | None, wait_s: float, agent: str | None
    ) -> dict[str, Any]: ...
    async def status(self, session_id: str, wait_s: float) -> dict[str, Any]: ...
    async def sessions(self, limit: int, search: str | None) -> list[dict[str, Any]]: ...
    async def steps(self, session_id: str, n: int | None) -> list[dict[str, Any]]: ...
    async def approve(self, session_id: str, step_id: str, approve: bool) -> dict[str, Any]: ...
    async def rollback(
        self, session_id: str, step_id: str, confirm: bool, accept_irreversible: bool
    ) -> dict[str, Any]: ...
    async def fork(self, session_id: str, step_id: str, title: str | None) -> dict[str, Any]: ...
    async def cancel(self, session_id: str) -> dict[str, Any]: ...
    async def transcript(self, session_id: str) -> list[dict[str, Any]]: ...


class Checked:
    """The host's arguments checked before they reach xclaw (they are hostile input, as any
    client's): an id that cannot be a session's is unknown, a step id or title past any
    real one's length is refused, and what is said of them quotes at most QUOTED characters
    — an answer never echoes a megabyte back."""

    def __init__(self, inner: Sessions) -> None:
        self.inner = inner

    @staticmethod
    def _sid(session_id: str) -> str:
        if not SESSION_ID_RE.match(session_id):
            raise UnknownSession(_quoted(session_id))
        return session_id

    @staticmethod
    def _step(session_id: str, step_id: str) -> str:
        if not step_id or len(step_id) > MAX_STEP_ID:
            raise BadStep(_quoted(step_id), session_id)
        return step_id

    async def send(
        self, text: str, session_id: str | None, wait_s: float, agent: str | None
    ) -> dict[str, Any]:
        sid = None if session_id is None else self._sid(session_id)
        if agent is not None and not 0 < len(agent) <= MAX_TITLE:
            raise UnknownAgent(f"no agent named {_quoted(agent)!r} is declared here")
        return await self.inner.send(text, sid, wait_s, agent)

    async def status(self, session_id: str, wait_s: float) -> dict[str, Any]:
        return await self.inner.status(self._sid(session_id), wait_s)

    async def sessions(self, limit: int, search: str | None) -> list[dict[str, Any]]:
        if search is not None and len(search) > MAX_TITLE:
            raise BadCommand(f"search has at most {MAX_TITLE} characters")
        return await self.inner.sessions(limit, search)

    async def steps(self, session_id: str, n: int | None) -> list[dict[str, Any]]:
        return await self.inner.steps(self._sid(session_id), n)

    async def approve(self, session_id: str, step_id: str, approve: bool) -> dict[str, Any]:
        sid = self._sid(session_id)
        return await self.inner.approve(sid, self._step(sid, step_id), approve)

    async def rollback(
        self, session_id: str, step_id: str, confirm: bool, accept_irreversible: bool
    ) -> dict[str, Any]:
        sid = self._sid(session_id)
        return await self.inner.rollback(
            sid, self._step(sid, step_id), confirm, accept_irreversible
        )

    async def fork(self, session_id: str, step_id: str, title: str | None) -> dict[str, Any]:
        sid = self._sid(session_id)
        if title is not None and len(title) > MAX_TITLE:
            raise BadCommand(f"a title has at most {MAX_TITLE} characters")
        return await self.inner.fork(sid, self._step(sid, step_id), title)

    async def cancel(self, session_id: str) -> dict[str, Any]:
        return await self.inner.cancel(self._sid(session_id))

    async def transcript(self, session_id: str) -> list[dict[str, Any]]:
        return await self.inner.transcript(self._sid(session_id))


def _quoted(text: str) -> str:
    return text if len(text) <= QUOTED else text[:QUOTED] + "…"


class Approval(BaseModel):
    approve: bool = Field(description="run the call (true) or refuse it (false)")


async def _said(call: Awaitable[T]) -> T:
    """An xclaw error as the tool's error result, its code first (`unknown_session: …`):
    another person's session, a bad step, a run in flight are said, never a traceback."""
    try:
        return await call
    except XclawError as e:
        raise ToolError(f"{e.code}: {e.message}") from None


async def _read(call: Awaitable[T]) -> T:
    """As `_said`, for a resource: an unknown session is a resource not found (as for a URI
    nobody serves), the rest a resource error, each with its code."""
    try:
        return await call
    except UnknownSession as e:
        raise ResourceNotFoundError(f"{e.code}: {e.message}") from None
    except XclawError as e:
        raise ResourceError(f"{e.code}: {e.message}") from None


def _bounded(wait_s: float) -> float:
    return max(0.0, min(float(wait_s), MAX_WAIT_S))


async def _elicit_pending(
    sessions: Sessions, ctx: Context, answer: dict[str, Any], wait_s: float
) -> dict[str, Any]:
    """Ask the host's user about each approval the run waits for, while the host can be
    asked (elicitation); the run then goes on, waited for up to `wait_s` more."""
    caps = ctx.client_capabilities
    if caps is None or caps.elicitation is None:
        return answer
    for _ in range(50):
        pending = answer.get("pending_approvals") or []
        if not pending:
            return answer
        for request in pending:
            warn = (
                " It was interrupted and may already have happened."
                if request.get("maybe_repeated")
                else ""
            )
            text = (
                f"xclaw asks to run {request['name']} {json.dumps(request['input'])[:500]}"
                f" ({request['reason']}).{warn} Allow it?"
            )
            result = await ctx.elicit(text, Approval)
            yes = result.action == "accept" and bool(getattr(result.data, "approve", False))
            await sessions.approve(answer["session_id"], request["step_id"], yes)
        answer = await sessions.status(answer["session_id"], wait_s)
    return answer


@contextlib.contextmanager
def _logging_left_alone() -> Iterator[None]:
    """The SDK's server configures the root logger when nothing has yet (`basicConfig` with
    a handler of its own): logging stays as xclaw's caller set it (a program embedding the
    gateway, a test)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)


def build_server(given: Sessions) -> MCPServer[Any]:
    sessions = Checked(given)
    with _logging_left_alone():
        server: MCPServer[Any] = MCPServer(
            "xclaw",
            title="xclaw",
            version=__version__,
            instructions=(
                "xclaw runs an agent whose every step is recorded: send_message starts or "
                "continues a session (it survives restarts); approve answers what it asks; "
                "steps, rollback and fork travel in its history."
            ),
        )

    @server.tool(structured_output=True)
    async def send_message(
        text: str,
        ctx: Context,
        session_id: str | None = None,
        wait_s: float = 30.0,
        agent: str | None = None,
    ) -> dict[str, Any]:
        """Send a message to an xclaw session (a new one when session_id is absent). Waits up
        to wait_s seconds (at most 300) for the run: the reply once it has finished, else
        that it is still running (session_status follows it) or which approvals it waits for
        (approve answers them). agent: an agent declared in the server's xclaw.yaml
        (`agents:`) to run this message and the session's next ones (absent: the one the
        session runs; xclaw's own for a new session)."""
        if not text.strip() or len(text) > MAX_TEXT:
            raise ToolError(f"bad_command: text must be 1 to {MAX_TEXT} characters")
        command = parse_command(text)
        if command is not None:
            raise ToolError(
                f"bad_command: /{command.name} is a slash command of xclaw's chat clients; "
                "here each has its tool (steps, rollback, fork, cancel)"
            )
        answer = await _said(sessions.send(text, session_id, _bounded(wait_s), agent))
        return await _said(_elicit_pending(sessions, ctx, answer, _bounded(wait_s)))

    @server.tool(structured_output=True)
    async def session_status(session_id: str, ctx: Context, wait_s: float = 0.0) -> dict[str, Any]:
        """A session's state, its reply when the run has finished, the approvals it waits
        for; an interrupted run (the server restarted) is continued. wait_s (at most 300)
        waits for a run in flight to finish."""
        answer = await _said(sessions.status(session_id, _bounded(wait_s)))
        return await _said(_elicit_pending(sessions, ctx, answer, _bounded(wait_s)))

    @server.tool(structured_output=True)
    async def list_sessions(limit: int = 50, search: str | None = None) -> dict[str, Any]:
        """Sessions, most recently updated first (search: in the title or id)."""
        return {"sessions": await _said(sessions.sessions(max(1, min(limit, 500)), search))}

    @server.tool(structured_output=True)
    async def steps(session_id: str, n: int | None = None) -> dict[str, Any]:
        """A session's steps (every one, or the latest n): ids to roll back or fork at."""
        if n is not None and not 1 <= n <= MAX_STEPS:
            raise ToolError(f"bad_request: n must be between 1 and {MAX_STEPS}")
        return {"session_id": session_id, "steps": await _said(sessions.steps(session_id, n))}

    @server.tool(structured_output=True)
    async def approve(session_id: str, step_id: str, approve: bool) -> dict[str, Any]:
        """Answer an approval a run waits for (its step_id, from pending_approvals)."""
        return await _said(sessions.approve(session_id, step_id, approve))

    @server.tool(structured_output=True)
    async def rollback(
        session_id: str, step_id: str, confirm: bool = False, accept_irreversible: bool = False
    ) -> dict[str, Any]:
        """Rewind a session to just before step_id: its memory and its workspace files. When
        tools after that step had effects outside the workspace, nothing is done at first:
        the answer (`rolled_back: false`, `preview`) says which effects would be undone
        (their compensations, latest first) and which would stay done; call again with
        confirm=true to undo them and rewind, or accept_irreversible=true to rewind leaving
        the irreversible ones done. The answer lists the compensations that ran."""
        return await _said(
            sessions.rollback(
                session_id, step_id, confirm or accept_irreversible, accept_irreversible
            )
        )

    @server.tool(structured_output=True)
    async def fork(session_id: str, step_id: str, title: str | None = None) -> dict[str, Any]:
        """A new session branching after step_id (files too); the original is unchanged."""
        return await _said(sessions.fork(session_id, step_id, title))

    @server.tool(structured_output=True)
    async def cancel(session_id: str) -> dict[str, Any]:
        """Stop the session's run now (its running command killed); it then waits."""
        return await _said(sessions.cancel(session_id))

    @server.resource("xclaw://sessions", mime_type="application/json")
    async def sessions_resource() -> str:
        """The sessions, most recently updated first."""
        return json.dumps(await _read(sessions.sessions(100, None)))

    @server.resource("xclaw://sessions/{session_id}/transcript", mime_type="application/json")
    async def transcript(session_id: str) -> str:
        """A session's conversation: messages, tool calls and their results."""
        return json.dumps(await _read(sessions.transcript(session_id)))

    return server
