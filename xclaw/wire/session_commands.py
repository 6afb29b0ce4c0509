"""[wire] The session's slash commands as the protocols answer them — `/steps [N]`, `/rollback sNNNN
[--confirm | --accept-irreversible | --retry]`, `/rollback --abandon`, `/fork sNNNN [title]`,
`/ps` — read once for every client: the gateway's `/rollback` (the WebSocket, the page,
AG-UI, A2A) and the editor's (`xclaw acp`, over the Python API). A rollback past outside effects says
first what it would undo and what it would leave done, with the command that goes on
(`preview_text`), and waits for `--confirm` (or `--accept-irreversible` when some stay done).

Leans on the wire's shapes only (a preview as `rollback_preview` / GET …/rollback/{step}
gives it): a client of the Python API and the gateway read it alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xclaw.views.outside_effects import describe_preview
from xclaw.wire.protocol import Command, parse_command

# What a message to an agent through a protocol (ACP, AG-UI, A2A) may carry instead of words
# for the model: time travel. The rest of the gateway's commands (/sessions, /share, …) are
# the terminal's and the page's.
# `/ps` only shows: the processes the session's commands left running (docs/containers.md).
PROTOCOL_COMMANDS = frozenset({"steps", "rollback", "fork", "ps"})
ROLLBACK_USAGE = (
    "usage: /rollback sNNNN [--confirm | --accept-irreversible | --retry], or /rollback "
    "--abandon — a step id shown by /steps"
)
ROLLBACK_FLAGS = frozenset({"--confirm", "--accept-irreversible", "--retry", "--abandon"})


def protocol_command(text: str) -> Command | None:
    """The command a protocol's message is, None for words that go to the model."""
    command = parse_command(text)
    if command is None or command.name not in PROTOCOL_COMMANDS:
        return None
    return command


@dataclass(frozen=True, slots=True)
class RollbackAsk:
    """What `/rollback …` asks for."""

    step: str | None  # None: `--abandon`
    confirm: bool = False
    accept_irreversible: bool = False
    retry: bool = False

    @property
    def abandon(self) -> bool:
        return self.step is None

    @property
    def previews(self) -> bool:
        """No flag: past outside effects, the preview comes first (nothing is done)."""
        return self.step is not None and not (
            self.confirm or self.accept_irreversible or self.retry
        )


def rollback_ask(args: Sequence[str]) -> RollbackAsk | None:
    """The arguments of `/rollback` read; None when they are not ROLLBACK_USAGE's."""
    flags = [a for a in args if a.startswith("--")]
    refs = [a for a in args if not a.startswith("--")]
    if any(f not in ROLLBACK_FLAGS for f in flags):
        return None
    if "--abandon" in flags:
        return RollbackAsk(None) if not refs and len(flags) == 1 else None
    if len(refs) != 1:
        return None
    return RollbackAsk(
        refs[0],
        confirm="--confirm" in flags,
        accept_irreversible="--accept-irreversible" in flags,
        retry="--retry" in flags,
    )


def needs_confirmation(preview: Mapping[str, Any]) -> bool:
    """Effects outside the workspace after the step (or a rollback stopped half-way): the
    rollback waits to be confirmed. Without any, it is the plain rewind, done at once."""
    return bool(
        preview.get("compensable")
        or preview.get("irreversible")
        or preview.get("undoneAlready")
        or preview.get("pending")
    )


def preview_text(preview: Mapping[str, Any]) -> str:
    """The preview in words, with the command that goes on."""
    text = describe_preview(preview)
    target = preview.get("stepId", "?")
    raw = preview.get("pending")
    pending: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    if pending and pending.get("stepId") != target:
        return text + (
            f"\n[rollback] a rollback to before {pending.get('stepId')} stopped half-way "
            f"({pending.get('planStepId')}): finish it (/rollback {pending.get('stepId')} "
            "--retry) or abandon it (/rollback --abandon) first"
        )
    if pending:
        return text + (
            f"\n[rollback] this rollback stopped half-way ({pending.get('planStepId')}): "
            f"/rollback {target} --retry runs what failed again, "
            f"/rollback {target} --accept-irreversible rewinds leaving it done, "
            "/rollback --abandon stops it"
        )
    if preview.get("irreversible"):
        return text + (
            f"\n[rollback] to roll back anyway, leaving those done: /rollback "
            f"{target} --accept-irreversible"
        )
    return text + f"\n[rollback] to undo them and roll back: /rollback {target} --confirm"
