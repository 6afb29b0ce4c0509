"""[acp] The session's slash commands as an editor offers them (`available_commands_update`):
`/steps [N]`, `/rollback sNNNN [--confirm | --accept-irreversible | --retry]`, `/rollback
--abandon`, `/fork sNNNN [title]`, `/ps` — the same as in `xclaw chat`, through the Python
API's methods (Session.steps, rollback_preview, rollback, fork, processes). Each answers with
text. A rollback past outside effects says first what it would undo and what it would leave
done, and waits for `--confirm`, in the words the gateway's `/rollback` says it
(xclaw/wire/session_commands.py: the commands' reading and the preview's words, shared by every
protocol)."""

from __future__ import annotations

import json

from acp.schema import AvailableCommand, AvailableCommandInput, UnstructuredCommandInput

from xclaw.api.base import Session
from xclaw.errors import XclawError
from xclaw.sandbox.container.listing import processes_text
from xclaw.views.outside_effects import describe_effect
from xclaw.wire.frames import Step
from xclaw.wire.http_bodies import RollbackAnswer
from xclaw.wire.protocol import parse_command
from xclaw.wire.session_commands import (
    PROTOCOL_COMMANDS,
    ROLLBACK_USAGE,
    needs_confirmation,
    preview_text,
    protocol_command,
    rollback_ask,
)

COMMANDS = [
    AvailableCommand(
        name="steps",
        description="the session's latest steps (default 20): ids to roll back or fork at",
        input=AvailableCommandInput(UnstructuredCommandInput(hint="[N]")),
    ),
    AvailableCommand(
        name="rollback",
        description=(
            "rewind the session to just before a step: its memory and the files; outside "
            "effects after it are shown first and undone on --confirm"
        ),
        input=AvailableCommandInput(
            UnstructuredCommandInput(hint="sNNNN [--confirm | --accept-irreversible | --retry]")
        ),
    ),
    AvailableCommand(
        name="fork",
        description="a new session branching after a step (files too); this one is unchanged",
        input=AvailableCommandInput(UnstructuredCommandInput(hint="sNNNN [title]")),
    ),
    AvailableCommand(
        name="ps",
        description=(
            "the processes the session's commands left running in the background (its "
            "container's), each with the step that started it"
        ),
    ),
]
NAMES = frozenset(c.name for c in COMMANDS)
assert NAMES == PROTOCOL_COMMANDS  # the editor offers what every protocol answers
# Answered while a run of the session is in flight, as `xclaw chat` answers them: they read
# the record (or copy what it holds: a fork) and neither start nor change a run (one driver).
# The other, /rollback, rewinds the record that run is writing (docs/editors.md).
BESIDE_A_RUN = frozenset({"steps", "ps", "fork"})


def is_command(text: str) -> bool:
    return protocol_command(text) is not None


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


def _rolled_back_text(answer: RollbackAnswer) -> str:
    lines = [
        f"Rolled back to just before {answer.step_id}: {answer.deleted} step(s) deleted, "
        "the files restored. The session waits for your next message."
    ]
    if answer.compensated:
        lines.append(f"Undone outside the workspace ({len(answer.compensated)}):")
        lines += [f"  {c.step_id} {c.action} undid {c.effect} {c.tool}" for c in answer.compensated]
    if answer.not_undone:
        lines.append(f"Left done ({len(answer.not_undone)}):")
        lines += [
            f"  {describe_effect(e.model_dump(by_alias=True, mode='json'))}"
            for e in answer.not_undone
        ]
    return "\n".join(lines)


async def _rollback(session: Session, args: tuple[str, ...]) -> str:
    ask = rollback_ask(args)
    if ask is None:
        return ROLLBACK_USAGE
    if ask.step is None:
        await session.abandon_rollback()
        return "The rollback that stopped half-way is abandoned: nothing more is undone."
    if ask.previews:
        preview = (await session.rollback_preview(ask.step)).model_dump(by_alias=True, mode="json")
        if needs_confirmation(preview):
            return preview_text(preview)
    answer = await session.rollback(
        ask.step, accept_irreversible=ask.accept_irreversible, retry=ask.retry
    )
    return _rolled_back_text(answer)


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
            return await _rollback(session, args)
        if command.name == "ps":
            if args:
                return "usage: /ps — it takes no argument"
            return processes_text((await session.processes()).wire())
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
