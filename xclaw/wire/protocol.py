"""[wire] The client <-> gateway contract (docs/protocol.md): client frame parsing, the objects
server frames carry (a step, a session, a tree of steps), the slash-command syntax, and where
a local client finds the server's access token.

Client frames are validated with pydantic at the edge; server frames are built in one place,
xclaw/wire/build.py. Both sides import this module; the terminal client imports nothing from
the gateway.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationError,
)

from xclaw.agents.definition import NAME_RE
from xclaw.errors import BadFrame as BadFrame  # raised here; clients import it from here
from xclaw.llm.prices import PriceTable
from xclaw.people.answered_by import CLIENT_RE
from xclaw.store.steps.model import Session, Step, StepTreeNode, display_id, session_state
from xclaw.store.steps.rows import valid_unicode
from xclaw.views.record import step_cost, step_usage
from xclaw.wire.busy import BusyPolicy
from xclaw.wire.shapes import StepJson

# The access token's file, once defined here: still importable from here.
from xclaw.wire.token import TOKEN_FILE as TOKEN_FILE
from xclaw.wire.token import read_token as read_token
from xclaw.wire.token import token_path as token_path

MAX_FRAME_BYTES = 1_000_000
PROTOCOL_VERSION = 1
# A message's client-made id (`messageId`): 1-128 characters of A-Z a-z 0-9 . _ -, as a
# session id.
MESSAGE_ID_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"


class _Frame(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    v: int = PROTOCOL_VERSION
    token: StrictStr | None = None


class ReconnectFrame(_Frame):
    type: Literal["reconnect"]
    session_id: StrictStr | None = Field(default=None, alias="sessionId")


AGENT_NAME = NAME_RE.pattern


class MessageFrame(_Frame):
    type: Literal["message"]
    session_id: StrictStr | None = Field(default=None, alias="sessionId")
    content: StrictStr
    # The client's own id for this message: the gateway acknowledges it (`ack`) once the
    # message is recorded, and a resend of an id already recorded is acknowledged again,
    # never run twice (docs/protocol.md, "Sending a message exactly once").
    message_id: StrictStr | None = Field(
        default=None, alias="messageId", pattern=MESSAGE_ID_PATTERN
    )
    # The declared agent that runs it and the session's turns after it (docs/agents.md).
    agent: StrictStr | None = Field(default=None, pattern=AGENT_NAME)
    # What it does if the session's run is busy (xclaw/wire/busy.py); absent: the session's
    # policy, else the deployment's (`reject` unless xclaw.yaml says otherwise).
    busy: BusyPolicy | None = None


class ApprovalFrame(_Frame):
    type: Literal["approval"]
    session_id: StrictStr | None = Field(default=None, alias="sessionId")
    step_id: StrictStr = Field(alias="stepId")
    approve: StrictBool
    # Which client answers (`chat`, `web`, ...): a hint the record keeps beside the route
    # the answer came by (xclaw/people/answered_by.py). Lowercase letters, digits, `-`, `_`.
    client: StrictStr | None = Field(default=None, pattern=CLIENT_RE.pattern)
    # What the model is told with the answer, and the input the call runs with instead of
    # the model's (docs/approval.md).
    message: StrictStr | None = None
    input: dict[str, Any] | None = None


class CancelFrame(_Frame):
    type: Literal["cancel"]
    session_id: StrictStr | None = Field(default=None, alias="sessionId")


class PingFrame(_Frame):
    type: Literal["ping"]


ClientFrame = Annotated[
    ReconnectFrame | MessageFrame | ApprovalFrame | CancelFrame | PingFrame,
    Field(discriminator="type"),
]
_client_frame = TypeAdapter(ClientFrame)


def parse_client_frame(
    raw: str | bytes,
) -> ReconnectFrame | MessageFrame | ApprovalFrame | CancelFrame | PingFrame:
    """Raise BadFrame with a readable reason for anything that is not a valid frame."""
    if len(raw) > MAX_FRAME_BYTES:
        raise BadFrame(f"frame too large ({len(raw)} bytes; limit {MAX_FRAME_BYTES})")
    try:
        data = valid_unicode(json.loads(raw))
    except (ValueError, UnicodeDecodeError) as e:
        raise BadFrame(f"frame is not valid JSON: {e}") from None
    except RecursionError:
        raise BadFrame("frame is nested too deeply") from None
    if not isinstance(data, dict):
        raise BadFrame("frame must be a JSON object")
    kind = data.get("type")
    if kind not in ("reconnect", "message", "approval", "cancel", "ping"):
        raise BadFrame(
            f"unknown frame type {kind!r}; expected reconnect, message, approval, cancel or ping"
        )
    try:
        return _client_frame.validate_python(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "frame"
        raise BadFrame(f"{kind} frame: {where}: {first['msg']}") from None


# --- server frames ------------------------------------------------------------------------


def session_agent(metadata: Mapping[str, Any]) -> str | None:
    """The declared agent a session records it runs (None: xclaw's own, docs/agents.md)."""
    recorded = metadata.get("agent")
    name = recorded.get("name") if isinstance(recorded, Mapping) else None
    return name if isinstance(name, str) and name != "default" else None


def session_json(s: Session, *, busy: bool | None = None) -> dict[str, Any]:
    """A session as every listing, export and API response shows it (camelCase, as on the wire)."""
    out: dict[str, Any] = {
        "sessionId": s.session_id,
        "title": s.title,
        "status": s.status.value,
        "createdAt": s.created_at,
        "updatedAt": s.updated_at,
        "isForked": s.is_forked,
        "parentSessionId": s.parent_session_id,
        "forkedFromSeq": s.forked_from_seq,
        "forkedFrom": display_id(s.forked_from_seq) if s.forked_from_seq else None,
        "awaitingInput": s.awaiting_input,
        "metadata": s.metadata,
    }
    if busy is not None:
        out["busy"] = busy
    state = session_state(s, busy=bool(busy))
    out["state"] = state.key
    out["stateText"] = state.text
    return out


def tree_json(node: StepTreeNode, table: PriceTable) -> dict[str, Any]:
    """A step with its descendants. Iterative: a tree can be deeper than the recursion limit."""
    root: dict[str, Any] = {**step_json(node.step, table), "children": []}
    stack = [(node, root)]
    while stack:
        n, out = stack.pop()
        for child in n.children:
            c: dict[str, Any] = {**step_json(child.step, table), "children": []}
            out["children"].append(c)
            stack.append((child, c))
    return root


def step_json(st: Step, table: PriceTable) -> StepJson:
    """A trace row as the clients see it (the live trace view, /steps, the HTTP API); an
    llm_call's cost at `table`'s prices."""
    out: StepJson = {
        "id": st.display_id,
        "stepId": st.step_id,
        "seq": st.seq,
        "parent": st.parent_display_id,
        "type": st.step_type.value,
        "name": st.name,
        "status": st.status.value,
        "agent": st.agent,
        "input": st.input_data,
        "output": st.output_data,
        "error": st.error_message,
        "startTime": st.start_time,
        "endTime": st.end_time,
        "durationMs": st.duration_ms,
        "tokens": {"prompt": st.token_usage_prompt, "completion": st.token_usage_completion},
    }
    priced = llm_usage(st, table)
    if priced:
        out["usage"], out["cost"] = priced["usage"], priced["cost"]
    return out


def llm_usage(st: Step, table: PriceTable) -> dict[str, Any]:
    """An llm_call's token breakdown (cache reads/writes, reasoning) and estimated cost in
    dollars at `table`'s prices (null: a model without a price); nothing for other steps."""
    usage = step_usage(st)
    if usage is None:
        return {}
    cost = step_cost(st, table, usage)
    return {"usage": usage.to_json(), "cost": None if cost is None else round(cost, 6)}


# Slash commands: the gateway runs them (xclaw.gateway.commands); clients parse them only to
# know that a line is a command rather than text for the agent.
# `/word` followed by whitespace or the end: anything else starting with "/" ("/usr/bin is…")
# is ordinary user text for the agent.
_COMMAND_RE = re.compile(r"^/([A-Za-z][A-Za-z_-]*)(?:\s+(.*))?$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: tuple[str, ...]
    rest: str  # everything after the name, unsplit (a fork title may contain spaces)


def parse_command(text: str) -> Command | None:
    """A Command for `/name args…`, None for text that goes to the agent."""
    m = _COMMAND_RE.match(text.strip())
    if not m:
        return None
    rest = (m.group(2) or "").strip()
    return Command(name=m.group(1).lower(), args=tuple(rest.split()), rest=rest)


# --- the published schema ------------------------------------------------------------------


def frames_schema() -> dict[str, Any]:
    """Every WebSocket frame, both ways, as one JSON Schema (draft 2020-12): `ClientFrame`
    (above) and `ServerFrame` (xclaw/wire/frames.py), each a union on `type`. What `xclaw schema
    frames` prints and docs/frames.schema.json holds (tests/test_frames.py keeps them equal)."""
    from xclaw.wire.frames import ServerFrame

    defs: dict[str, Any] = {}
    for name, adapter in (
        ("ClientFrame", TypeAdapter(ClientFrame)),
        ("ServerFrame", TypeAdapter(ServerFrame)),
    ):
        schema = adapter.json_schema(by_alias=True, ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        defs[name] = schema
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://xclaw.dev/schema/frames.json",
        "title": "xclaw WebSocket frames (docs/protocol.md)",
        "description": "ClientFrame: what a client sends; ServerFrame: what the gateway sends. "
        "Clients must ignore frame types and fields they do not know.",
        "oneOf": [{"$ref": "#/$defs/ClientFrame"}, {"$ref": "#/$defs/ServerFrame"}],
        "$defs": dict(sorted(defs.items())),
    }
