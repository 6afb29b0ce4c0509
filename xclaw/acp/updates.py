"""[acp] xclaw's events as ACP `session/update`s: pure functions from the Python API's typed
frames (xclaw/wire/frames.py) and the session's history to the SDK's update objects.

A tool call of xclaw is one `tool_call` (kind, title, input, where it works, the diff an edit
makes) followed by `tool_call_update`s (status, output). Its id is the xclaw step that runs
it (`s0012`), or, when a person was asked first, the approval step that asked (the call then
keeps that id: `ToolCalls` pairs the request with the run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

from xclaw.wire.frames import (
    ApprovalRequestFrame,
    AssistantMessage,
    HistoryMessage,
    SummaryMessage,
    ToolFrame,
    ToolResultMessage,
    UserMessage,
)

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
Update = AgentMessageChunk | AgentThoughtChunk | UserMessageChunk | ToolCallStart | ToolCallProgress
KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "view_file": "read",
    "list_dir": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "shell": "execute",
    "spawn_agent": "think",
}
# What an editor shows of a tool's output (the record keeps all of it).
MAX_SHOWN = 20_000


def tool_kind(name: str) -> ToolKind:
    if name in KINDS:
        return KINDS[name]
    low = name.lower()
    if "fetch" in low or "http" in low or "web" in low or "browse" in low:
        return "fetch"
    if "search" in low or "grep" in low or "find" in low:
        return "search"
    return "other"


def _args(data: Any) -> dict[str, Any]:
    return data if isinstance(data, dict) else {}


def tool_title(name: str, data: Any, agent: str | None = None) -> str:
    a = _args(data)
    if name == "shell" and isinstance(a.get("command"), str):
        title = f"$ {a['command']}"
    elif isinstance(a.get("path"), str):
        title = f"{name} {a['path']}"
    else:
        title = name
    title = title if len(title) <= 200 else title[:199] + "…"
    return f"[{agent}] {title}" if agent and agent != "main" else title


def _where(root: Path | None, rel: str) -> str:
    return str(root / rel) if root is not None else rel


def locations(name: str, data: Any, root: Path | None) -> list[ToolCallLocation] | None:
    path = _args(data).get("path")
    if root is None or not isinstance(path, str) or name not in KINDS:
        return None
    return [ToolCallLocation(path=_where(root, path))]


def edit_content(name: str, data: Any, root: Path | None) -> list[Any] | None:
    """The diff an edit makes, as ACP shows one: the text replaced and its replacement."""
    a = _args(data)
    path = a.get("path")
    if not isinstance(path, str):
        return None
    if name == "write_file" and isinstance(a.get("content"), str):
        return [tool_diff_content(_where(root, path), a["content"], None)]
    if name == "edit_file" and isinstance(a.get("new_text"), str):
        old = a.get("old_text")
        return [
            tool_diff_content(
                _where(root, path), a["new_text"], old if isinstance(old, str) else None
            )
        ]
    return None


def output_text(output: Any) -> str:
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    if len(text) > MAX_SHOWN:
        text = text[:MAX_SHOWN] + f"\n… ({len(text) - MAX_SHOWN} more characters in the record)"
    return text


def started(
    call_id: str, name: str, data: Any, root: Path | None, *, status: str, agent: str | None = None
) -> ToolCallStart:
    return start_tool_call(
        call_id,
        tool_title(name, data, agent),
        kind=tool_kind(name),
        status=status,  # type: ignore[arg-type]
        content=edit_content(name, data, root),
        locations=locations(name, data, root),
        raw_input=data,
    )


def finished(call_id: str, failed: bool, output: Any) -> ToolCallProgress:
    shown = [tool_content(text_block(output_text(output)))] if output not in (None, "") else None
    return update_tool_call(
        call_id, status="failed" if failed else "completed", content=shown, raw_output=output
    )


@dataclass
class ToolCalls:
    """Which ACP tool call an xclaw frame belongs to: an approval request opens one (pending),
    and the run of the same call (same tool, same input) goes on under its id."""

    root: Path | None
    asked: dict[str, str] = field(default_factory=dict)  # call signature -> ACP id
    running: dict[str, str] = field(default_factory=dict)  # xclaw step id -> ACP id
    seen: set[str] = field(default_factory=set)  # xclaw tool steps shown

    def missed(self, step_id: str) -> bool:
        """A tool step not shown yet (its frames were missed): True once."""
        if step_id in self.seen:
            return False
        self.seen.add(step_id)
        return True

    @staticmethod
    def _signature(name: str, data: Any) -> str:
        return name + "\0" + json.dumps(data, sort_keys=True, default=str)

    def approval(self, frame: ApprovalRequestFrame) -> ToolCallStart:
        self.asked[self._signature(frame.name, frame.input)] = frame.step_id
        return started(
            frame.step_id, frame.name, frame.input, self.root, status="pending", agent=frame.agent
        )

    def tool(self, frame: ToolFrame) -> Update:
        self.seen.add(frame.step_id)
        if frame.state == "running":
            # Paired with the approval request that asked about it, if any was asked (the
            # signature is a JSON dump of the input: not made for every call of a run).
            asked = self.asked
            call_id = asked.pop(self._signature(frame.name, frame.input), None) if asked else None
            if call_id is not None:
                self.running[frame.step_id] = call_id
                return update_tool_call(call_id, status="in_progress")
            self.running[frame.step_id] = frame.step_id
            return started(
                frame.step_id,
                frame.name,
                frame.input,
                self.root,
                status="in_progress",
                agent=frame.agent,
            )
        call_id = self.running.pop(frame.step_id, frame.step_id)
        return finished(call_id, frame.state == "failed", frame.output)

    def refused(self, frame: ApprovalRequestFrame, why: str) -> ToolCallProgress:
        """A call a person (or a standing answer) refused: it never runs."""
        self.asked.pop(self._signature(frame.name, frame.input), None)
        return update_tool_call(
            frame.step_id, status="failed", content=[tool_content(text_block(why))]
        )


def history_updates(messages: list[HistoryMessage], root: Path | None) -> list[Update]:
    """The conversation so far, as an editor replays it on `session/load`: the user's
    messages, the agent's answers and reasoning, each tool call with its result."""
    out: list[Update] = []
    calls: dict[str, tuple[str, Any]] = {}
    for m in messages:
        if isinstance(m, UserMessage):
            out.append(update_user_message_text(m.text))
        elif isinstance(m, SummaryMessage):
            out.append(
                update_agent_thought_text(f"[summary of the earlier conversation]\n{m.text}")
            )
        elif isinstance(m, AssistantMessage):
            for block in m.thinking or ():
                if block.thinking:
                    out.append(update_agent_thought_text(block.thinking))
            if m.text:
                out.append(update_agent_message_text(m.text))
            for call in m.tool_calls:
                calls[call.id] = (call.name, call.input)
                out.append(started(call.id, call.name, call.input, root, status="pending"))
        elif isinstance(m, ToolResultMessage):
            if m.running:
                out.append(update_tool_call(m.tool_call_id, status="in_progress"))
            else:
                out.append(finished(m.tool_call_id, m.is_error, m.content))
    return out
