"""[gateway] Slash commands, handled in the gateway so every channel (terminal, web page, a client
written for the original tutorial — *the seed*, docs/architecture.md glossary —, anyone's
script) gets the same `/steps`, `/rollback`, `/fork`, `/sessions` and `/help`.

A command answers with frames: a `notice` that shows the result as text (what the tutorial's
clients print) plus, where a client can do better with structure, `steps` / `forked` frames.
Frames for the requesting socket only go in `reply`; frames every socket attached to the
session must see (a rollback rewrote its history) go in `broadcast`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xclaw.errors import BadCommand, XclawError
from xclaw.gateway.access import SessionAccess
from xclaw.gateway.runtime_seam import GatewayRuntime
from xclaw.people.teams import SERVER_TOKEN, SHARE_ROLES, Actor, Need, ShareRole, TeamError
from xclaw.store.base import RecordReader, TeamStore
from xclaw.store.steps.model import Session, display_id
from xclaw.views import record as views
from xclaw.views.outside_effects import outside_note, outside_steps, owned_note
from xclaw.wire import session_commands
from xclaw.wire.build import (
    for_session,
    forked_frame,
    notice_frame,
    queue_frame,
    rollback_notice,
    rollback_preview_frame,
    rolledback_frame,
    steps_frame,
)
from xclaw.wire.busy import BUSY_POLICIES, check_policy, session_policy
from xclaw.wire.protocol import Command
from xclaw.wire.session_commands import ROLLBACK_USAGE, rollback_ask
from xclaw.wire.shapes import FrameJson, RollbackPreviewJson

if TYPE_CHECKING:
    from xclaw.runtime.rollbacks import Preview
    from xclaw.store.queue.sql import QueuedInput

log = logging.getLogger("xclaw.gateway")

DEFAULT_STEPS = 10
MAX_STEPS = 500
SESSIONS_LISTED = 20
MAX_TITLE = 200

# Handled by the socket itself (they re-attach it): xclaw.gateway.ws.Connection._switch.
ATTACH_COMMANDS = ("switch", "new")

HELP_TEXT = """\
commands:
  /steps [N]            list the session's latest N steps (default 10)
  /rollback sNNNN       rewind this session to just before that step (later steps are deleted);
                        past outside effects it first shows what it undoes and what not:
                        --confirm to go on, --accept-irreversible if some stay done
  /rollback sNNNN --retry   a rollback that stopped half-way: run its compensations again
  /rollback --abandon   stop a rollback that stopped half-way (nothing more is undone)
  /fork sNNNN [title]   branch a new session from that step; this session stays as it is
  /sessions             list recent sessions
  /tools                list the tools (built-in, Python, MCP) and their policies
  /ps                   the processes this session's commands left running in its container
  /compact              summarise the conversation so far (later turns start from it)
  /switch ID            attach to an existing session (a unique prefix of its id is enough)
  /new [title]          start a new session (saved at once with a title, else with its first message)
  /new --agent NAME [title]
                        the same, running a declared agent (see /agents)
  /agents               list the agents a session may run here
  /title TEXT           rename this session
  /queue                list the messages waiting for the run in flight
  /unqueue N|ID|all     cancel a waiting message (its number in /queue, or its id), or all
  /busy [POLICY]        what a message sent while the agent works does in this session:
                        reject, queue, steer or interrupt; `default`: the server's; alone: show
  /share [USER ROLE]    share this session: ROLE viewer, approver, collaborator or remove;
                        alone: who it is shared with
  /help                 this text"""

# What each command needs of the person on the session it addresses (docs/teams.md); the
# rest (/sessions, /tools, /help, /new, /switch) only show or choose their own sessions.
COMMAND_NEEDS = {
    "steps": Need.READ,
    "ps": Need.READ,
    "rollback": Need.ACT,
    "fork": Need.ACT,
    "compact": Need.ACT,
    "title": Need.ACT,
    "share": Need.OWN,
    "queue": Need.READ,
    "unqueue": Need.ACT,
    "busy": Need.ACT,
}
# Who acts when a command is run without saying (a test, the runtime's own use).
_ADMIN = Actor(SERVER_TOKEN, "websocket")


class CommandError(BadCommand):
    """A slash command that cannot run as typed (unknown name, missing argument)."""


UNQUEUE_USAGE = "usage: /unqueue N|ID|all — N: a number /queue shows"


def queue_text(entries: list[QueuedInput]) -> str:
    """`/queue`'s listing: a line per waiting message, in the order they run."""
    if not entries:
        return "[queue] no message is waiting"
    lines = [f"[queue] {len(entries)} waiting (cancel one with /unqueue N):"]
    for n, e in enumerate(entries, 1):
        text = " ".join(e.content.split())
        short = text if len(text) <= 60 else text[:59] + "…"
        lines.append(f"  {n}. [{e.mode}] “{short}”  ({e.id})")
    return "\n".join(lines)


