"""[ops] `xclaw replay`: re-run a recorded session into a new one, answering every model call
with the output the record holds (no model needed) while the tools run again, for real, in
the new session's fresh workspace; then compare each tool result with the recorded one.

A recorded model call is found by position, as the record itself was built: the agent that
asks (the main agent, or a sub-agent named by the chain of spawn_agent call ids that led to
it) and how many answers that agent has had so far (assistant messages in its history).
Approvals are answered as they were answered in the record (no recorded approval: the call
ran without asking, so it is approved). From a step (`--from`), the new session starts as a
fork of the source just before it — its record and its files — and only the rest re-runs.
With a live model (`--model`), every model call of the replay goes to it instead, so a new
model or prompt can be tried on a real session from a real state; the divergences then also
say where its answers first differ from the record's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from xclaw.config.settings import Settings
from xclaw.errors import LLMError, XclawError
from xclaw.llm.base import LLMRequest, LLMResponse, Model
from xclaw.llm.events import EventSink, TextDelta, emit
from xclaw.llm.legacy import event_model
from xclaw.llm.messages import AssistantMessage, ToolCall, Usage
from xclaw.people.answered_by import REPLAY, AnsweredBy
from xclaw.recorder.history import recorded_thinking, tool_output_text
from xclaw.store.base import Store
from xclaw.store.steps.model import (
    APPROVAL_STEP_NAME,
    MAIN_AGENT,
    Status,
    Step,
    StepStatus,
    StepType,
    display_id,
)
from xclaw.views.outside_effects import outside_steps
from xclaw.wire.shapes import Frame

_SHOWN = 400  # characters of a differing result kept in a divergence
# How the loop words a call that never ran (xclaw/agent/loop.py `Agent._refuse`).
NOT_RUN = "Not run:"


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where the replay first did something else than the record."""

    kind: str  # tool_result | tool_status | not_replayed | extra_call | model_output | run_failed
    step: str | None  # the recorded step (display id), if any
    new_step: str | None  # the replay's step, if any
    agent: str  # main, or the path of spawn call ids (main/<call>/<call>)
    tool: str | None = None
    call_id: str | None = None
    recorded: str | None = None
    replayed: str | None = None
    # tool_status only: each side's output, so that "completed vs failed" comes with the why.
    recorded_output: str | None = None
    replayed_output: str | None = None

    def to_json(self) -> dict[str, Any]:
        extra = (
            {}
            if self.kind != "tool_status"
            else {
                "recordedOutput": self.recorded_output,
                "replayedOutput": self.replayed_output,
            }
        )
        return {
            "kind": self.kind,
            "step": self.step,
            "newStep": self.new_step,
            "agent": self.agent,
            "tool": self.tool,
            "callId": self.call_id,
            "recorded": self.recorded,
            "replayed": self.replayed,
        } | extra


@dataclass
class ReplayResult:
    source: str
    session_id: str
    workspace: str
    start: str | None  # the step the replay started at (None: the beginning)
    live_model: str | None  # the live model's name (None: every answer from the record)
    model_calls: int = 0  # answered from the record
    live_calls: int = 0  # answered by the live model
    divergences: list[Divergence] = field(default_factory=list)
    # The record stops mid-turn (interrupted or waiting): replayed up to its last answer.
    record_ended: bool = False
    # The calls of the replay whose effects reached outside the workspace (tools run for
    # real): the replay's own, undone as any session's by rolling it back (compensable
    # ones), or not at all (irreversible): [{"stepId", "tool", "effect"}].
    outside: list[dict[str, Any]] = field(default_factory=list)

    @property
    def first(self) -> Divergence | None:
        return self.divergences[0] if self.divergences else None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "sessionId": self.session_id,
            "workspace": self.workspace,
            "from": self.start,
            "liveModel": self.live_model,
            "modelCallsFromRecord": self.model_calls,
            "modelCallsLive": self.live_calls,
            "reproduced": not self.divergences,
            "recordEndsMidTurn": self.record_ended,
            "firstDivergence": self.first.to_json() if self.first else None,
            "divergences": [d.to_json() for d in self.divergences],
            "outsideEffects": self.outside,
        }


# --- agent paths: the same sub-agent in the record and in the replay ----------------------------


def agent_paths(steps: Iterable[Step]) -> dict[str, str]:
    """agent id -> path of spawn call ids from the main agent (`main`, `main/c1`, ...).
    A sub-agent's id is the display id of its first spawn_agent step."""
    by_display = {s.display_id: s for s in steps}
    paths: dict[str, str] = {MAIN_AGENT: MAIN_AGENT}

    def path_of(agent: str, depth: int = 0) -> str:
        if agent in paths:
            return paths[agent]
        spawn = by_display.get(agent)
        if spawn is None or depth > 50:
            paths[agent] = agent  # not a step id: keep the name as is
            return agent
        paths[agent] = f"{path_of(spawn.agent, depth + 1)}/{spawn.call_id}"
        return paths[agent]

    for s in by_display.values():
        path_of(s.agent)
    return paths


