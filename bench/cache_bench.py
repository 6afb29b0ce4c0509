"""What prompt caching saves: a 30-call agent session (each call answers with a tool call whose
~2 KB result joins the conversation) through the real anthropic SDK and xclaw's
AnthropicModel, against a loopback fake that reports cache usage as Anthropic does — cache
reads are the longest prefix already cached up to one of the request's breakpoints
(tests/llm/fakes.py PromptCache).

    python bench/cache_bench.py [--calls 30] [--model claude-sonnet-4-5]

Prints per call the input tokens and the part read from / written to cache, then the share of
input read from cache (all calls, and once warm: from the second call on; goal >= 80 %) and
the session's cost with and without caching at the model's list price (xclaw/llm/prices.py).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.llm.fakes import FakeAnthropicServer, FakeCall, Reply
from xclaw.agent.loop import DEFAULT_SYSTEM_PROMPT
from xclaw.llm.anthropic import AnthropicModel
from xclaw.llm.base import LLMRequest
from xclaw.llm.prices import BUILTIN_PRICES
from xclaw.messages import AssistantMessage, Message, ToolResultMessage, Usage, UserMessage
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
    return tuple(default_tools().specs())


async def run_session(calls: int = 30, *, cache: bool = True) -> Result:
    """One session of `calls` LLM calls; returns the usage the server reported for each."""
    with FakeAnthropicServer(cache_accounting=True) as srv:
        for i in range(calls - 1):
            srv.push(
                Reply(
                    text=f"Step {i}: looking at part {i}.",
                    tool_calls=[FakeCall.of("read_file", {"path": f"part{i}.txt"}, id=f"toolu_{i}")],
                )
            )
        srv.push(Reply(text="All parts read."))
        model = AnthropicModel("claude-bench", api_key="sk-bench-key", base_url=srv.url, cache=cache)
        tools = _tool_specs()
        messages: list[Message] = [UserMessage("Read every part and summarise them.")]
        usages: list[Usage] = []
        for _ in range(calls):
            request = LLMRequest(system=DEFAULT_SYSTEM_PROMPT, messages=tuple(messages), tools=tools)
            response = await model.complete(request)
            usages.append(response.usage)
            messages.append(AssistantMessage(response.text, response.tool_calls))
            for call in response.tool_calls:
                messages.append(ToolResultMessage(call.id, call.name, TOOL_OUTPUT))
        assert not srv.rejections, srv.rejections
    return Result(usages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--model", default="claude-sonnet-4-5", help="whose prices to apply")
    args = parser.parse_args()
    price = BUILTIN_PRICES[args.model]
    cached = asyncio.run(run_session(args.calls))
    plain = asyncio.run(run_session(args.calls, cache=False))
    print(f"{'call':>4}  {'input':>7}  {'read':>7}  {'written':>7}")
    for i, u in enumerate(cached.usages, 1):
        print(f"{i:>4}  {u.prompt_tokens:>7}  {u.cache_read_tokens:>7}  {u.cache_write_tokens:>7}")
    total = cached.total
    with_cache = sum(price.cost(u) for u in cached.usages)
    without = sum(price.cost(u) for u in plain.usages)
    print()
    print(f"calls: {args.calls}, input tokens: {total.prompt_tokens}, output: {total.completion_tokens}")
    print(f"share of input read from cache: {100 * cached.read_share():.1f} % (all calls), "
          f"{100 * cached.read_share(1):.1f} % once warm (goal >= 80 %)")
    print(f"cost at {args.model} prices: ${with_cache:.4f} with caching, ${without:.4f} without "
          f"({100 * (1 - with_cache / without):.0f} % saved)")


if __name__ == "__main__":
    main()
