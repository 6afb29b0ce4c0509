"""[tools] Front-end tools: tools a client (an AG-UI web app, docs/ag-ui.md) declares with its run
and runs itself, in the browser.

The model is offered them beside the server's tools. A call is recorded write-ahead like
every call; the tool then waits — as an approval waits — until the client sends its result
with its next run, and that result completes the step (`ClientCalls.deliver`). What runs
here is only the wait: the effect is the client's, done once, when the client ran the call.

So a call cut short by a crash is safe to run again on resume (`retry_on_resume`): the
resumed run waits again, and the result the client carries in its next run completes it. A
result for a call the record already answers is ignored by whoever delivers it (the adapter
reads the record first): nothing twice.

Which tools a session's client declared lives in the session's metadata (`CLIENT_TOOLS_KEY`),
so a run resumed after a restart, before any client is back, offers the same tools.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from xclaw.tools.base import Tool, ToolContext, ToolResult, cap_result_text
from xclaw.tools.traits import ToolPolicy, ToolTraits

CLIENT_TOOLS_KEY = "clientTools"
# What the approval and resume rules read: the person at the client decides (the client runs
# the call, in front of them), and only the wait runs here, so it is retried after a crash.
CLIENT_TRAITS = ToolTraits(
    source="client", policy=ToolPolicy(approval="allow", resume="retry"), open_world=True
)
TOOL_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
MAX_TOOLS = 64
MAX_DESCRIPTION_CHARS = 4_000
MAX_SCHEMA_CHARS = 32_000
# Results that came before their call waited for them (a client answering several calls at
# once: the calls run one after another), per process.
MAX_EARLY_RESULTS = 10_000
# Sessions whose declared tools this process keeps (the record holds them all).
MAX_SESSIONS = 10_000


class BadClientTool(ValueError):
    """A declaration the client sent that cannot be offered to a model."""


@dataclass(frozen=True, slots=True)
class ClientToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def client_tool_spec(
    name: Any, description: Any, parameters: Any, *, taken: Iterable[str] = ()
) -> ClientToolSpec:
    """A declaration checked: a name a provider accepts and no server tool has, text, an
    object schema of bounded size. BadClientTool says what is wrong."""
    import json

    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        raise BadClientTool(
            f"tool name {str(name)[:80]!r}: use 1-64 letters, digits, '_' or '-', "
            "starting with a letter"
        )
    if name in set(taken):
        raise BadClientTool(f"tool name {name!r} is a tool of the server; choose another name")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS:
        raise BadClientTool(
            f"tool {name!r}: description must be text of at most {MAX_DESCRIPTION_CHARS} characters"
        )
    schema: Any = {"type": "object", "properties": {}} if parameters is None else parameters
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise BadClientTool(f"tool {name!r}: parameters must be a JSON Schema of an object")
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS:
        raise BadClientTool(f"tool {name!r}: parameters schema over {MAX_SCHEMA_CHARS} characters")
    return ClientToolSpec(name, description, {"type": "object", **schema})


def specs_from_metadata(metadata: Mapping[str, Any]) -> list[ClientToolSpec]:
    """The declarations a session's metadata holds (what does not read as one is skipped)."""
    raw = metadata.get(CLIENT_TOOLS_KEY)
    out = []
    for item in raw if isinstance(raw, list) else ():
        if not isinstance(item, dict):
            continue
        try:
            out.append(
                client_tool_spec(
                    item.get("name"), item.get("description", ""), item.get("parameters")
                )
            )
        except BadClientTool:
            continue
    return out


def metadata_with(metadata: Mapping[str, Any], specs: Iterable[ClientToolSpec]) -> dict[str, Any]:
    """`metadata` holding these declarations (none: the key goes)."""
    out = {k: v for k, v in metadata.items() if k != CLIENT_TOOLS_KEY}
    listed = [s.to_json() for s in specs]
    if listed:
        out[CLIENT_TOOLS_KEY] = listed
    return out


class ClientCalls:
    """Calls of front-end tools waiting for their client's result, by (session, call id); and
    results that came before their call waited (a client answering several at once)."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], asyncio.Future[ToolResult]] = {}
        self._early: OrderedDict[tuple[str, str], ToolResult] = OrderedDict()

    async def wait(self, session_id: str, call_id: str) -> ToolResult:
        key = (session_id, call_id)
        early = self._early.pop(key, None)
        if early is not None:
            return early
        future: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
        self._waiting[key] = future
        try:
            return await future
        finally:
            if self._waiting.get(key) is future:
                del self._waiting[key]

    def deliver(self, session_id: str, call_id: str, result: ToolResult) -> bool:
        """The client's result for the call; True: a waiting call took it (else it is kept
        for the call, which has not started waiting yet)."""
        key = (session_id, call_id)
        future = self._waiting.get(key)
        if future is not None and not future.done():
            future.set_result(result)
            return True
        self._early[key] = result
        self._early.move_to_end(key)
        while len(self._early) > MAX_EARLY_RESULTS:
            self._early.popitem(last=False)
        return False

    def waiting(self, session_id: str) -> list[str]:
        """Call ids of the session's calls waiting for a result now."""
        return [c for (s, c), f in self._waiting.items() if s == session_id and not f.done()]


class ClientTool(Tool):
    """One front-end tool of one session: its call waits for the client's result."""

    read_only = False
    retry_on_resume = True
    outside_effects = True
    traits = CLIENT_TRAITS

    def __init__(self, spec: ClientToolSpec, calls: ClientCalls) -> None:
        self.name = spec.name
        self.description = spec.description
        self.input_schema = spec.parameters
        self.spec = spec
        self._calls = calls

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.call_id is None:
            return ToolResult("front-end tools need a call id to be answered", is_error=True)
        result = await self._calls.wait(ctx.session_id, ctx.call_id)
        return ToolResult(cap_result_text(result.content), is_error=result.is_error)


class ClientTools:
    """The front-end tools each session's client declared, and their waiting calls."""

    def __init__(self) -> None:
        self.calls = ClientCalls()
        self._sets: OrderedDict[str, dict[str, ClientTool]] = OrderedDict()

    def declare(self, session_id: str, specs: Iterable[ClientToolSpec]) -> None:
        """The session's client tools from now on (its runs started after this)."""
        self._sets[session_id] = {s.name: ClientTool(s, self.calls) for s in specs}
        self._sets.move_to_end(session_id)
        while len(self._sets) > MAX_SESSIONS:
            self._sets.popitem(last=False)

    def load(self, session_id: str, metadata: Mapping[str, Any]) -> None:
        """The declarations the record holds, unless this process knows the session's own."""
        if session_id not in self._sets:
            self.declare(session_id, specs_from_metadata(metadata))

    def tools(self, session_id: str) -> dict[str, ClientTool]:
        return self._sets.get(session_id, {})

    def is_client_tool(self, session_id: str, name: str) -> bool:
        return name in self._sets.get(session_id, {})