def session_title(text: str) -> str:
    """A title typed after /title or /new: whitespace folded; too long is refused."""
    title = " ".join(text.split())
    if len(title) > MAX_TITLE:
        raise CommandError(
            f"a title has at most {MAX_TITLE} characters (this one has {len(title)})"
        )
    return title


@dataclass
class CommandResult:
    reply: list[FrameJson] = field(default_factory=list)
    broadcast: list[FrameJson] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RollbackOutcome:
    session: Session
    step_id: str  # display id of the target step: the session now ends just before it
    deleted: int
    frames: CommandResult
    # After undoing outside effects: the compensations run, the effects left done.
    compensated: list[dict[str, Any]] = field(default_factory=list)
    not_undone: list[dict[str, Any]] = field(default_factory=list)


def preview_frame(session_id: str, preview: Preview) -> RollbackPreviewJson:
    """The `rollback_preview` frame: what `/rollback sNNNN --confirm` would undo, and not."""
    return rollback_preview_frame({**preview.as_json(), "sessionId": session_id})


def preview_text(preview: Preview) -> str:
    """The preview in words, with the command that goes on (xclaw/wire/session_commands.py)."""
    return session_commands.preview_text(preview.as_json())


def sessions_text(
    sessions: list[Session], current: str, busy: Callable[[str], bool] = lambda _sid: False
) -> str:
    return (
        views.format_sessions(sessions, busy=busy)
        + f"\n\nthis session: {current}\nuse /switch ID (a unique prefix will do) to attach to another one"
    )


