"""What prompt caching saves: a 30-call agent session (each call answers with a tool call whose
~2 KB result joins the conversation) through the real anthropic SDK and xclaw's
AnthropicModel, against a loopback fake that reports cache usage as Anthropic does — cache
reads are the longest prefix already cached up to one of the request's breakpoints
(tests/llm/fakes.py PromptCache).

    python bench/cache_bench.py [--calls 30] [--model claude-sonnet-4-5] [--compact-calls 60]

Prints per call the input tokens and the part read from / written to cache, then the share of
input read from cache (all calls, and once warm: from the second call on; goal >= 80 %) and
the session's cost with and without caching at the model's list price (xclaw/llm/prices.py).

Then the same across a compaction: the agent loop itself (xclaw/agent/loop.py) runs a longer
session in a window small enough to fill, so the conversation is summarised mid-session; the
share read from cache is printed before, for the summary call, and after it. Trimming the
oldest turns instead (compact_at off) is shown for comparison: it changes the prompt's
beginning on every call, so almost nothing is read from cache once it starts.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.llm.fakes import FakeAnthropicServer, FakeCall, Reply
from xclaw.agent.loop import DEFAULT_SYSTEM_PROMPT
from xclaw.llm.anthropic import AnthropicModel
from xclaw.llm.base import LLMRequest
from xclaw.llm.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    call_signature,
)
from xclaw.llm.registry import provider_prices
from xclaw.tools.base import Tool, spec_of
from xclaw.tools.registry import default_tools

TOOL_OUTPUT = "\n".join(f"line {i}: " + "lorem ipsum dolor sit amet " * 3 for i in range(24))


@dataclass
class Result:
    usages: list[Usage]

    @property
    def total(self) -> Usage:
        out = Usage()
        for u in self.usages:
            out = out + u
        return out

    def read_share(self, first: int = 0) -> float:
        part = self.usages[first:]
        sent = sum(u.prompt_tokens for u in part)
        return sum(u.cache_read_tokens for u in part) / max(1, sent)


def _tool_specs() -> tuple:
    """The real built-in tools' specs: the prefix a real session sends."""
    return tuple(spec_of(t) for t in default_tools().values())


async def run_session(calls: int = 30, *, cache: bool = True) -> Result:
    """One session of `calls` LLM calls; returns the usage the server reported for each."""
    with FakeAnthropicServer(cache_accounting=True) as srv:
        for i in range(calls - 1):
            srv.push(
                Reply(
                    text=f"Step {i}: looking at part {i}.",
                    tool_calls=[
                        FakeCall.of("read_file", {"path": f"part{i}.txt"}, id=f"toolu_{i}")
                    ],
                )
            )
        srv.push(Reply(text="All parts read."))
        model = AnthropicModel(
            "claude-bench", api_key="sk-bench-key", base_url=srv.url, cache=cache
        )
        tools = _tool_specs()
        messages: list[Message] = [UserMessage("Read every part and summarise them.")]
        usages: list[Usage] = []
        for _ in range(calls):
            request = LLMRequest(
                system=DEFAULT_SYSTEM_PROMPT, messages=tuple(messages), tools=tools
            )
            response = await model.complete(request)
            usages.append(response.usage)
            messages.append(AssistantMessage(response.text, response.tool_calls))
            for call in response.tool_calls:
                messages.append(ToolResultMessage(call.id, call.name, TOOL_OUTPUT))
        assert not srv.rejections, srv.rejections
    return Result(usages)


class _Part(Tool):
    """A read-only tool whose output (~2 KB) grows the conversation like real tool output."""

    name = "read_part"
    description = "Read one part of the document."
    input_schema: ClassVar[dict] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    read_only = True
    parallel_safe = False

    async def run(self, args: dict, ctx: object) -> object:
        from xclaw.tools.base import ToolResult

        return ToolResult(f"part {args.get('n')}\n" + TOOL_OUTPUT)