def _request_path(agent: str) -> str:
    """The loop names a sub-agent `<parent>/<call id>`: already a path from main."""
    return agent or MAIN_AGENT


# --- the model that answers from the record -------------------------------------------------------


class RecordedModel:
    """A Model whose answers are the record's (or the live model's, from `live_from` on)."""

    def __init__(
        self,
        answers: dict[str, list[Step]],
        *,
        live: Model | None = None,
        source: str = "",
    ) -> None:
        self.name = f"replay:{source}" if live is None else f"replay:{source}+{live.name}"
        self.answers = answers
        self.live = None if live is None else event_model(live)
        self.from_record = 0
        self.live_calls = 0
        self.exhausted = False  # asked for an answer past the end of the record

    async def complete(self, request: LLMRequest, on_event: EventSink | None = None) -> LLMResponse:
        asked = request.playback
        history = asked.conversation(request.messages)
        k = sum(1 for m in history if isinstance(m, AssistantMessage))
        recorded = self.answers.get(_request_path(asked.agent), [])
        step = recorded[k] if k < len(recorded) else None
        if self.live is not None:
            self.live_calls += 1
            return await self.live.complete(request, on_event)
        if step is None:
            self.exhausted = True
            raise LLMError(
                f"the record has no model answer #{k + 1} for agent {asked.agent}: the replay "
                "went past what was recorded (pass --model to go on with a live model)",
                retryable=False,
                provider="replay",
            )
        self.from_record += 1
        out = step.output_data if isinstance(step.output_data, dict) else {}
        text = str(out.get("text") or "")
        if text:
            await emit(on_event, TextDelta(text))
        usage = (
            Usage.from_json(out["usage"])
            if isinstance(out.get("usage"), dict)
            else Usage(step.token_usage_prompt or 0, step.token_usage_completion or 0)
        )
        return LLMResponse(
            text=text,
            tool_calls=tuple(ToolCall.from_json(c) for c in out.get("tool_calls") or ()),
            usage=usage,
            model=str(out.get("model") or step.name),
            stop_reason=str(out.get("stop_reason") or ""),
            thinking=recorded_thinking(out),  # signed blocks go back as the provider sent them
        )


def recorded_answers(steps: list[Step]) -> dict[str, list[Step]]:
    """Completed model calls per agent path, in order: answer k is the k-th."""
    paths = agent_paths(steps)
    out: dict[str, list[Step]] = defaultdict(list)
    for s in steps:
        if s.step_type is StepType.LLM_CALL and s.status is StepStatus.COMPLETED:
            out[paths.get(s.agent, s.agent)].append(s)
    return dict(out)


# --- running it ---------------------------------------------------------------------------------


