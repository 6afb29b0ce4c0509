"""[views] Plain-text views of the record, shared by the CLI and the gateway's slash commands.

Plain text (no colour, no markup) so the same string can go to a terminal, a WebSocket
`notice` frame or a test snapshot. The /steps listing keeps the original
tutorial's layout (*the seed*, docs/architecture.md glossary):

    Steps (session: cli):
      s0001  user_input    user        "analyse the log"
      s0002  llm_call      llm
      s0003  tool_call     shell       {"command":"cat app.log"}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from xclaw.llm import prices
from xclaw.llm.messages import Usage
from xclaw.llm.prices import PriceTable
from xclaw.store.steps.model import Session, Step, StepStatus, StepTreeNode, StepType, session_state

_SUMMARY_CHARS = 48


TITLE_CHARS = 60


def title_from_message(text: str) -> str:
    """A session's title from its first message: its words on one line, cut at a word
    boundary with an ellipsis (every session gets one, whatever the client)."""
    flat = " ".join(text.split())
    if len(flat) <= TITLE_CHARS:
        return flat or "(empty message)"
    cut = (
        flat[: TITLE_CHARS - 1].rsplit(" ", 1)[0]
        if " " in flat[: TITLE_CHARS - 1]
        else flat[: TITLE_CHARS - 1]
    )
    return cut.rstrip(" ,.;:") + "…"


def step_usage(step: Step) -> Usage | None:
    """An llm_call's tokens: the full breakdown recorded in output_data["usage"] (cache
    reads/writes, reasoning; an estimate says so), else the two token columns (NULL:
    unknown, shown as nothing); None for other steps."""
    if step.step_type is not StepType.LLM_CALL:
        return None
    out = step.output_data if isinstance(step.output_data, dict) else {}
    if isinstance(out.get("usage"), dict):
        return Usage.from_json(out["usage"])
    return Usage(step.token_usage_prompt or 0, step.token_usage_completion or 0)


def step_endpoint(step: Step) -> str:
    """The server that answered, when a base URL was configured ("" for the provider's own
    API, and for steps recorded before it was)."""
    out = step.output_data if isinstance(step.output_data, dict) else {}
    endpoint = out.get("endpoint")
    return endpoint if isinstance(endpoint, str) else ""


def step_model(step: Step) -> str:
    """The model that answered (after fallbacks), else the one asked."""
    out = step.output_data if isinstance(step.output_data, dict) else {}
    model = out.get("model")
    return model if isinstance(model, str) and model else step.name


def step_cost(step: Step, table: PriceTable, usage: Usage | None = None) -> float | None:
    """Estimated dollars of an llm_call at `table`'s prices; None: unknown model.
    `usage`: step_usage(step), when the caller has it already."""
    if usage is None:
        usage = step_usage(step)
    if usage is None or not (usage.prompt_tokens or usage.completion_tokens):
        return None
    return table.cost(step_model(step), usage, endpoint=step_endpoint(step))


@dataclass(frozen=True)
class SessionCost:
    """Tokens and estimated cost of a session's llm_calls. `cost` is None when no call had
    a known price; `unpriced` counts calls of unknown models (tokens shown, cost not)."""

    usage: Usage
    cost: float | None
    calls: int
    unpriced: int

    def to_json(self) -> dict[str, Any]:
        return {
            "usage": self.usage.to_json(),
            "cost": None if self.cost is None else round(self.cost, 6),
            "llmCalls": self.calls,
            "unpricedCalls": self.unpriced,
        }


def session_cost(steps: Iterable[Step], table: PriceTable) -> SessionCost:
    usage = Usage()
    cost: float | None = None
    calls = unpriced = 0
    for st in steps:
        u = step_usage(st)
        if u is None:
            continue
        calls += 1
        usage = usage + u
        c = step_cost(st, table)
        if c is None:
            if u.prompt_tokens or u.completion_tokens:
                unpriced += 1
        else:
            cost = (cost or 0.0) + c
    return SessionCost(usage, cost, calls, unpriced)


def format_usage(usage: Usage, cost: float | None = None) -> str:
    """`12.3k in (10.1k cached, 1.2k written) → 312 out · $0.0123`; empty without tokens;
    `~812 in → ~40 out (estimated)` when the provider reported no counts."""
    if not (usage.prompt_tokens or usage.completion_tokens):
        return ""
    about = "~" if usage.estimated else ""
    cache = []
    if usage.cache_read_tokens:
        cache.append(f"{_count(usage.cache_read_tokens)} cached")
    if usage.cache_write_tokens:
        cache.append(f"{_count(usage.cache_write_tokens)} written")
    text = f"{about}{_count(usage.prompt_tokens)} in"
    if cache:
        text += f" ({', '.join(cache)})"
    text += f" → {about}{_count(usage.completion_tokens)} out"
    if usage.reasoning_tokens:
        text += f" ({_count(usage.reasoning_tokens)} reasoning)"
    if usage.estimated:
        text += " (estimated)"
    if cost is not None:
        text += f" · {about}{prices.format_cost(cost)}"
    return text


def _count(n: int) -> str:
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k"
    return f"{round(n / 1000)}k"


def _one_line(text: str, limit: int = _SUMMARY_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def _text_of(data: Any) -> str | None:
    """The words of a user message, whether stored as a string or {"content"/"text": ...}."""
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        for key in ("content", "text"):
            value = data.get(key)
            if isinstance(value, str):
                return value
    return None


def sent_by(step: Step) -> str | None:
    """The user of a shared server who sent this message (docs/teams.md); None: the
    server's token, or a step that is no message."""
    out = step.output_data
    if step.step_type is not StepType.USER_INPUT or not isinstance(out, dict):
        return None
    by = out.get("by")
    user = by.get("user") if isinstance(by, dict) else None
    return user if isinstance(user, str) else None