class _Calls:
    """Wraps the model: remembers each call's usage and whether it was the summary call."""

    def __init__(self, inner: AnthropicModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.log: list[tuple[bool, Usage]] = []

    async def complete(self, request: LLMRequest, on_event: object = None) -> object:
        from xclaw.llm.context import COMPACT_INSTRUCTION

        last = request.messages[-1]
        summary = isinstance(last, UserMessage) and last.text == COMPACT_INSTRUCTION
        response = await self.inner.complete(request, on_event)  # type: ignore[arg-type]
        self.log.append((summary, response.usage))
        return response


async def run_compacting_session(
    calls: int = 60, *, compact: bool = True
) -> list[tuple[bool, Usage]]:
    """An agent-loop session of `calls` model calls in a 24k-token window."""
    import tempfile

    from xclaw.agent.loop import Agent, AgentConfig
    from xclaw.llm.context import COMPACT_INSTRUCTION
    from xclaw.tools.base import ToolContext

    class Allow:
        kind, reason, confine = "allow", "", False

        async def review(self, tool: object, args: object, workspace: object) -> Allow:
            return self

    class Quiet:
        """Every AgentObserver event ignored (the record is not what this measures)."""

        async def _nothing(self, *a: object) -> None:
            return None

        def recorded_signature(self, call: ToolCall) -> str:
            return call_signature(call.name, call.input)

        def __getattr__(self, name: str) -> object:
            if name == "child":
                return lambda call: self
            if name == "resume_child":
                return self._nothing
            return self._nothing

    def respond(body: dict) -> Reply | None:
        last = body["messages"][-1]["content"]
        if any(isinstance(b, dict) and b.get("text") == COMPACT_INSTRUCTION for b in last):
            return Reply(text="Summary: parts 0 to N were read; keep reading the next parts. " * 8)
        return None

    with FakeAnthropicServer(cache_accounting=True) as srv:
        srv.responder = respond
        for i in range(calls - 1):
            srv.push(
                Reply(
                    text=f"Reading part {i}.",
                    tool_calls=[FakeCall.of("read_part", {"n": i}, id=f"toolu_{i}")],
                )
            )
        srv.push(Reply(text="All parts read."))
        model = _Calls(AnthropicModel("claude-bench", api_key="sk-bench-key", base_url=srv.url))
        with tempfile.TemporaryDirectory() as tmp:
            agent = Agent(
                model=model,
                tools={"read_part": _Part()},
                policy=Allow(),
                approver=None,  # type: ignore[arg-type]
                observer=Quiet(),  # type: ignore[arg-type]
                context=ToolContext(workspace=Path(tmp), session_id="bench"),
                config=AgentConfig(
                    max_iterations=calls + 5,
                    context_window_tokens=24_000,
                    max_tokens=2_000,
                    compact_at=0.8 if compact else None,
                ),
            )
            await agent.run([], user_text="Read every part of the document.")
        assert not srv.rejections, srv.rejections
    return model.log


def _share(usages: list[Usage]) -> float:
    return sum(u.cache_read_tokens for u in usages) / max(1, sum(u.prompt_tokens for u in usages))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--model", default="claude-sonnet-4-5", help="whose prices to apply")
    parser.add_argument("--compact-calls", type=int, default=60)
    args = parser.parse_args()
    price = provider_prices()[args.model]
    cached = asyncio.run(run_session(args.calls))
    plain = asyncio.run(run_session(args.calls, cache=False))
    print(f"{'call':>4}  {'input':>7}  {'read':>7}  {'written':>7}")
    for i, u in enumerate(cached.usages, 1):
        print(f"{i:>4}  {u.prompt_tokens:>7}  {u.cache_read_tokens:>7}  {u.cache_write_tokens:>7}")
    total = cached.total
    with_cache = sum(price.cost(u) for u in cached.usages)
    without = sum(price.cost(u) for u in plain.usages)
    print()
    print(
        f"calls: {args.calls}, input tokens: {total.prompt_tokens}, output: {total.completion_tokens}"
    )
    print(
        f"share of input read from cache: {100 * cached.read_share():.1f} % (all calls), "
        f"{100 * cached.read_share(1):.1f} % once warm (goal >= 80 %)"
    )
    print(
        f"cost at {args.model} prices: ${with_cache:.4f} with caching, ${without:.4f} without "
        f"({100 * (1 - with_cache / without):.0f} % saved)"
    )

    log = asyncio.run(run_compacting_session(args.compact_calls))
    at = [i for i, (summary, _) in enumerate(log) if summary]
    print()
    print(f"across compaction: {len(log)} model calls, summary call(s) at {[i + 1 for i in at]}")
    if at:
        first = at[0]
        before = [u for _, u in log[1:first]]
        after = [u for s, u in log[first + 1 :] if not s]
        print(
            f"  read from cache: {100 * _share(before):.1f} % before (warm), "
            f"{100 * _share([log[first][1]]):.1f} % for the summary call, "
            f"{100 * _share(after[:1]):.1f} % for the first call after it, "
            f"{100 * _share(after):.1f} % for all {len(after)} calls after it"
        )
    total = [u for _, u in log]
    print(
        f"  whole session: {100 * _share(total[1:]):.1f} % of input read from cache once warm; "
        f"${sum(price.cost(u) for u in total):.4f} at {args.model} prices"
    )
    trimmed = asyncio.run(run_compacting_session(args.compact_calls, compact=False))
    usages = [u for _, u in trimmed]
    print(
        f"  trimming instead: {100 * _share(usages[1:]):.1f} % read from cache once warm; "
        f"${sum(price.cost(u) for u in usages):.4f}"
    )


if __name__ == "__main__":
    main()