async def replay(
    store: Store,
    settings: Settings,
    source_id: str,
    *,
    live: Model | None = None,
    start: int | None = None,
) -> ReplayResult:
    """Re-run `source_id` into a new session of the same store; see the module docstring.
    `start` (a main-agent step's seq): the new session is a fork of the source just before
    that step (its record and its files), and only the rest re-runs. `live`: the model that
    answers every call the replay makes (from `start`, or from the beginning)."""

    from xclaw.runtime.agent_choice import recorded_agent
    from xclaw.runtime.runtime import Runtime

    source = store.record.get_session(source_id)
    steps = store.record.steps(source_id)
    first = start if start is not None and start > 1 else None
    model = RecordedModel(recorded_answers(steps), live=live, source=source_id)
    # Approvals are asked (mode ask) and answered as the record answered them.
    asked = settings.model_copy(
        update={"approval": settings.approval.model_copy(update={"mode": "ask"})}
    )
    runtime = Runtime(store, asked, model=model)
    decisions = _recorded_decisions(steps)
    # A session that ran a declared agent is replayed by it, when it is declared here
    # (docs/agents.md); else by xclaw's own, and the tools it lacks show as divergences.
    recorded = recorded_agent(source.metadata)
    agent = recorded.name if recorded is not None and recorded.name in runtime.agents else None
    sid = ""
    failure: str | None = None
    title = runtime.title_of(f"replay of {source.title or source_id}")
    meta = {
        "replayOf": source_id,
        "replayFrom": None if first is None else display_id(first),
        "liveModel": None if live is None else live.name,
    }
    try:
        if first is None:
            new, _ = await runtime.open(None)
        else:  # the record and the files up to the step before `first`, as `xclaw fork`
            new = await asyncio.to_thread(
                runtime.workspaces.fork, source_id, first - 1, f"{title} from {display_id(first)}"
            )
        sid = new.session_id
        store.record.update_session(sid, title=None if first else title, metadata=meta)
        failed: list[str] = []

        def on_frame(frame: Frame) -> None:
            if frame.get("type") == "approval_request":
                asyncio.get_running_loop().create_task(_answer(frame))
            elif frame.get("type") == "error":
                failed.append(str(frame.get("message") or frame.get("content") or frame))

        async def _answer(frame: Frame) -> None:
            step = await asyncio.to_thread(store.record.get_step, sid, str(frame["stepId"]))
            path = agent_paths(await asyncio.to_thread(store.record.steps, sid)).get(
                step.agent, step.agent
            )
            approve = decisions.get((path, step.call_id), True)
            by = AnsweredBy(REPLAY, detail=source_id)
            with contextlib.suppress(XclawError):  # the run ended meanwhile
                runtime.answer_approval(sid, str(frame["stepId"]), approve, by)

        runtime.subscribe(sid, on_frame)
        if first is not None and not _starts_turn(steps, first):
            # Mid-turn: the fork is continued as a resume would (unanswered calls run, or
            # the model is asked for its next answer).
            store.record.transition(sid, Status.RUNNING)
            if await runtime.resume_if_needed(sid):
                await runtime.wait_idle(sid)
            failure = failed[0] if failed else None
        users = [
            s
            for s in steps
            if s.step_type is StepType.USER_INPUT
            and s.agent == MAIN_AGENT
            and s.status is StepStatus.COMPLETED
            and s.seq >= (first or 0)
        ]
        for user in users if failure is None else []:
            text = user.input_data if isinstance(user.input_data, str) else str(user.input_data)
            await runtime.send(sid, text, agent=agent)
            await runtime.wait_idle(sid)
            if failed:
                failure = failed[0]
                break
    finally:
        await runtime.shutdown()
    result = ReplayResult(
        source=source_id,
        session_id=sid,
        workspace=str(runtime.toolbox.workspace(sid)) if sid else "",
        start=None if first is None else display_id(first),
        live_model=None if live is None else live.name,
        model_calls=model.from_record,
        live_calls=model.live_calls,
    )
    after = first or 0
    mine = store.record.steps(sid) if sid else []
    result.outside = [
        {"stepId": m.display_id, "tool": d.get("tool"), "effect": d.get("effect", "irreversible")}
        for m in outside_steps(mine, after)
        if isinstance(d := m.input_data, dict)
    ]
    result.divergences = compare(
        [s for s in steps if s.seq >= after],
        [s for s in (store.record.steps(sid) if sid else []) if s.seq >= after],
        masks=_masks(runtime, source_id, sid),
        with_model=live is not None,
    )
    if failure is not None and model.exhausted and not result.divergences:
        # Every recorded step was reproduced and the record simply stops here (a session
        # interrupted, or waiting, mid-turn): the end of the record, not a divergence.
        result.record_ended = True
    elif failure is not None:
        result.divergences.append(
            Divergence("run_failed", None, None, MAIN_AGENT, replayed=failure[:_SHOWN])
        )
    return result


def _starts_turn(steps: list[Step], seq: int) -> bool:
    """Whether the step at `seq` is a main-agent user message (a turn's first step)."""
    step = next((s for s in steps if s.seq == seq), None)
    return step is not None and step.step_type is StepType.USER_INPUT and step.agent == MAIN_AGENT


def _recorded_decisions(steps: list[Step]) -> dict[tuple[str, str | None], bool]:
    paths = agent_paths(steps)
    out: dict[tuple[str, str | None], bool] = {}
    for s in steps:
        if (
            s.step_type is StepType.SYSTEM_ALERT
            and s.name == APPROVAL_STEP_NAME
            and s.status is StepStatus.COMPLETED
            and isinstance(s.output_data, dict)
        ):
            out[(paths.get(s.agent, s.agent), s.call_id)] = bool(s.output_data.get("approved"))
    return out


def _masks(runtime: Any, source_id: str, new_id: str) -> list[tuple[str, str]]:
    """Text that differs between the two sessions by construction (their workspace paths
    and ids), replaced by the same placeholder on both sides before comparing."""
    pairs = []
    for sid in (source_id, new_id):
        if sid:
            pairs.append((str(runtime.toolbox.workspace(sid)), "<workspace>"))
            pairs.append((sid, "<session>"))
    return pairs


