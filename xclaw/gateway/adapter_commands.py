"""[gateway] A slash command sent through a protocol adapter (AG-UI's user message, A2A's message):
`/steps`, `/rollback …`, `/fork` (xclaw/wire/session_commands.py), run by the gateway's
CommandRunner exactly as the WebSocket runs it, so a rollback past outside effects is shown
first and undone only when confirmed, on every route alike.

Checked as the HTTP API checks (xclaw/gateway/access.py): a session the person has no part in
is one nobody has; a part too small for the command (a viewer rolling back) is refused. What
every attached client must see (a rollback rewrote the history) goes to them too."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from xclaw.errors import SessionNotFound
from xclaw.gateway.commands import COMMAND_NEEDS
from xclaw.gateway.context import Gateway
from xclaw.people.teams import Actor
from xclaw.wire.protocol import Command
from xclaw.wire.shapes import FrameJson


@dataclass
class Answered:
    """A command's answer, for an adapter to say in its own events."""

    text: str  # its notices, in words: what the person reads
    # The frames a client can do more with than words (`rollback_preview`, `rolledback`,
    # `steps`, `forked`), as the WebSocket sends them (docs/protocol.md).
    frames: list[FrameJson] = field(default_factory=list)
    # After a rollback: the conversation as the record now has it (a `history` frame).
    history: FrameJson | None = None


async def may_run(gw: Gateway, session_id: str, command: Command, who: Actor) -> None:
    """SessionNotFound for a session nobody has (or that the person has no part in),
    Forbidden for a part too small for the command. Before the command runs."""
    await gw.access.require(who.identity, session_id, COMMAND_NEEDS[command.name])
    if await asyncio.to_thread(gw.store.record.find_session, session_id) is None:
        raise SessionNotFound(session_id)


async def run_command(gw: Gateway, session_id: str, command: Command, who: Actor) -> Answered:
    """The command run (`may_run` checked first); its failures raise (XclawError: bad_command,
    bad_step, irreversible_effects, compensation_failed, busy, …)."""
    result = await gw.commands.run(session_id, command, who)
    for frame in result.broadcast:
        gw.hub.broadcast(session_id, frame)
    said: list[str] = []
    answered = Answered("")
    for frame in (*result.reply, *result.broadcast):
        kind = frame.get("type")
        if kind == "notice":
            said.append(str(frame.get("content", "")))
        elif kind == "history":
            answered.history = frame
        else:
            answered.frames.append(frame)
    answered.text = "\n".join(said)
    return answered
