"""The session's slash commands as an editor offers them (`available_commands_update`):
`/steps [N]`, `/rollback sNNNN`, `/fork sNNNN [title]` — the same as in `xclaw chat`, through
the Python API's methods (Session.steps, rollback, fork). Each answers with text."""

from __future__ import annotations

import json

from acp.schema import AvailableCommand, AvailableCommandInput, UnstructuredCommandInput

from xclaw.api.base import Session
from xclaw.errors import XclawError
from xclaw.frames import Step
from xclaw.protocol import parse_command

COMMANDS = [
    AvailableCommand(
        name="steps",
        description="the session's latest steps (default 20): ids to roll back or fork at",
        input=AvailableCommandInput(UnstructuredCommandInput(hint="[N]")),
    ),
    AvailableCommand(
        name="rollback",
        description="rewind the session to just before a step: its memory and the files",
        input=AvailableCommandInput(UnstructuredCommandInput(hint="sNNNN")),
    ),
    AvailableCommand(
        name="fork",
        description="a new session branching after a step (files too); this one is unchanged",
        input=AvailableCommandInput(UnstructuredCommandInput(hint="sNNNN [title]")),
    ),
]
NAMES = frozenset(c.name for c in COMMANDS)


def is_command(text: str) -> bool:
    command = parse_command(text)
    return command is not None and command.name in NAMES


def _line(step: Step) -> str:
    what = step.input
    if step.type == "tool_call" and isinstance(what, dict):
        what = what.get("command") or what.get("path") or json.dumps(what, ensure_ascii=False)
    elif step.type == "llm_call":
        out = step.output if isinstance(step.output, dict) else {}
        what = out.get("text") or ", ".join(c.get("name", "?") for c in out.get("tool_calls", []))
    text = " ".join(str(what or "").split())
    text = text if len(text) <= 80 else text[:79] + "…"
    sub = "" if step.agent == "main" else f" [{step.agent}]"
    return f"{step.id}  {step.type:<12} {step.name:<14} {step.status:<9}{sub} {text}"


async def run_command(session: Session, text: str) -> str:
    """Carry out a command; its answer (an error is said, not raised)."""
    command = parse_command(text)
    assert command is not None
    args = command.args
    try:
        if command.name == "steps":
            n = int(args[0]) if args else 20
            if n <= 0:
                return "/steps N: N must be a positive number"
            steps = await session.steps(n)
            if not steps:
                return "No steps yet: this session starts with your first message."
            return "\n".join(_line(s) for s in steps)
        if command.name == "rollback":
            if len(args) != 1:
                return "usage: /rollback sNNNN"
            answer = await session.rollback(args[0])
            return (
                f"Rolled back to just before {answer.step_id}: {answer.deleted} step(s) deleted, "
                "the files restored. The session waits for your next message."
            )
        if command.name == "fork":
            if not args:
                return "usage: /fork sNNNN [title]"
            step_id, title = args[0], (" ".join(args[1:]) or None)
            new = await session.fork(step_id, title)
            return (
                f"Forked after {step_id}: session {new.id} ({new.title}), with its own copy of "
                "the files. This session is unchanged; open the fork from your editor's "
                "session list (session/load)."
            )
    except ValueError:
        return "/steps N: N must be a number"
    except XclawError as e:
        return f"/{command.name}: {e.message}"
    return f"unknown command /{command.name}"