def _normal(text: str, masks: list[tuple[str, str]]) -> str:
    for needle, placeholder in masks:
        text = text.replace(needle, placeholder)
    return text


def _final_tool_steps(steps: list[Step]) -> dict[tuple[str, str], list[Step]]:
    """(agent path, call id) -> the tool steps that ran to an end (interrupted attempts
    dropped), in order."""
    paths = agent_paths(steps)
    out: dict[tuple[str, str], list[Step]] = defaultdict(list)
    for s in steps:
        if (
            s.step_type is StepType.TOOL_CALL
            and s.call_id
            and not s.interrupted
            and s.status is not StepStatus.RUNNING
        ):
            out[(paths.get(s.agent, s.agent), s.call_id)].append(s)
    return out


def compare(
    recorded: list[Step],
    replayed: list[Step],
    *,
    masks: list[tuple[str, str]] | None = None,
    with_model: bool = False,
) -> list[Divergence]:
    """Every difference between the two records' tool results (and, with a live model,
    model answers), ordered by where it happened in the record (first one first)."""
    masks = masks or []
    old = _final_tool_steps(recorded)
    new = _final_tool_steps(replayed)
    found: list[tuple[int, Divergence]] = []
    for (path, call_id), olds in old.items():
        news = new.get((path, call_id), [])
        for i, o in enumerate(olds):
            n = news[i] if i < len(news) else None
            if n is None:
                found.append(
                    (
                        o.seq,
                        Divergence(
                            "not_replayed",
                            o.display_id,
                            None,
                            path,
                            o.name,
                            call_id,
                            _cut(tool_output_text(o)),
                        ),
                    )
                )
                continue
            a = _normal(tool_output_text(o), masks)
            b = _normal(tool_output_text(n), masks)
            if a.startswith(NOT_RUN) and b.startswith(NOT_RUN):
                # Not run in both: the same outcome, whoever refused (the record's answer
                # names a person or the missing terminal; the replay's, the replay).
                continue
            if o.status is not n.status:
                found.append(
                    (
                        o.seq,
                        Divergence(
                            "tool_status",
                            o.display_id,
                            n.display_id,
                            path,
                            o.name,
                            call_id,
                            o.status.value,
                            n.status.value,
                            _cut(a),
                            _cut(b),
                        ),
                    )
                )
            elif a != b:
                found.append(
                    (
                        o.seq,
                        Divergence(
                            "tool_result",
                            o.display_id,
                            n.display_id,
                            path,
                            o.name,
                            call_id,
                            _cut(a),
                            _cut(b),
                        ),
                    )
                )
    last = max((s.seq for s in recorded), default=0)
    # Calls the record started but never saw end (interrupted): their outcome is unknown, so
    # the replay's attempt is compared with nothing and is no extra call either.
    paths = agent_paths(recorded)
    started = {
        (paths.get(s.agent, s.agent), s.call_id)
        for s in recorded
        if s.step_type is StepType.TOOL_CALL and s.call_id
    }
    for (path, call_id), news in new.items():
        if (path, call_id) in started and not old.get((path, call_id)):
            continue
        extra = news[len(old.get((path, call_id), [])) :]
        for n in extra:
            found.append(
                (
                    last + n.seq,
                    Divergence(
                        "extra_call",
                        None,
                        n.display_id,
                        path,
                        n.name,
                        call_id,
                        None,
                        _cut(tool_output_text(n)),
                    ),
                )
            )
    if with_model:
        olds_by = recorded_answers(recorded)
        news_by = recorded_answers(replayed)
        for path, olds in olds_by.items():
            for o, n in zip(olds, news_by.get(path, []), strict=False):
                if _answer_of(o) != _answer_of(n):
                    found.append(
                        (
                            o.seq,
                            Divergence(
                                "model_output",
                                o.display_id,
                                n.display_id,
                                path,
                                None,
                                None,
                                _cut(str(_answer_of(o))),
                                _cut(str(_answer_of(n))),
                            ),
                        )
                    )
                    break
    found.sort(key=lambda pair: pair[0])
    return [d for _, d in found]


def _answer_of(step: Step) -> tuple[str, tuple[tuple[str, str], ...]]:
    out = step.output_data if isinstance(step.output_data, dict) else {}
    calls = tuple(
        (str(c.get("name")), repr(sorted((c.get("input") or {}).items())))
        for c in out.get("tool_calls") or ()
        if isinstance(c, dict)
    )
    return str(out.get("text") or ""), calls


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= _SHOWN:
        return text
    return text[:_SHOWN] + "…"


__all__ = ["Divergence", "RecordedModel", "ReplayResult", "compare", "replay"]