FIRE_PREFIXES = ("schedule.", "hook.")


def fired_as(step: Step) -> str | None:
    """The fire a message came from — a schedule's tick or a webhook's delivery, its id the
    message's (`schedule.<id>.<tick ms>`, `hook.<name>.<delivery>`, docs/schedules.md); None
    for a message a person sent."""
    out = step.output_data
    if step.step_type is not StepType.USER_INPUT or not isinstance(out, dict):
        return None
    mid = out.get("messageId")
    return mid if isinstance(mid, str) and mid.startswith(FIRE_PREFIXES) else None


def _shown_name(step: Step) -> str:
    # As in the tutorial's listing: the user and the model by role; tools and alerts by name.
    # A message a team member sent shows their name instead of `user`.
    if step.step_type is StepType.USER_INPUT:
        return sent_by(step) or "user"
    if step.step_type is StepType.LLM_CALL:
        return "llm"
    return step.name


def _llm_summary(step: Step) -> str:
    """What an LLM call said (or which tools it called) and how long it took."""
    out = step.output_data
    if not isinstance(out, dict):
        return ""
    said = out.get("text")
    text = said if isinstance(said, str) else ""
    calls = [c.get("name") for c in out.get("tool_calls") or () if isinstance(c, dict)]
    bits = []
    if text.strip():
        bits.append(json.dumps(_one_line(text), ensure_ascii=False))
    if calls:
        bits.append("→ " + ", ".join(str(c) for c in calls))
    if step.duration_ms is not None:
        bits.append(f"({_duration(step.duration_ms)})")
    return " ".join(bits)


def _duration(ms: int) -> str:
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _alert_words(step: Step) -> str | None:
    """An approval or resume alert in words (as the trace and the comparison say them), not
    its raw JSON; None for other alerts."""
    data = step.input_data if isinstance(step.input_data, dict) else None
    if data is None:
        return None
    if step.name == "approval" and "tool" in data:
        args = data.get("args")
        what = ""
        if isinstance(args, dict):
            what = str(args.get("command") or args.get("path") or "") or json.dumps(
                args, ensure_ascii=False, separators=(",", ":")
            )
        out = step.output_data if isinstance(step.output_data, dict) else None
        if step.status is StepStatus.RUNNING:
            verdict = "waiting for an answer"
        elif out is not None:
            verdict = str(out.get("why") or ("approved" if out.get("approved") else "denied"))
        else:
            verdict = _one_line(step.error_message or "not answered", 40)
        what = f": {_one_line(what, _SUMMARY_CHARS)}" if what else ""
        return f"asked to run {data.get('tool')}{what} — {verdict}"
    if step.name == "session_config":  # xclaw/runtime/agreement.py
        return _config_words(data)
    if step.name in ("compensation", "rollback", "settle_check", "outside_effects"):
        return _effect_words(step, data)
    if step.name == "resume":
        parts = [
            f"{label} {', '.join(str(i) for i in data.get(key) or ())}"
            for key, label in (
                ("interrupted", "interrupted"),
                ("retrying", "retrying"),
                ("mayHaveRun", "may have run"),
            )
            if data.get(key)
        ]
        return " · ".join(parts) or "resumed after a restart"
    return None


