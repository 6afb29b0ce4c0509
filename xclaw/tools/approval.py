"""[tools] The approval policy: which tool calls run at once, which wait for a human, which never
run.

Synchronous: it reads the tool and its arguments and, for a shell command that may run git,
the git configuration in the call's workspace (git takes programs to run from there:
xclaw/tools/git_programs.py; `review` reads it in a worker thread). The agent loop asks it
before every call and adds its own rule on top (a call that may repeat an interrupted side
effect is always asked). Modes, as other agent CLIs have taught users:

    ask         edits and shell commands are asked, except shell commands made only of
                safe commands (read with a real shell parser, options on a per-command
                allowlist), which run confined in the sandbox — and only when there is one;
                read-only tools and sub-agents run.
    auto-edits  like ask, but write_file and edit_file run without asking (except inside a
                `.git` directory: hooks and config there run programs later). What git
                would run is checked again whenever a command runs git.
    yolo        everything runs.

In every mode a shell command matching a deny pattern is refused outright. See docs/approval.md.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from xclaw.errors import ConfigError
from xclaw.tools.a2a_call import NAME as A2A_CALL
from xclaw.tools.a2a_call import answers_remote
from xclaw.tools.base import Tool
from xclaw.tools.command_rules import check_arguments, rule_for
from xclaw.tools.git_programs import describe, mentions_git, program_sources, runs_git
from xclaw.tools.settings import DEFAULT_DENY, DEFAULT_SAFE_COMMANDS
from xclaw.tools.shell_reading import NotSafe, simple_commands
from xclaw.tools.traits import approval_for

if TYPE_CHECKING:
    from xclaw.tools.setup import ToolSetup

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


def _programs_phrase(sources: list[str]) -> str:
    return "which here would take programs to run from files in the workspace: " + describe(sources)


class _Sources:
    """What git could run in the call's workspace, looked for once and only when needed."""

    def __init__(self, workspace: Path | None, known: list[str] | None) -> None:
        self.workspace = workspace
        self.known = known

    def found(self) -> list[str]:
        if self.known is None:
            self.known = program_sources(self.workspace) if self.workspace is not None else []
        return self.known


def _git_warning(command: str, git: _Sources) -> str:
    """For a question about a command that may run git: what git would run here, so that
    nobody approves an innocent-looking `git status` that runs the model's program."""
    if git.workspace is None or not mentions_git(command):
        return ""
    sources = git.found()
    if not sources:
        return ""
    return f". WARNING: git, {_programs_phrase(sources)}"


class ApprovalPolicy:
    """Decides ALLOW, ASK(reason) or DENY(reason) for one tool call."""

    def __init__(
        self,
        mode: str = "ask",
        safe_commands: Iterable[str] = DEFAULT_SAFE_COMMANDS,
        denied_patterns: Iterable[str] = DEFAULT_DENY,
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
    def from_settings(cls, setup: ToolSetup) -> ApprovalPolicy:
        """`approval:` of the tools' setup, confining where its sandbox can."""
        from xclaw.sandbox.isolation import isolation_from_settings

        confined = isolation_from_settings(setup.sandbox).can_confine
        approval = setup.approval
        return cls(approval.mode, approval.safe_commands, approval.deny, confined)

    async def review(self, tool: Tool, args: dict[str, Any], workspace: Path | None) -> Decision:
        """`decide`, for the agent loop: the look at the workspace's git configuration a
        command that may run git needs is taken in a worker thread, so that the event loop
        never waits on the disk."""
        sources = None
        command = args.get("command") if isinstance(args, dict) else None
        if (
            workspace is not None
            and tool.traits is None
            and tool.name in SHELL_TOOLS
            and self.mode != "yolo"
            and isinstance(command, str)
            and mentions_git(command)
        ):
            sources = await asyncio.to_thread(program_sources, workspace)
        return self.decide(tool, args, workspace, sources)

    def decide(
        self,
        tool: Tool,
        args: dict[str, Any],
        workspace: Path | None = None,
        git_sources: list[str] | None = None,
    ) -> Decision:
        """`workspace`: where the call runs; a shell command that runs git is judged with the
        git configuration found there (None: nothing to look at, so git is always asked).
        `git_sources`: `program_sources(workspace)`, when the caller has it already."""
        traits = tool.traits
        if traits is not None:  # an MCP or Python tool: its declared traits decide
            kind, reason = approval_for(traits, tool.name, self.mode)
            return ALLOW if kind == "allow" else ASK(reason)
        if tool.name in SHELL_TOOLS:
            command = args.get("command") if isinstance(args, dict) else None
            return self._shell(command, _Sources(workspace, git_sources))
        if tool.name == A2A_CALL and isinstance(args, dict) and not args.get("message"):
            return ALLOW  # waits for a task's outcome: sends nothing
        if tool.name == A2A_CALL and answers_remote(args):
            # The remote agent asked for input (its own approval, say): a person answers,
            # whatever the mode (docs/a2a.md).
            return ASK(
                f"answers remote task {args.get('task_id')!r} of {args.get('agent')!r}, which "
                f"asked for input, with {str(args.get('message'))[:200]!r} (asked in every mode)"
            )
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

    def _shell(self, command: Any, git: _Sources) -> Decision:
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
            return ASK(f"shell command {why}" + _git_warning(command, git))
        if not self.confinement:
            return ASK(
                "shell command: no sandbox is available here, so every command is asked"
                + _git_warning(command, git)
            )
        if any(runs_git(words) for words in simple_commands(command)):
            # The write-then-run chain: git takes programs from files the model may have
            # written (xclaw/tools/git_programs.py).
            if git.workspace is None:
                return ASK("shell command runs git, and there is no workspace to check")
            sources = git.found()
            if sources:
                return ASK(f"shell command runs git, {_programs_phrase(sources)}")
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
