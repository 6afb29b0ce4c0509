"""The approval policy: which tool calls run at once, which wait for a human, which never run.

Pure and synchronous: it reads the tool and its arguments, nothing else. The agent loop asks it
before every call and adds its own rule on top (a call that may repeat an interrupted side
effect is always asked). Modes, as other agent CLIs have taught users:

    ask         edits and shell commands are asked, except shell commands made only of
                safe commands (read with a real shell parser, options on a per-command
                allowlist), which run confined in the sandbox — and only when there is one;
                read-only tools and sub-agents run.
    auto-edits  like ask, but write_file and edit_file run without asking (except inside a
                `.git` directory: hooks and config there run programs later).
    yolo        everything runs.

In every mode a shell command matching a deny pattern is refused outright. See docs/approval.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from xclaw.config import DEFAULT_DENIED_PATTERNS, DEFAULT_SAFE_COMMANDS, Settings
from xclaw.errors import ConfigError
from xclaw.tools.base import Tool
from xclaw.tools.command_rules import check_arguments, rule_for
from xclaw.tools.shell_reading import NotSafe, simple_commands
from xclaw.tools.traits import approval_for

__all__ = [
    "ALLOW",
    "ALLOW_CONFINED",
    "ASK",
    "DENY",
    "ApprovalPolicy",
    "Decision",
    "NotSafe",
    "simple_commands",
]

MODES = ("ask", "auto-edits", "yolo")
SHELL_TOOLS = frozenset({"shell"})
EDIT_TOOLS = frozenset({"write_file", "edit_file"})
# Run without asking: every step the sub-agent takes goes through this policy itself.
DELEGATING_TOOLS = frozenset({"spawn_agent"})


@dataclass(frozen=True, slots=True)
class Decision:
    """`confine`: allowed on the strength of reading the command, not a human's yes, so the
    tool runs it where a wrong reading costs nothing (see ShellTool, Isolation.wrap)."""

    kind: Literal["allow", "ask", "deny"]
    reason: str = ""
    confine: bool = False


ALLOW = Decision("allow")


def ASK(reason: str) -> Decision:  # named like the constant ALLOW beside it
    return Decision("ask", reason)


def DENY(reason: str) -> Decision:
    return Decision("deny", reason)


def ALLOW_CONFINED(why: str = "") -> Decision:
    """Runs without asking, but confined: read-only workspace, scratch /tmp, no network."""
    return Decision("allow", why, confine=True)


def _inside_git(path: Any) -> bool:
    """Whether an edit touches a `.git` directory: hooks and config there (`core.fsmonitor`,
    `core.hooksPath`, `diff.external`) run programs when the owner later approves an
    innocent-looking `git commit` or `git status`, so such edits are asked even in
    auto-edits. (A path that is not a string: the tool refuses it without doing anything.)"""
    if not isinstance(path, str):
        return False
    return any(part.lower() == ".git" for part in re.split(r"[/\\]+", path))


class ApprovalPolicy:
    """Decides ALLOW, ASK(reason) or DENY(reason) for one tool call."""

    def __init__(
        self,
        mode: str = "ask",
        safe_commands: Iterable[str] = DEFAULT_SAFE_COMMANDS,
        denied_patterns: Iterable[str] = DEFAULT_DENIED_PATTERNS,
        confinement: bool | None = None,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"approval mode {mode!r}: expected ask, auto-edits or yolo")
        self.mode = mode
        # An entry may be several words ("git status"): the command must start with all of
        # them; words after them that start with "-" are the options it may have.
        self.safe_commands = tuple(tuple(s.split()) for s in safe_commands if s.split())
        # Whether a command can be run confined (bubblewrap works here): without it nothing
        # runs unasked, since a wrong "safe" would then cost something.
        if confinement is None:
            from xclaw.sandbox.isolation import confinement_available

            confinement = confinement_available()
        self.confinement = confinement
        self.denied: list[re.Pattern[str]] = []
        for pattern in denied_patterns:
            try:
                self.denied.append(re.compile(pattern))
            except re.error as e:
                raise ConfigError(f"approval deny pattern {pattern!r} is not a regex: {e}") from e

    @classmethod
    def from_settings(cls, settings: Settings) -> ApprovalPolicy:
        from xclaw.sandbox.isolation import isolation_from_settings

        confined = isolation_from_settings(settings).can_confine
        return cls(
            settings.approval_mode, settings.safe_commands, settings.denied_patterns, confined
        )

    def decide(self, tool: Tool, args: dict[str, Any]) -> Decision:
        traits = tool.traits
        if traits is not None:  # an MCP or Python tool: its declared traits decide
            kind, reason = approval_for(traits, tool.name, self.mode)
            return ALLOW if kind == "allow" else ASK(reason)
        if tool.name in SHELL_TOOLS:
            return self._shell(args.get("command") if isinstance(args, dict) else None)
        if self.mode == "yolo" or tool.read_only or tool.name in DELEGATING_TOOLS:
            return ALLOW
        if tool.name in EDIT_TOOLS:
            path = args.get("path") if isinstance(args, dict) else None
            if self.mode == "auto-edits":
                if not _inside_git(path):
                    return ALLOW
                return ASK(
                    f"{tool.name} changes {path!r} inside .git (its hooks and config run "
                    "programs later), so it is asked even in auto-edits"
                )
            return ASK(f"{tool.name} changes {path!r}" if isinstance(path, str) else tool.name)
        return ASK(f"{tool.name} may change things (it is not read-only)")

    def _shell(self, command: Any) -> Decision:
        if not isinstance(command, str):
            # Nothing would run: the shell tool refuses input without a string command and
            # tells the model why. Asking a human about it would only stall the run.
            return ALLOW
        for pattern in self.denied:
            if match := pattern.search(command):
                return DENY(
                    f"refused by policy: matches {match.group(0).strip()!r} "
                    f"(deny pattern {pattern.pattern})"
                )
        if self.mode == "yolo":
            return ALLOW
        why = self.why_not_safe(command)
        if why is not None:
            return ASK(f"shell command {why}")
        if not self.confinement:
            return ASK("shell command: no sandbox is available here, so every command is asked")
        return ALLOW_CONFINED("only listed commands with allowed options; run confined")

    def why_not_safe(self, command: str) -> str | None:
        """None when every simple command is a safe command with only allowed options and
        literal words; else the reason."""
        try:
            commands = simple_commands(command)
            if not commands:
                return "is empty"
            for words in commands:
                entry = self._entry_for(words)
                if entry is None:
                    return f"runs {words[0]!r}, which is not in the safe-command list"
                names = [w for w in entry if not w.startswith("-")]
                check_arguments(" ".join(names), rule_for(entry), words[len(names) :])
        except NotSafe as e:
            return str(e)
        return None

    def _entry_for(self, words: list[str]) -> tuple[str, ...] | None:
        """The longest safe-command entry whose command words start `words`."""
        best: tuple[str, ...] | None = None
        best_len = 0
        for entry in self.safe_commands:
            names = tuple(w for w in entry if not w.startswith("-"))
            if names and tuple(words[: len(names)]) == names and len(names) > best_len:
                best, best_len = entry, len(names)
        return best