def _effect_words(step: Step, data: dict[str, Any]) -> str:
    """Outside effects in words (xclaw/runtime/rollbacks.py, runtime/settle.py): what a call
    reaches, a rollback's plan, the compensation that undid an effect and who asked, a settle
    check's answer."""
    if step.name == "outside_effects":
        effect = f" ({data['effect']})" if data.get("effect") else ""
        return f"{data.get('tool')} reaches outside the workspace{effect}"
    if step.name == "settle_check":
        outcome = str(data.get("outcome") or "?").replace("_", " ")
        return f"{data.get('stepId')} {data.get('tool')}: {outcome} — {_one_line(str(data.get('detail') or ''), 60)}"
    given = data.get("by")
    by: dict[str, Any] = given if isinstance(given, dict) else {}
    who = f" · asked by {by.get('user') or 'the user'} ({by.get('client') or by.get('via') or '?'})"
    if step.name == "rollback":
        undo = len(data.get("compensations") or ())
        stay = len(data.get("notUndone") or ())
        left = f", {stay} left done" if stay else ""
        return f"rollback to before {data.get('stepId')}: {undo} to undo{left}{who}"
    return f"undoes {data.get('effect')} {data.get('tool')} by {data.get('action')}{who}"


def _config_words(data: dict[str, Any]) -> str:
    """`refused — session: script:a.json, yolo · worker w2: script:b.json, ask`."""

    def runs(c: Any) -> str:
        if not isinstance(c, dict):
            return "?"
        models = c.get("models")
        chain = ",".join(str(m) for m in models) if isinstance(models, list) else "?"
        return f"{chain}, {c.get('approval')}"

    given = data.get("worker")
    worker: dict[str, Any] = given if isinstance(given, dict) else {}
    text = f"{data.get('decision')} — session: {runs(data.get('session'))}"
    text += f" · worker {worker.get('id')}: {runs(worker)}"
    if data.get("used") and data.get("decision") != "refused":
        text += f" · ran with {runs(data.get('used'))}"
    return text


def _summary(step: Step) -> str:
    if step.step_type is StepType.LLM_CALL:
        return ""
    if step.step_type is StepType.SYSTEM_ALERT:
        words = _alert_words(step)
        if words is not None:
            return words
    if step.step_type is StepType.USER_INPUT:
        text = _text_of(step.input_data)
        if text is not None:
            return json.dumps(_one_line(text), ensure_ascii=False)
    if step.input_data is None:
        return ""
    compact = json.dumps(step.input_data, ensure_ascii=False, separators=(",", ":"))
    if len(compact) <= _SUMMARY_CHARS:
        return compact
    return compact[: _SUMMARY_CHARS - 3] + "..."


def _state_word(step: Step) -> str:
    if step.status is StepStatus.RUNNING:
        return "running"
    if step.interrupted:
        return "interrupted"
    if step.status is StepStatus.FAILED:
        return f"failed: {_one_line(step.error_message or 'error', 40)}"
    return ""


def _state(step: Step) -> str:
    word = _state_word(step)
    return f"[{word}]" if word else ""


def _session_label(session: Session | str) -> str:
    return session.session_id if isinstance(session, Session) else str(session)


