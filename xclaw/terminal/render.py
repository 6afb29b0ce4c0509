"""[terminal] How `xclaw chat` shows server frames: the original tutorial's terminal format (*the
seed*, docs/architecture.md glossary: `[history]` lines between markers, `xclaw uses [NAME]: {...}`,
`xclaw: <answer>`), in colour when the terminal has it.

Pure presentation: it keeps only what it needs to lay text out (is a streamed line open?), so
it can be tested by rendering frames into a string.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.text import Text

from xclaw.terminal.text import SafeConsole, printable

HISTORY_PREFIX = "[history] "
HISTORY_START = "[history] --- history starts ---"
HISTORY_END = "[history] --- history ends ---"
OUTPUT_PREVIEW_CHARS = 200

MAYBE_REPEATED_WARNING = (
    "warning: this call was interrupted earlier and may already have run; approving runs it again"
)


def make_console(*, color: bool | None = None) -> Console:
    """No hard wrapping (soft_wrap): a long line stays one line, which is what terminals,
    pipes and tests all want; no automatic highlighting of numbers and paths. Text printed
    through it cannot carry terminal control sequences (see xclaw/terminal/text.py)."""
    return SafeConsole(
        highlight=False, soft_wrap=True, no_color=(color is False) or None, emoji=False
    )


def _markdown(text: str) -> RenderableType:
    """An answer rendered as Markdown (on a terminal only). rich's renderer pulls in
    markdown-it and Pygments, about a fifth of `xclaw run`'s start-up: imported when first
    needed, never by a run whose output is a pipe. No OSC 8 hyperlinks: a link's target is
    shown beside its text, not hidden in it."""
    from rich.markdown import Markdown

    return Markdown(text, hyperlinks=False, code_theme="ansi_dark")


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _preview(text: str) -> str:
    text = _compact_json(text)
    first = text.strip().splitlines()[0] if text.strip() else ""
    more = len(text.strip().splitlines()) > 1 or len(first) > OUTPUT_PREVIEW_CHARS
    return first[:OUTPUT_PREVIEW_CHARS] + (" …" if more else "")


def _compact_json(text: str) -> str:
    """Pretty-printed JSON (an MCP server's answer, often) on one line, so that the preview
    shows the answer rather than its opening brace."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "[") or len(stripped) > 100_000:
        return text
    try:
        return json.dumps(json.loads(stripped), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return text


# Markup worth rendering: emphasis, code, headings, lists, quotes, tables, rules.
_MARKDOWN = re.compile(
    r"(\*\*|__|`|^#{1,6} |^\s*[-*+] |^\s*\d+[.)] |^> |^\|.*\|\s*$|^-{3,}\s*$)", re.MULTILINE
)


def looks_like_markdown(text: str) -> bool:
    return bool(_MARKDOWN.search(text))


class Renderer:
    def __init__(self, console: Console, *, markdown: bool | None = None) -> None:
        self.console = console
        self._stream_open = False
        self._streamed = ""
        # Thinking lines wait for the next frame of their model call: a call retried after
        # its thinking went out says so (thinking_discarded) and they are dropped unseen.
        self._thinking: list[Mapping[str, Any]] = []
        # The team member this client is signed in as (the `session` frame says; None: the
        # server's token): messages others sent are shown with their name (docs/teams.md).
        self.me: str | None = None
        # On a terminal a final answer with Markdown is shown rendered (rich's renderer);
        # a pipe keeps the plain text (transcripts, the tutorial's format).
        self.markdown = console.is_terminal if markdown is None else markdown
        # The frames shown, by type (any other type is not for a terminal).
        self._handlers: dict[str, Callable[[Mapping[str, Any]], None]] = {
            "session": self._on_session,
            "history": self._on_history,
            "delta": self._on_delta,
            "reply": self._on_reply,
            "tool": self._on_tool,
            "notice": self._on_notice,
            "error": self._on_error,
            "step": self._on_step,
            "queue": self._on_queue,
        }
        self._queue_shown = 0  # messages the last queue lines listed
        # Whole lines only: a prompt stays on screen below the output (`xclaw chat` takes
        # input while a run is in flight), so an answer streams a finished line at a time
        # and nothing is ever left on an open line or redrawn in place.
        self.whole_lines = False
        self._held = ""  # the streamed answer's unfinished line (whole_lines)
        self._held_shown = False  # its "xclaw: " line is out (whole_lines)
        # An answer streamed since the last reply: the reply that ends it is not printed
        # again, even when a line of another frame (a queue's) ended the stream before it.
        self._unreplied = False

    @property
    def streaming(self) -> bool:
        """An answer is being printed on an open line (nothing else may draw there)."""
        return self._stream_open and not self.whole_lines

    # --- low level --------------------------------------------------------------------------
    def line(self, text: str, style: str | None = None) -> None:
        self.flush_thinking()
        self.end_stream()
        self.console.print(Text(printable(text), style=style or ""))

    def flush_thinking(self) -> None:
        """Print the thinking lines held back (the call they belong to went on)."""
        held, self._thinking = self._thinking, []
        for f in held:
            self.line(thinking_line(f), "dim italic")

    def end_stream(self) -> None:
        if self._stream_open and self.whole_lines:
            self._stream_open = False
            if self._held or not self._held_shown:
                self._held_line(self._held)
            self._held = ""
        elif self._stream_open:
            self.console.print()
            self._stream_open = False

    def _held_line(self, text: str) -> None:
        """One finished line of a streamed answer (whole_lines), the first after "xclaw: "."""
        head = Text() if self._held_shown else Text("xclaw: ", style="bold green")
        self._held_shown = True
        self.console.print(head + Text(text))

    # --- frames -----------------------------------------------------------------------------
    def frame(self, f: Mapping[str, Any]) -> None:
        kind = f.get("type")
        if kind == "thinking":
            self._thinking.append(f)  # printed with the call's next frame (flush_thinking)
            return
        if kind == "thinking_discarded":
            self._thinking.clear()  # a failed attempt's: the retry thinks again
            return
        self.flush_thinking()
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            handler(f)

    def _on_session(self, f: Mapping[str, Any]) -> None:
        user = f.get("user")
        self.me = user if isinstance(user, str) else None
        parts = [f"[session] {f.get('sessionId')}"]
        if f.get("created"):
            parts.append("new (saved with its first message)")
        else:
            parts.append(str(f.get("stateText") or f.get("status", "")))
        if f.get("title"):
            parts.append(repr(f["title"]))
        if f.get("isForked"):
            parts.append(f"fork of {f.get('parentSessionId')}")
        if isinstance(f.get("agent"), str):  # a declared agent (docs/agents.md)
            parts.append(f"agent {f['agent']}")
        self.line(" · ".join(parts), "dim")

    def _on_history(self, f: Mapping[str, Any]) -> None:
        lines = history_lines(f, me=self.me)
        if not lines:
            return
        self.line(HISTORY_START, "dim")
        messages = f.get("messages")
        if self.markdown and isinstance(messages, list):
            # Message by message, so an answer with Markdown reads as it did live.
            for m in messages:
                if isinstance(m, dict):
                    self._history_message(m)
        else:
            for text in lines:
                self.line(HISTORY_PREFIX + text, "dim")
        self.line(HISTORY_END, "dim")

    def _history_message(self, m: dict[str, Any]) -> None:
        text = printable(str(m.get("text") or ""))
        if m.get("kind") != "assistant" or not looks_like_markdown(text):
            for line in history_lines({"messages": [m]}, me=self.me):
                self.line(HISTORY_PREFIX + line, "dim")
            return
        for line in history_lines({"messages": [{**m, "text": "", "tool_calls": []}]}):
            self.line(HISTORY_PREFIX + line, "dim")  # its thinking line
        self.line(HISTORY_PREFIX + "xclaw:", "dim")
        indent = HISTORY_PREFIX + "  "
        options = self.console.options.update(width=max(20, self.console.width - len(indent)))
        rendered = _markdown(text)
        blank = True  # no blank row first, and never two in a row
        for segments in self.console.render_lines(rendered, options, pad=False):
            row = Text(indent, style="dim")
            for seg in segments:
                if not seg.control:
                    row.append(seg.text, seg.style)
            row.rstrip()
            if row.plain == indent.rstrip() and blank:
                continue
            blank = row.plain == indent.rstrip()
            self.console.print(row)
        calls = m.get("tool_calls") or []
        for line in history_lines({"messages": [{"kind": "assistant", "tool_calls": calls}]}):
            self.line(HISTORY_PREFIX + line, "dim")

    def _on_step(self, f: Mapping[str, Any]) -> None:
        """A message another team member sent to this session (a shared one), shown as theirs,
        one a schedule or webhook sent, under what fired it, and an approval another member
        answered. What this client's person did is on the screen."""
        step = f.get("step")
        if not isinstance(step, dict):
            return
        given = step.get("output")
        out: dict[str, Any] = given if isinstance(given, dict) else {}
        label = fire_label(out.get("messageId"))
        if label is not None and step.get("type") == "user_input" and step.get("agent") == "main":
            # A schedule's or webhook's fire: nobody typed it here, whoever made it.
            self.end_stream()
            for line in fire_lines(label, str(step.get("input") or "")):
                self.line(line, "cyan")
            return
        by = out.get("by")
        who = by.get("user") if isinstance(by, dict) else None
        if not isinstance(who, str) or who == self.me:
            return
        if step.get("type") == "user_input" and step.get("agent") == "main":
            self.end_stream()
            for line in _prefixed(f"{printable(who)}: ", printable(str(step.get("input") or ""))):
                self.line(line, "cyan")
        elif step.get("name") == "approval" and step.get("status") != "running":
            self.end_stream()  # another member answered it: `approved by bob (web page)`
            self.line(f"[approval] {printable(str(out.get('why') or ''))}", "dim")

    def _on_delta(self, f: Mapping[str, Any]) -> None:
        text = printable(str(f.get("content", "")))
        if not text:
            return
        if not self._stream_open:
            self._unreplied = True
        if self.whole_lines:
            if not self._stream_open:
                self._stream_open, self._streamed = True, ""
                self._held, self._held_shown = "", False
            self._streamed += text
            self._held += text
            if "\n" in self._held:
                done, self._held = self._held.rsplit("\n", 1)
                for row in done.split("\n"):
                    self._held_line(row)
            return
        if not self._stream_open:
            self.console.print(Text("xclaw: ", style="bold green"), end="")
            self._stream_open = True
            self._streamed = ""
        self.console.print(Text(text), end="")
        self._streamed += text

    def _on_reply(self, f: Mapping[str, Any]) -> None:
        content = printable(str(f.get("content", "")))
        streamed = self._unreplied and self._streamed.strip() == content.strip()
        self._unreplied = False
        if self.markdown and looks_like_markdown(content):
            if streamed and self.whole_lines and self._stream_open and not self._held_shown:
                self._stream_open = False  # nothing of it shown yet: shown rendered instead
                streamed = False
            if streamed and (self.whole_lines or not self._stream_open or not self._erase_stream()):
                self.end_stream()  # too long to redraw in place: the streamed text stays
                return
            self.end_stream()
            self.console.print(Text("xclaw:", style="bold green"))
            # No OSC 8 hyperlinks: a link's target is shown beside its text, not hidden in it.
            self.console.print(_markdown(content))
            return
        if streamed:
            self.end_stream()  # the answer was already shown as it streamed
            return
        self.end_stream()
        self.console.print(Text("xclaw: ", style="bold green") + Text(content))

    def _erase_stream(self) -> bool:
        """Remove the streamed answer from the screen (to print it rendered instead); False
        when it no longer fits on the screen (scrolled off lines cannot be rewritten)."""
        width = max(1, self.console.width)
        rows = sum(
            max(1, -(-cell_len(line) // width)) for line in ("xclaw: " + self._streamed).split("\n")
        )
        if rows >= self.console.height:
            return False
        up = f"\x1b[{rows - 1}A" if rows > 1 else ""
        self.console.file.write("\r" + up + "\x1b[J")  # xclaw's own control codes, not text
        self.console.file.flush()
        self._stream_open = False
        return True

    def _on_tool(self, f: Mapping[str, Any]) -> None:
        who = f"({f['agent']}) " if f.get("agent") else ""
        state = f.get("state")
        if state == "running":
            self.line(f"{who}xclaw uses [{f.get('name')}]: {compact_json(f.get('input'))}", "cyan")
        elif state == "completed" and f.get("output"):
            self.line(f"  ↳ {_preview(str(f['output']))}", "dim")
        elif state == "failed":
            self.line(f"  ✗ [{f.get('name')}] {_preview(str(f.get('output') or ''))}", "yellow")

    def _on_queue(self, f: Mapping[str, Any]) -> None:
        """The session's waiting messages (docs/protocol.md, "Input while a run is busy"): a
        line per message, numbered as `/unqueue N` cancels them."""
        queued = [q for q in f.get("queued") or [] if isinstance(q, Mapping)]
        if not queued:
            if self._queue_shown:
                self.line("[queue] nothing waits any more", "dim")
            self._queue_shown = 0
            return
        self._queue_shown = len(queued)
        self.line(f"[queue] {len(queued)} waiting (/unqueue N cancels one):", "cyan")
        for n, q in enumerate(queued, 1):
            text = " ".join(str(q.get("content", "")).split())
            short = text if len(text) <= 70 else text[:69] + "…"
            who = f" · {q['user']}" if isinstance(q.get("user"), str) else ""
            self.line(f"  {n}. [{q.get('busy', 'queue')}] “{short}”{who}", "cyan")

    def _on_notice(self, f: Mapping[str, Any]) -> None:
        self.line(str(f.get("content", "")), "bold cyan")

    def _on_error(self, f: Mapping[str, Any]) -> None:
        if self._stream_open and self.whole_lines:
            gap = "" if self._streamed[-1:].isspace() else " "
            self._held += gap + "[reply cut off]"  # on the line it cut off
        elif self._stream_open:
            # The text shown so far was no finished answer: say so on its own line.
            gap = "" if self._streamed[-1:].isspace() else " "
            self.console.print(Text(gap + "[reply cut off]", style="yellow"), end="")
        self.line(f"error ({f.get('code', 'error')}): {f.get('content', '')}", "bold red")

    def approval(self, f: Mapping[str, Any]) -> None:
        who = f"({f['agent']}) " if f.get("agent") else ""
        self.line(
            f"{who}xclaw wants to run [{f.get('name')}]: {compact_json(f.get('input'))}",
            "bold magenta",
        )
        if f.get("reason"):
            self.line(f"  reason: {f['reason']}", "magenta")
        if f.get("maybeRepeated"):
            self.line(f"  {MAYBE_REPEATED_WARNING}", "bold red")


def history_lines(f: Mapping[str, Any], *, me: str | None = None) -> list[str]:
    """`You: …`, `xclaw: …`, `xclaw uses [NAME]: {…}` lines of a history frame. The structured
    `messages` show tool calls; a server written for the tutorial sends only `content`, a JSON
    string of [{role, content}], and that works too. A message another team member sent (its
    `user` is not `me`) is shown as `NAME: …` (docs/teams.md); one a schedule or webhook sent
    under what fired it (`fire_label`)."""
    out: list[str] = []
    messages = f.get("messages")
    if isinstance(messages, list):
        for m in messages:
            if not isinstance(m, dict):
                continue
            kind = m.get("kind")
            label = fire_label(m.get("fire"))
            if kind == "user" and label is not None:
                out += fire_lines(label, str(m.get("text", "")))
            elif kind == "user":
                sender = m.get("user")
                who = (
                    f"{printable(sender)}: "
                    if isinstance(sender, str) and sender != me
                    else "You: "
                )
                out += _prefixed(who, str(m.get("text", "")))
            elif kind == "summary":
                # compaction's summary of the older turns (the full text: `xclaw steps`)
                out.append(
                    thinking_line({"content": str(m.get("text", ""))}).replace(
                        "▸ thinking", "▸ earlier conversation, summarised", 1
                    )
                )
            elif kind == "assistant":
                blocks = [b for b in m.get("thinking") or () if isinstance(b, dict)]
                if blocks:
                    out.append(
                        thinking_line(
                            {
                                "content": "\n\n".join(
                                    str(b.get("thinking") or "") for b in blocks
                                ),
                                "redacted": sum(
                                    b.get("type") == "redacted_thinking" for b in blocks
                                ),
                            }
                        )
                    )
                if m.get("text"):
                    out += _prefixed("xclaw: ", str(m["text"]))
                for call in m.get("tool_calls") or ():
                    out.append(
                        f"xclaw uses [{call.get('name')}]: {compact_json(call.get('input'))}"
                    )
        return out
    try:
        seed = json.loads(f.get("content") or "[]")
    except (TypeError, ValueError):
        return out
    for m in seed if isinstance(seed, list) else ():
        if isinstance(m, dict):
            who = "You: " if m.get("role") == "user" else "xclaw: "
            content = m.get("content")
            out += _prefixed(who, content if isinstance(content, str) else compact_json(content))
    return out


THINKING_PREVIEW_CHARS = 80


def thinking_line(f: Mapping[str, Any]) -> str:
    """A thinking frame folded to one line: its size and the start of its first line (the
    whole text is in the llm_call step: `xclaw steps`, the trace view)."""
    text = str(f.get("content") or "").strip()
    words = len(text.split())
    bits = []
    if words:
        bits.append(f"{words} word{'s' if words != 1 else ''}")
    if f.get("redacted"):
        bits.append(f"{f['redacted']} redacted block{'s' if f['redacted'] != 1 else ''}")
    first = " ".join(text.splitlines()[0].split()) if text else ""
    if len(first) > THINKING_PREVIEW_CHARS or len(text.splitlines()) > 1:
        first = first[:THINKING_PREVIEW_CHARS].rstrip() + " …"
    head = f"▸ thinking ({', '.join(bits) or 'empty'})"
    return f"{head}: {first}" if first else head


def _prefixed(who: str, text: str) -> list[str]:
    lines = text.splitlines() or [""]
    return [who + lines[0]] + ["  " + ln for ln in lines[1:]]


def fire_label(fire_id: object) -> str | None:
    """What fired a message, from its id (docs/schedules.md): `⏰ schedule ID · TICK` for a
    schedule's tick (UTC), `↪ hook NAME · delivery ID` for a webhook's delivery; None for a
    message a person sent. The parts come from the server; `line` makes them inert."""
    if not isinstance(fire_id, str):
        return None
    source, _, rest = fire_id.partition(".")
    name, _, part = rest.partition(".")
    if not name or not part:
        return None
    if source == "schedule":
        if not part.isdigit() or len(part) > 15:
            return f"⏰ schedule {name} · tick {part}"
        tick = dt.datetime.fromtimestamp(int(part) / 1000, dt.UTC)
        return f"⏰ schedule {name} · {tick.strftime('%Y-%m-%d %H:%M:%SZ')}"
    if source == "hook":
        return f"↪ hook {name} · delivery {part}"
    return None


def fire_lines(label: str, text: str) -> list[str]:
    """A fired message: its label, then its text indented (a webhook's is the sender's words,
    made inert by `printable` where it is printed)."""
    lines = text.splitlines() or [""]
    return [label] + ["  " + ln for ln in lines]
