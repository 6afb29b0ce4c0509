"""The approval policy: which tool calls run at once, which wait for a human, which never run.

Pure and synchronous: it reads the tool and its arguments, nothing else. The agent loop asks it
before every call and adds its own rule on top (a call that may repeat an interrupted side
effect is always asked). Modes, as other agent CLIs have taught users:

    ask         edits and shell commands are asked, except shell commands made only of
                safe commands; read-only tools and sub-agents run.
    auto-edits  like ask, but write_file and edit_file run without asking.
    yolo        everything runs.

In every mode a shell command matching a deny pattern is refused outright. See docs/approval.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from xclaw.config import DEFAULT_DENIED_PATTERNS, DEFAULT_SAFE_COMMANDS, Settings
from xclaw.errors import ConfigError
from xclaw.tools.base import Tool
from xclaw.tools.traits import approval_for

MODES = ("ask", "auto-edits", "yolo")
SHELL_TOOLS = frozenset({"shell"})
EDIT_TOOLS = frozenset({"write_file", "edit_file"})
# Run without asking: every step the sub-agent takes goes through this policy itself.
DELEGATING_TOOLS = frozenset({"spawn_agent"})


@dataclass(frozen=True, slots=True)
class Decision:
    kind: Literal["allow", "ask", "deny"]
    reason: str = ""


ALLOW = Decision("allow")


def ASK(reason: str) -> Decision:  # named like the constant ALLOW beside it
    return Decision("ask", reason)


def DENY(reason: str) -> Decision:
    return Decision("deny", reason)


class NotSafe(Exception):
    """A shell command that cannot run without asking; the message says why."""


# --- reading a shell command ---------------------------------------------------------------

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = ";&|\n"


def simple_commands(command: str) -> list[list[str]]:
    """The simple commands of `command` as word lists (quotes removed), split on ; && || | &
    and newlines; NotSafe for anything whose effect cannot be read off the words: command or
    process substitution, subshells, here-documents, output redirection to a file.

    Deliberately a small subset of the shell grammar: what it does not understand is NotSafe,
    which only means a human is asked.
    """
    commands: list[list[str]] = [[]]
    word: list[str] = []
    in_word = False
    i, n = 0, len(command)

    def end_word() -> None:
        nonlocal word, in_word
        if in_word:
            commands[-1].append("".join(word))
        word, in_word = [], False

    while i < n:
        c = command[i]
        if c in " \t":
            end_word()
        elif c == "\\":
            if i + 1 < n and command[i + 1] != "\n":  # backslash-newline just joins lines
                word.append(command[i + 1])
                in_word = True
            i += 1
        elif c == "'":
            close = command.find("'", i + 1)
            if close == -1:
                raise NotSafe("has an unterminated quote")
            word.append(command[i + 1 : close])
            in_word = True
            i = close
        elif c == '"':
            i = _double_quoted(command, i + 1, word)
            in_word = True
        elif c == "`" or (c == "$" and command.startswith("$(", i)):
            raise NotSafe("uses command substitution")
        elif c in "()":
            raise NotSafe("uses a subshell or grouping")
        elif c == "#" and not in_word:
            while i + 1 < n and command[i + 1] != "\n":
                i += 1
        elif c in _SEPARATORS:
            if c == "&" and command.startswith("&>", i):
                raise NotSafe("redirects output to a file")
            end_word()
            commands.append([])
            if command[i : i + 2] in ("&&", "||", "|&", ";;"):
                i += 1
        elif c == ">":
            if in_word and "".join(word).isdigit():  # "2>": the 2 names a descriptor
                word, in_word = [], False
            end_word()
            i = _output_redirect(command, i)
        elif c == "<":
            end_word()
            i = _input_redirect(command, i)
        else:
            word.append(c)
            in_word = True
        i += 1
    end_word()
    return [c for c in commands if c]


def _double_quoted(command: str, i: int, word: list[str]) -> int:
    """Reads a "..." string starting after its quote; returns the index of the closing quote."""
    n = len(command)
    while i < n:
        c = command[i]
        if c == '"':
            return i
        if c == "\\" and i + 1 < n and command[i + 1] in '$`"\\\n':
            word.append(command[i + 1])
            i += 2
            continue
        if c == "`" or command.startswith("$(", i):
            raise NotSafe("uses command substitution")
        word.append(c)
        i += 1
    raise NotSafe("has an unterminated quote")


def _redirect_target(command: str, i: int) -> tuple[str, int]:
    """The word after a redirection operator at i (spaces skipped); returns (word, last index)."""
    n = len(command)
    while i < n and command[i] in " \t":
        i += 1
    start = i
    while i < n and command[i] not in " \t" + _SEPARATORS + "<>()":
        if command[i] in "'\"`$\\":
            raise NotSafe("redirects to a computed file name")
        i += 1
    return command[start:i], i - 1


def _output_redirect(command: str, i: int) -> int:
    """Only `>/dev/null` and descriptor copies (`2>&1`) are harmless output redirections."""
    i += 1
    if i < len(command) and command[i] in ">|":
        i += 1
    if command.startswith("(", i):
        raise NotSafe("uses process substitution")
    if command.startswith("&", i):
        target, end = _redirect_target(command, i + 1)
        if target.isdigit() or target == "-":
            return end
        raise NotSafe("redirects output to a file")
    target, end = _redirect_target(command, i)
    if target != "/dev/null":
        raise NotSafe("redirects output to a file")
    return end


def _input_redirect(command: str, i: int) -> int:
    if command.startswith("<(", i):
        raise NotSafe("uses process substitution")
    if command.startswith("<<", i) and not command.startswith("<<<", i):
        raise NotSafe("uses a here-document")
    while i + 1 < len(command) and command[i + 1] == "<":
        i += 1
    target, end = _redirect_target(command, i + 1)
    if not target:
        raise NotSafe("has a redirection without a target")
    if target.startswith(("/dev/tcp/", "/dev/udp/")):
        raise NotSafe("opens a network connection")
    return end


# --- arguments that turn a reading command into a writing one ------------------------------


def _short_flags(args: list[str]) -> str:
    return "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))


def _operands(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-") or a == "-"]


_FIND_ACTIONS = {
    "-exec",
    "-execdir",
    "-ok",
    "-okdir",
    "-delete",
    "-fprint",
    "-fprint0",
    "-fprintf",
    "-fls",
}
_WRITES: dict[str, Callable[[list[str]], str | None]] = {
    "find": lambda a: next((x for x in a if x in _FIND_ACTIONS), None),
    "sort": lambda a: (
        next((x for x in a if x.startswith("--output")), None)
        or ("-o" if "o" in _short_flags(a) else None)
    ),
    "tree": lambda a: "-o" if "-o" in a else None,
    "date": lambda a: (
        next((x for x in a if x.startswith("--set")), None)
        or ("-s" if "s" in _short_flags(a) else None)
    ),
    "uniq": lambda a: "an output file" if len(_operands(a)) > 1 else None,
    "sed": lambda a: (
        next((x for x in a if x.startswith("--in-place")), None)
        or ("-i" if "i" in _short_flags(a) else None)
    ),
}


class ApprovalPolicy:
    """Decides ALLOW, ASK(reason) or DENY(reason) for one tool call."""

    def __init__(
        self,
        mode: str = "ask",
        safe_commands: Iterable[str] = DEFAULT_SAFE_COMMANDS,
        denied_patterns: Iterable[str] = DEFAULT_DENIED_PATTERNS,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"approval mode {mode!r}: expected ask, auto-edits or yolo")
        self.mode = mode
        # An entry may be several words ("git status"): the command must start with all of them.
        self.safe_commands = tuple(tuple(s.split()) for s in safe_commands if s.split())
        self.denied: list[re.Pattern[str]] = []
        for pattern in denied_patterns:
            try:
                self.denied.append(re.compile(pattern))
            except re.error as e:
                raise ConfigError(f"approval deny pattern {pattern!r} is not a regex: {e}") from e

    @classmethod
    def from_settings(cls, settings: Settings) -> ApprovalPolicy:
        return cls(settings.approval_mode, settings.safe_commands, settings.denied_patterns)

    def decide(self, tool: Tool, args: dict[str, Any]) -> Decision:
        traits = getattr(tool, "traits", None)
        if traits is not None:  # an MCP or Python tool: its declared traits decide
            kind, reason = approval_for(traits, tool.name, self.mode)
            return ALLOW if kind == "allow" else ASK(reason)
        if tool.name in SHELL_TOOLS:
            return self._shell(args.get("command") if isinstance(args, dict) else None)
        if self.mode == "yolo" or tool.read_only or tool.name in DELEGATING_TOOLS:
            return ALLOW
        if tool.name in EDIT_TOOLS:
            if self.mode == "auto-edits":
                return ALLOW
            path = args.get("path") if isinstance(args, dict) else None
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
        return ALLOW if why is None else ASK(f"shell command {why}")

    def why_not_safe(self, command: str) -> str | None:
        """None when every simple command starts with a safe command; else the reason."""
        try:
            commands = simple_commands(command)
        except NotSafe as e:
            return str(e)
        if not commands:
            return "is empty"
        for words in commands:
            if _ASSIGNMENT.match(words[0]):
                return "sets environment variables"
            if not any(tuple(words[: len(safe)]) == safe for safe in self.safe_commands):
                return f"runs {words[0]!r}, which is not in the safe-command list"
            check = _WRITES.get(words[0])
            flag = check(words[1:]) if check else None
            if flag:
                return f"runs {words[0]!r} with {flag}, which can change files"
        return None