def format_step_line(step: Step, table: PriceTable) -> str:
    """One row of /steps: id, type, name, input summary, and a state mark when not done."""
    name = _shown_name(step)
    if step.agent != "main":
        name = f"{name} ({step.agent})"
    parts = [f"  {step.display_id:<5}  {step.step_type.value:<12}  {name:<10}"]
    summary = _llm_summary(step) if step.step_type is StepType.LLM_CALL else _summary(step)
    usage = step_usage(step)
    spent = format_usage(usage, step_cost(step, table)) if usage is not None else ""
    extra = " ".join(p for p in (summary, spent, _state(step)) if p)
    if extra:
        parts.append("  " + extra)
    return "".join(parts).rstrip()


def action_line(kind: str, user: str | None, at: int, detail: dict[str, Any]) -> str:
    """One thing a person did that no step records (docs/teams.md), in words."""
    who = user or "admin"
    if kind == "cancel":
        what = "cancelled the run"
    elif kind == "rollback":
        what = f"rolled back to before {detail.get('stepId')} ({detail.get('deleted')} step(s) deleted)"
    elif kind == "fork":
        what = f"forked it from {detail.get('fromSessionId')} at {detail.get('fromStepId')}"
    elif kind == "share":
        what = f"shared it with {detail.get('user')} as {detail.get('role')}"
    elif kind == "unshare":
        what = f"stopped sharing it with {detail.get('user')}"
    else:
        what = kind
    when = datetime.fromtimestamp(at / 1000).strftime("%Y-%m-%d %H:%M:%S")
    return f"  {when}  {who} {what}"


def format_steps(
    steps: Sequence[Step],
    session: Session | str,
    table: PriceTable,
    *,
    offline: bool = False,
    actions: Sequence[tuple[str, str | None, int, dict[str, Any]]] = (),
) -> str:
    """The /steps listing, ending with how to use the ids with /rollback and /fork
    (`offline`: with `xclaw rollback` and `xclaw fork`, for the CLI's `xclaw steps`).
    `actions` (kind, user, ms, detail): what people did that no step shows, listed after."""
    label = _session_label(session)
    done = ["", "Who did what (not in the steps):", *(action_line(*a) for a in actions)]
    if not steps:
        return f"Steps (session: {label}):\n  (no steps yet)" + (
            "\n" + "\n".join(done) if actions else ""
        )
    lines = [f"Steps (session: {label}):"]
    lines.extend(format_step_line(s, table) for s in steps)
    if actions:
        lines += done
    # The example id is the latest instruction shown: the usual place to rewind or branch.
    main = [s for s in steps if s.agent == "main"] or list(steps)
    users = [s for s in main if s.step_type is StepType.USER_INPUT]
    tools = [s for s in main if s.step_type is StepType.TOOL_CALL]
    example = (users or tools or main)[-1].display_id
    if offline:
        lines += [
            "",
            "Usage:",
            f"  xclaw rollback {label} {example}   go back to just before this step",
            f"  xclaw fork {label} {example}       branch a new session from this step",
        ]
        return "\n".join(lines)
    lines += [
        "",
        "Usage:",
        f"  /rollback {example}   go back to just before this step and redo from there",
        f"  /fork {example}       branch a new session from this step (this one is kept)",
    ]
    return "\n".join(lines)


def _tree_label(step: Step, table: PriceTable) -> str:
    bits = [step.display_id, step.step_type.value, sent_by(step) or step.name]
    summary = _summary(step)
    if summary:
        bits.append(summary)
    tail = []
    if step.duration_ms is not None:
        tail.append(f"{step.duration_ms} ms")
    usage = step_usage(step)
    if usage is not None and (usage.prompt_tokens or usage.completion_tokens):
        about = "~" if usage.estimated else ""
        tail.append(f"{about}{usage.prompt_tokens}+{about}{usage.completion_tokens} tok")
        if usage.cache_read_tokens:
            tail.append(f"{usage.cache_read_tokens} cached")
        cost = step_cost(step, table, usage)
        if cost is not None:
            tail.append(about + prices.format_cost(cost))
    state = _state_word(step)
    if state:
        tail.append(state)
    if step.agent != "main":
        tail.append(f"agent {step.agent}")
    return "  ".join(bits) + (f"  ({', '.join(tail)})" if tail else "")