class CommandRunner:
    """Runs slash commands against the runtime (time travel) and the store (listings)."""

    def __init__(
        self,
        runtime: GatewayRuntime,
        store: RecordReader,
        access: SessionAccess | None = None,
        teams: TeamStore | None = None,
    ) -> None:
        self.runtime = runtime
        self.store = store
        self.access = access or SessionAccess(store, teams)
        self.teams = teams

    async def run(self, session_id: str, cmd: Command, who: Actor = _ADMIN) -> CommandResult:
        """Raises XclawError subclasses (bad_command, bad_step, busy, unknown_session,
        forbidden): the caller turns them into `error` frames. The caller has checked that
        `who` may do COMMAND_NEEDS[cmd.name] to the session."""
        if cmd.name == "steps":
            return await self._steps(session_id, cmd)
        if cmd.name == "rollback":
            return await self._rollback(session_id, cmd, who)
        if cmd.name == "fork":
            return await self._fork(session_id, cmd, who)
        if cmd.name == "sessions":
            return await self._sessions(session_id, who)
        if cmd.name == "share":
            return await self._share(session_id, cmd, who)
        if cmd.name == "tools":
            return await self._tools(session_id)
        if cmd.name == "ps":
            if cmd.args:
                raise CommandError("usage: /ps — it takes no argument")
            listing = await self.runtime.processes(session_id)
            return CommandResult(reply=[notice_frame(listing.text(), session_id)])
        if cmd.name == "agents":
            return CommandResult(reply=[notice_frame(self._agents(), session_id)])
        if cmd.name == "compact":
            # Runs like a turn; its `[compact]` notice (to every client) says how it went.
            await self.runtime.compact(session_id)
            return CommandResult()
        if cmd.name == "help":
            return CommandResult(reply=[notice_frame(HELP_TEXT, session_id)])
        if cmd.name == "title":
            return await self._title(session_id, cmd)
        if cmd.name == "queue":
            return await self._queue(session_id)
        if cmd.name == "unqueue":
            return await self._unqueue(session_id, cmd)
        if cmd.name == "busy":
            return await self._busy(session_id, cmd)
        if cmd.name in ATTACH_COMMANDS:
            raise CommandError(
                f"/{cmd.name} re-attaches a socket: send it on the socket itself, or send "
                '{"type":"reconnect","sessionId":ID}'
            )
        raise CommandError(f"unknown command /{cmd.name}; try /help")

    async def _steps(self, session_id: str, cmd: Command) -> CommandResult:
        n = DEFAULT_STEPS
        if cmd.args:
            try:
                if not (cmd.args[0].isascii() and cmd.args[0].isdigit()):
                    raise ValueError(cmd.args[0])  # int() would read "٣" as 3
                n = int(cmd.args[0])
            except ValueError:
                raise CommandError(
                    f"usage: /steps [N] — N must be a number, got {cmd.args[0]!r}"
                ) from None
            if not 1 <= n <= MAX_STEPS:
                raise CommandError(f"usage: /steps [N] — N must be between 1 and {MAX_STEPS}")
        steps = await asyncio.to_thread(self.runtime.steps, session_id, n)
        return CommandResult(
            reply=[
                # The original tutorial's /steps listing with usage hints, as `xclaw steps`
                # prints it (with what people did that no step shows, docs/teams.md).
                notice_frame(
                    views.format_steps(
                        steps,
                        session_id,
                        self.runtime.prices,
                        actions=await self._actions(session_id),
                    ),
                    session_id,
                ),
                steps_frame(session_id, steps, self.runtime.prices),
            ]
        )

    async def _rollback(self, session_id: str, cmd: Command, who: Actor) -> CommandResult:
        ask = rollback_ask(cmd.args)
        if ask is None:
            raise CommandError(ROLLBACK_USAGE)
        if ask.step is None:
            return await self.abandon(session_id, who)
        if ask.previews:
            # Past outside effects, the rollback first says what it would undo and what not.
            preview = await self.runtime.rollback_preview(session_id, ask.step)
            if not preview.plain:
                return CommandResult(
                    reply=[
                        notice_frame(preview_text(preview), session_id),
                        preview_frame(session_id, preview),
                    ]
                )
        done = await self.rollback(
            session_id, ask.step, who, accept=ask.accept_irreversible, retry=ask.retry
        )
        return done.frames

    async def rollback(
        self,
        session_id: str,
        ref: str,
        who: Actor = _ADMIN,
        *,
        accept: bool = False,
        retry: bool = False,
    ) -> RollbackOutcome:
        """Rollback, shared by `/rollback` and the HTTP API: undo the outside effects after
        `ref` (their compensations), rewind, then tell every attached client (the deleted
        steps are gone from the history they show). Logged with who."""
        result = await self.runtime.rollback(
            session_id, ref, accept_irreversible=accept, retry=retry, by=who.by()
        )
        target = display_id(result.target_seq)
        compensated, not_undone = result.compensated_json(), result.not_undone_json()
        detail: dict[str, Any] = {"stepId": target, "deleted": result.deleted}
        if compensated:
            detail["compensated"] = [c["stepId"] for c in compensated]
        await self.record(session_id, "rollback", who, detail)
        text = rollback_notice(target)
        if result.text():
            text += "\n" + result.text()
        history = await asyncio.to_thread(self.runtime.history_frame, session_id)
        undone = result.plan is not None  # outside effects were undone (or accepted as done)
        frames = CommandResult(
            broadcast=[
                notice_frame(text, session_id),
                rolledback_frame(
                    target,
                    result.deleted,
                    session_id,
                    compensated=compensated if undone else None,
                    not_undone=not_undone if undone else None,
                ),
                for_session(history, session_id),
            ]
        )
        return RollbackOutcome(
            result.session, target, result.deleted, frames, compensated, not_undone
        )

    async def abandon(self, session_id: str, who: Actor = _ADMIN) -> CommandResult:
        """`/rollback --abandon`: a rollback that stopped half-way stops for good."""
        plan = await self.runtime.abandon_rollback(session_id, by=who.by())
        await self.record(session_id, "rollback", who, {"abandoned": plan.display_id})
        text = (
            f"[rollback] the rollback {plan.display_id} is abandoned: nothing more is undone, "
            "memory and files stay as they are (what was undone is in /steps)"
        )
        return CommandResult(broadcast=[notice_frame(text, session_id)])

    async def fork(
        self, session_id: str, ref: str, title: str | None, who: Actor = _ADMIN
    ) -> Session:
        """Fork, shared by `/fork` and the HTTP API: the new session belongs to whoever made
        it, and says so (a `fork` action naming where it came from)."""
        new = await self.runtime.fork(session_id, ref, title)
        if self.teams is not None and who.user is not None:
            await asyncio.to_thread(self.teams.claim_session, new.session_id, who.user)
        step = display_id(new.forked_from_seq) if new.forked_from_seq else ref
        await self.record(
            new.session_id, "fork", who, {"fromSessionId": session_id, "fromStepId": step}
        )
        return new

    async def _actions(self, session_id: str) -> list[tuple[str, str | None, int, dict[str, Any]]]:
        """Shown once the server has users: alone, everything is the admin's doing."""
        if self.teams is None or not await asyncio.to_thread(self.teams.users):
            return []
        found = await asyncio.to_thread(self.teams.session_actions, session_id)
        return [(a.kind, a.user, a.created_at, a.detail) for a in found]

    async def record(
        self, session_id: str, kind: str, who: Actor, detail: dict[str, Any] | None = None
    ) -> None:
        """Log who did it (xclaw/store/teams/sql.py); a log that cannot be written (a full
        disk) does not undo what was done."""
        if self.teams is None:
            return
        try:
            await asyncio.to_thread(self.teams.record_action, session_id, kind, who.user, detail)
        except XclawError as e:
            log.warning(
                "event=action_not_logged session=%s kind=%s error=%r", session_id, kind, e.message
            )

    async def _fork(self, session_id: str, cmd: Command, who: Actor) -> CommandResult:
        if not cmd.args:
            raise CommandError("usage: /fork sNNNN [title] — a step id shown by /steps")
        ref = cmd.args[0]
        title = cmd.rest[len(ref) :].strip() or None
        outside = await asyncio.to_thread(self._outside, session_id, ref, after=True)
        owned = await asyncio.to_thread(self._owned, session_id, ref)
        new = await self.fork(session_id, ref, title, who)
        step_ref = display_id(new.forked_from_seq) if new.forked_from_seq else ref
        text = (
            f"[fork] new session created: {new.session_id}\n"
            "connect with this session ID to continue on the forked branch "
            f"(/switch {new.session_id}).\n"
            f"original session {session_id} is unchanged."
        )
        if outside:
            text += f"\n[fork] in the original session after that step, {outside}"
        if owned:
            text += f"\n[fork] {owned}"
        return CommandResult(
            reply=[
                notice_frame(text, session_id),
                forked_frame(new.session_id, session_id, step_ref, new.title),
            ]
        )

    async def _title(self, session_id: str, cmd: Command) -> CommandResult:
        title = session_title(cmd.rest)
        if not title:
            raise CommandError("usage: /title TEXT — the session's new title")
        # Every attached client gets `renamed`; the title as stored (redacted).
        session = await self.runtime.rename(session_id, title)
        return CommandResult(
            reply=[notice_frame(f"[title] this session is now “{session.title}”", session_id)]
        )

    # --- input while a run is busy (xclaw/wire/busy.py) -----------------------------------------
    async def _queue(self, session_id: str) -> CommandResult:
        entries = await self.runtime.queued(session_id)
        frame = for_session(queue_frame([e.to_json() for e in entries]), session_id)
        return CommandResult(reply=[notice_frame(queue_text(entries), session_id), frame])

    async def _unqueue(self, session_id: str, cmd: Command) -> CommandResult:
        if len(cmd.args) != 1:
            raise CommandError(UNQUEUE_USAGE)
        entries = await self.runtime.queued(session_id)
        which = cmd.args[0]
        if which == "all":
            chosen = entries
        elif which.isdigit() and 1 <= int(which) <= len(entries):
            chosen = [entries[int(which) - 1]]
        else:
            chosen = [e for e in entries if e.id == which]
        if not chosen:
            raise CommandError(f"no waiting message {which!r} (see /queue); {UNQUEUE_USAGE}")
        gone = [e for e in chosen if await self.runtime.unqueue(session_id, e.id) is not None]
        words = f"[queue] cancelled {len(gone)} waiting message{'s' if len(gone) != 1 else ''}"
        return CommandResult(reply=[notice_frame(words, session_id)])

    async def _busy(self, session_id: str, cmd: Command) -> CommandResult:
        deployment = self.runtime.settings.input.busy
        if not cmd.args:
            session = await asyncio.to_thread(self.store.get_session, session_id)
            own = session_policy(session.metadata)
            text = (
                f"[busy] {own} (this session's own; the server's is {deployment})"
                if own is not None
                else f"[busy] {deployment} (the server's)"
            )
            return CommandResult(reply=[notice_frame(text, session_id)])
        word = cmd.args[0]
        if len(cmd.args) != 1 or (word != "default" and word not in BUSY_POLICIES):
            raise CommandError(f"usage: /busy [{' | '.join(BUSY_POLICIES)} | default]")
        policy = None if word == "default" else check_policy(word)
        await self.runtime.set_busy_policy(session_id, policy)
        text = f"[busy] {policy or deployment}" + (" (the server's)" if policy is None else "")
        return CommandResult(reply=[notice_frame(text, session_id)])

    async def _tools(self, session_id: str) -> CommandResult:
        from xclaw.tools.approval import ApprovalPolicy
        from xclaw.tools.listing import format_listing, server_rows, tool_rows

        toolbox = self.runtime.toolbox
        await toolbox.prepare()  # MCP servers start here if no run has started them yet
        policy = ApprovalPolicy.from_settings(self.runtime.settings.tool_setup())
        tools = tool_rows(toolbox.tools, policy)
        servers = await server_rows(toolbox.mcp, start=False)
        text = format_listing(tools, servers, self.runtime.settings.approval.mode)
        return CommandResult(reply=[notice_frame(text, session_id)])

    def _agents(self) -> str:
        """The agents a session may run here (docs/agents.md), as /agents lists them."""
        rows = self.runtime.agents.listing()
        width = max(len(a["name"]) for a in rows)
        lines = []
        for a in rows:
            extra = [f"output {a['output']}"] if a["output"] else []
            extra += [f"model {a['model']}"] if a["model"] else []
            extra += [f"sub-agents {', '.join(a['subAgents'])}"] if a["subAgents"] else []
            said = a["description"] + (f" ({'; '.join(extra)})" if extra else "")
            lines.append(f"  {a['name']:<{width}}  {said}".rstrip())
        return (
            "[agents] a session runs one of these (default: xclaw's own):\n"
            + "\n".join(lines)
            + "\nstart a session with one: /new --agent NAME [title]"
        )

    def _outside(self, session_id: str, ref: str, *, after: bool) -> str:
        """The note on steps at (rollback) or after (fork) `ref` with effects outside the
        workspace; "" when none (or when the reference is bad: the command says so)."""
        try:
            target = self.store.get_step(session_id, ref)
            marks = outside_steps(self.store.steps(session_id), target.seq + (1 if after else 0))
        except XclawError:
            return ""
        return outside_note(marks)

    def _owned(self, session_id: str, ref: str) -> str:
        """The note on outside effects the fork copies (up to `ref`): the original owns them."""
        try:
            target = self.store.get_step(session_id, ref)
            return owned_note(self.store.steps(session_id), target.seq, session_id)
        except XclawError:
            return ""

    async def _sessions(self, session_id: str, who: Actor) -> CommandResult:
        sessions = await self.access.sessions(who.identity, limit=SESSIONS_LISTED)
        text = sessions_text(sessions, session_id, busy=self.runtime.is_busy)
        return CommandResult(reply=[notice_frame(text, session_id)])

    async def _share(self, session_id: str, cmd: Command, who: Actor) -> CommandResult:
        """`/share USER ROLE`, `/share USER remove`, or `/share` alone: who has which part."""
        if self.teams is None:
            raise CommandError("this server keeps no users: nothing to share with")
        teams = self.teams
        if not cmd.args:
            shares = await asyncio.to_thread(teams.shares, session_id)
            lines = [f"  {s.user:<20} {s.role.value}" for s in shares]
            owner = "" if any(s.role is ShareRole.OWNER for s in shares) else "  (owner: admin)\n"
            text = f"[share] session {session_id}:\n{owner}" + (
                "\n".join(lines) if lines else "  shared with nobody"
            )
            return CommandResult(reply=[notice_frame(text, session_id)])
        words = [r.value for r in SHARE_ROLES]
        if len(cmd.args) != 2 or cmd.args[1] not in (*words, "remove"):
            raise CommandError(f"usage: /share USER {'|'.join(words)}|remove")
        user, role = cmd.args
        try:
            if role == "remove":
                gone = await asyncio.to_thread(teams.unshare_session, session_id, user, by=who.user)
                text = (
                    f"[share] {user} {'no longer has' if gone else 'had no'} part in this session"
                )
            else:
                had = await asyncio.to_thread(
                    teams.share_session, session_id, user, ShareRole(role), by=who.user
                )
                was = f" (was {had.value})" if had is not None else ""
                text = f"[share] this session is shared with {user} as {role}{was}"
        except TeamError as e:
            raise CommandError(e.message) from None
        self.access.forget(session_id)
        return CommandResult(reply=[notice_frame(text, session_id)])