def format_tree(nodes: Sequence[StepTreeNode], table: PriceTable) -> str:
    """The trace tree: which decision caused which step, with durations and tokens."""
    if not nodes:
        return "(no steps yet)"
    lines: list[str] = []
    # Iterative walk: a session can be deeper than Python's recursion limit.
    stack: list[tuple[StepTreeNode, str, str]] = [(n, "", "") for n in reversed(nodes)]
    while stack:
        node, lead, child_lead = stack.pop()
        lines.append(lead + _tree_label(node.step, table))
        kids = node.children
        for i in range(len(kids) - 1, -1, -1):
            last = i == len(kids) - 1
            stack.append(
                (
                    kids[i],
                    child_lead + ("└─ " if last else "├─ "),
                    child_lead + ("   " if last else "│  "),
                )
            )
    return "\n".join(lines)


def relative_time(ms: int, now_ms: int) -> str:
    """ "just now", "5 min ago", "3 h ago", "yesterday", "4 days ago", then the date."""
    secs = max(0, (now_ms - ms) // 1000)
    if secs < 60:
        return "just now"
    if secs < 3600:
        return f"{secs // 60} min ago"
    if secs < 86_400:
        return f"{secs // 3600} h ago"
    if secs < 2 * 86_400:
        return "yesterday"
    if secs < 7 * 86_400:
        return f"{secs // 86_400} days ago"
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d")


def _session_tokens(c: SessionCost | None) -> str:
    if c is None or not (c.usage.prompt_tokens or c.usage.completion_tokens):
        return "-"
    about = "~" if c.usage.estimated else ""
    text = f"{about}{_count(c.usage.prompt_tokens)}/{about}{_count(c.usage.completion_tokens)}"
    if c.usage.cache_read_tokens:
        share = 100 * c.usage.cache_read_tokens / max(1, c.usage.prompt_tokens)
        text += f" ({share:.0f}% cached)"
    return text


def format_sessions(
    sessions: Iterable[Session],
    costs: dict[str, SessionCost] | None = None,
    *,
    busy: Callable[[str], bool] = lambda _sid: False,
    now_ms: int | None = None,
) -> str:
    """A table of sessions, most recently updated first (as the store lists them): id, what
    it is doing in words (session_state: the one rule), when it last changed, its title. With
    `costs`: TOKENS (in/out, and the share of input read from cache) and estimated COST."""
    rows = list(sessions)
    if not rows:
        return "No sessions yet."
    now = now_ms if now_ms is not None else int(datetime.now().timestamp() * 1000)
    states = [session_state(s, busy=busy(s.session_id)).text for s in rows]
    whens = [relative_time(s.updated_at, now) for s in rows]
    width = max(len("SESSION"), *(len(s.session_id) for s in rows))
    swidth = max(len("STATE"), *(len(x) for x in states))
    wwidth = max(len("UPDATED"), *(len(x) for x in whens))
    if costs is not None:
        cells = {
            s.session_id: (
                _session_tokens(costs.get(s.session_id)),
                prices.format_cost(costs[s.session_id].cost) if s.session_id in costs else "",
            )
            for s in rows
        }
        tw = max(len("TOKENS"), *(len(t) for t, _ in cells.values()))
        cw = max(len("COST"), *(len(c or "-") for _, c in cells.values()))
    head = f"{'SESSION':<{width}}  {'STATE':<{swidth}}  {'UPDATED':<{wwidth}}  "
    if costs is not None:
        head += f"{'TOKENS':<{tw}}  {'COST':<{cw}}  "
    lines = [head + "TITLE"]
    for s, state, when in zip(rows, states, whens, strict=True):
        title = s.title or "(untitled)"
        if s.is_forked:
            origin = s.parent_session_id or "a deleted session"
            at = f" at s{s.forked_from_seq:04d}" if s.forked_from_seq else ""
            title += f"  [fork of {origin}{at}]"
        usage = ""
        if costs is not None:
            tokens, cost = cells[s.session_id]
            usage = f"{tokens:<{tw}}  {cost or '-':<{cw}}  "
        lines.append(
            f"{s.session_id:<{width}}  {state:<{swidth}}  {when:<{wwidth}}  {usage}{title}"
        )
    return "\n".join(lines)
