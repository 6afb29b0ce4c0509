"""What xclaw adds to a real model's time: Gemma 3 270M on llama-cpp-python's server, the
same requests sent straight to it (httpx) and through xclaw's runtime in process.

Each round takes a new prompt and sends the very body xclaw sends for it (system prompt,
tools, the user's message, `max_tokens`, temperature 0: the same greedy generation):

1. once straight to the server to warm its prompt cache (not measured), so that both
   measured requests find the whole prompt cached and differ only in who sent them;
2. straight to the server with httpx, streaming, reading every event (the "model" time);
3. through xclaw: a new session in a Runtime on a SQLite store, the message sent, the
   turn awaited to its reply (user_input, llm_call with its streamed deltas and the
   final answer committed durably, the status frames) — the "xclaw" time.

2 and 3 alternate their order round by round; the figures are medians over the rounds.
xclaw's added time is read two ways:

- paired: (3) - (2) per round. On a shared machine the model's own speed moves by seconds
  from one request to the next, which swamps milliseconds: a figure for a quiet machine;
- beyond the server's own time: llama.cpp logs each generation's `total time`; a request's
  wall time minus it is what the client side and the HTTP between cost, for httpx and for
  xclaw alike, request by request, whatever the load. xclaw's figure minus httpx's, over
  the model's own time, is the share. Goal: <= 2 %.

Also shown: xclaw's time outside its model call (the turn minus the provider call), the time
to the first token both ways, and the model's speed (tokens/s from the first to the last).

A second part counts tool calls over N tries of xclaw's own request (the same tools and
system prompt), per `tool_choice`: none sent (what xclaw sends by default), `auto`, and the
named function that `first_tool_choice: shell` sends on a turn's first call.

    .venv/bin/python bench/local_model_bench.py                  # 30 rounds, 20 tool tries
    .venv/bin/python bench/local_model_bench.py --rounds 30 --tries 50
    .venv/bin/python bench/local_model_bench.py --url http://127.0.0.1:8080/v1   # a running server

Without --url it starts the server itself (tests/local_model/llama.py: the virtualenv from
$XCLAW_TEST_LLAMA or the one .ci/run builds) and stops it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.local_model.llama import LlamaServer, llama_python, model_file
from xclaw.agent.loop import DEFAULT_SYSTEM_PROMPT
from xclaw.config.settings import Settings, load_settings
from xclaw.llm.base import LLMRequest
from xclaw.llm.messages import UserMessage
from xclaw.llm.openai import openai_request
from xclaw.llm.registry import entry
from xclaw.runtime.runtime import Runtime
from xclaw.store import open_store
from xclaw.tools.base import spec_of
from xclaw.tools.registry import default_tools

MODEL = "gemma-3-270m"
MAX_TOKENS = 64


def prompt(i: int) -> str:
    """A different prompt each round, which this model answers at some length (it tends to
    repeat what it is given)."""
    return "Continue the list: " + ", ".join(str(n) for n in range(10 * i + 1, 10 * i + 21))


def body_for(
    text: str, tools: tuple[Any, ...], *, first_tool_choice: str | None = None
) -> dict[str, Any]:
    request = LLMRequest(
        system=DEFAULT_SYSTEM_PROMPT,
        messages=(UserMessage(text),),
        tools=tools,
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        turn_start=True,
    )
    body = openai_request(MODEL, request, first_tool_choice=first_tool_choice)
    return {**body, "stream": True, "stream_options": {"include_usage": True}}


@dataclass
class Direct:
    seconds: float
    first_token_s: float
    events: int  # content events: one per token on this server
    generating_s: float
    text: str


async def direct(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Direct:
    t0 = time.perf_counter()
    first = last = 0.0
    events = 0
    text: list[str] = []
    async with client.stream("POST", f"{url}/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices") or ():
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    events += 1
                    text.append(piece)
    end = time.perf_counter()
    return Direct(end - t0, (first or end) - t0, events, max(0.0, last - first), "".join(text))


class Timed:
    """The runtime's model, timed: how long each call to the provider took inside xclaw
    (the SDK's request and stream, the deltas handed on), to tell xclaw's own time in a turn
    from its model call's without a second request."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.last = 0.0  # the call's duration
        self.first = 0.0  # its first delta, from its start
        self.tail = 0.0  # from its last delta to its return

    async def complete(self, request: LLMRequest, on_event: Any = None) -> Any:
        from xclaw.llm.events import ModelEvent, TextDelta

        t0 = time.perf_counter()
        seen: list[float] = []

        async def timed(event: ModelEvent) -> None:
            if isinstance(event, TextDelta):
                seen.append(time.perf_counter())
            if on_event is not None:
                await on_event(event)

        try:
            return await self.inner.complete(request, timed)
        finally:
            end = time.perf_counter()
            self.last = end - t0
            self.first = (seen[0] if seen else end) - t0
            self.tail = end - (seen[-1] if seen else end)

    async def context_window(self) -> int | None:
        return await self.inner.context_window()


async def through_xclaw(runtime: Runtime, text: str) -> tuple[float, Timed, str]:
    """(the turn's wall time, its timed model (last call's figures), the reply)."""
    session, _ = await runtime.open(None)
    sid = session.session_id
    replies: list[str] = []
    runtime.subscribe(
        sid, lambda f: replies.append(str(f.get("content"))) if f.get("type") == "reply" else None
    )
    t0 = time.perf_counter()
    await runtime.send(sid, text)
    await runtime.wait_idle(sid)
    turn = time.perf_counter() - t0
    model = runtime.model
    assert isinstance(model, Timed)
    return turn, model, replies[-1] if replies else ""


_TOTAL = re.compile(r"llama_perf_context_print:\s+total time =\s+([\d.]+) ms")


def server_times(log: Path | None, rounds: int) -> list[tuple[float, float]] | None:
    """Per round, the server's own time for (the httpx request, xclaw's), in seconds, from
    the `total time` llama.cpp logs after each generation, in the order the requests came:
    the first run, then per round the warm-up and the pair. None when not knowable."""
    if log is None:
        return None
    totals = [float(t) / 1000 for t in _TOTAL.findall(log.read_text(errors="replace"))]
    if len(totals) < 1 + 3 * rounds:
        return None
    out = []
    for i in range(1, rounds + 1):
        a, b = totals[3 * i - 1], totals[3 * i]  # the pair after round i's warm-up
        out.append((a, b) if i % 2 else (b, a))
    return out


async def latency(url: str, rounds: int, log: Path | None) -> None:
    home = Path(tempfile.mkdtemp(prefix="xclaw-local-bench-"))
    settings = Settings(
        home=home,
        database=str(home / "x.db"),
        workspace_root=home / "ws",
        providers=(entry(f"openai:{MODEL}", {"base_url": url}),),
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        context_window_tokens=4096,
    )
    runtime = Runtime(open_store(settings.database), settings)
    runtime._model = Timed(runtime.model)
    tools = tuple(spec_of(t) for t in default_tools(load_settings(cwd=home).tool_setup()).values())
    rows: list[tuple[Direct, float, float, bool]] = []
    firsts: list[tuple[float, float]] = []  # time to the first token: (httpx, xclaw's call)
    tails: list[tuple[float, float]] = []  # last token to the end: (httpx, xclaw's call)
    async with httpx.AsyncClient(timeout=600) as client:
        await through_xclaw(runtime, prompt(0))  # first run: the model is built, the server asked
        for i in range(1, rounds + 1):
            body = body_for(prompt(i), tools)
            await direct(client, url, body)  # warm the server's prompt cache
            if i % 2:
                d = await direct(client, url, body)
                x, timed, said = await through_xclaw(runtime, prompt(i))
            else:
                x, timed, said = await through_xclaw(runtime, prompt(i))
                d = await direct(client, url, body)
            inner = timed.last
            rows.append((d, x, inner, said == d.text))
            firsts.append((d.first_token_s, timed.first))
            tails.append((d.seconds - d.first_token_s - d.generating_s, timed.tail))
            print(
                f"  round {i:>2}: model {d.seconds * 1000:7.1f} ms ({d.events} tokens)  "
                f"xclaw {x * 1000:7.1f} ms  added {(x - d.seconds) * 1000:7.1f} ms  "
                f"(outside its model call {(x - inner) * 1000:5.1f} ms)"
                + ("" if said == d.text else "  (answers differ)"),
                flush=True,
            )
    await runtime.shutdown()
    runtime.store.close()
    med = statistics.median
    model = [d.seconds for d, *_ in rows]
    through = [x for _, x, _, _ in rows]
    added = [x - d.seconds for d, x, _, _ in rows]
    outside = [x - inner for _, x, inner, _ in rows]
    rate = [d.events / d.generating_s for d, *_ in rows if d.generating_s > 0 and d.events > 1]
    print()
    print(f"model time per call (httpx)    median {med(model) * 1000:8.1f} ms")
    print(f"the same through xclaw         median {med(through) * 1000:8.1f} ms")
    print(
        f"time to first token            median {med(a for a, _ in firsts) * 1000:8.1f} ms "
        f"(httpx), {med(b for _, b in firsts) * 1000:.1f} ms (xclaw's call)"
    )
    print(
        f"last token to the call's end   median {med(a for a, _ in tails) * 1000:8.1f} ms "
        f"(httpx), {med(b for _, b in tails) * 1000:.1f} ms (xclaw's call)"
    )
    print(f"model speed                    median {med(rate):8.1f} tokens/s")
    print(
        f"xclaw adds per step (paired)   median {med(added) * 1000:8.1f} ms = "
        f"{med(added) / med(model) * 100:5.2f} % of the model's time   (goal <= 2 %)"
    )
    print(
        f"xclaw outside its model call   median {med(outside) * 1000:8.1f} ms = "
        f"{med(outside) / med(model) * 100:5.2f} %"
    )
    same = sum(1 for *_, ok in rows if ok)
    print(f"same answer both ways          {same}/{len(rows)} rounds")
    # The model's speed moves with the machine's load from one request to the next, and that
    # noise swamps a few milliseconds in the paired figure above. The server logs its own time
    # for each generation: a request's time minus it is what the client side (and the HTTP
    # between) cost, whoever the client is — compared here request by request.
    served = server_times(log, len(rows))
    if served is None:
        print("(the server's own times are known only for a server this script started)")
        return
    direct_over = [d.seconds - s for (d, *_), (s, _) in zip(rows, served, strict=True)]
    xclaw_over = [x - s for (_, x, _, _), (_, s) in zip(rows, served, strict=True)]
    extra = [b - a for a, b in zip(direct_over, xclaw_over, strict=True)]
    own = med(s for s, _ in served)
    print(
        f"beyond the server's own time   median {med(direct_over) * 1000:8.1f} ms (httpx), "
        f"{med(xclaw_over) * 1000:.1f} ms (xclaw)"
    )
    print(
        f"xclaw adds per step            median {med(extra) * 1000:8.1f} ms = "
        f"{med(extra) / own * 100:5.2f} % of the model's own time ({own * 1000:.0f} ms)   "
        "(goal <= 2 %)"
    )


async def tool_calls(url: str, tries: int) -> None:
    """How often xclaw's request gets a tool call back, per tool_choice."""
    home = Path(tempfile.mkdtemp(prefix="xclaw-local-bench-"))
    tools = tuple(spec_of(t) for t in default_tools(load_settings(cwd=home).tool_setup()).values())
    asks = [
        "Run the command: date",
        "List the files in the workspace.",
        "Show the current directory with pwd.",
        "Count the lines of README.md with wc -l.",
        "Print hello with echo.",
    ]
    ways: dict[str, Any] = {
        "none sent (default)": None,
        "auto": "auto",
        "first_tool_choice: shell": "shell",
    }
    print()
    print(f"tool calls over {tries} tries of xclaw's request (server's default temperature):")
    print(
        "  tool_choice               tool call  valid args  text  failed in the stream  HTTP error"
    )
    async with httpx.AsyncClient(timeout=600) as client:
        for label, choice in ways.items():
            counts = {"call": 0, "valid": 0, "text": 0, "failed": 0, "error": 0}
            for i in range(tries):
                body = body_for(
                    asks[i % len(asks)],
                    tools,
                    first_tool_choice=choice if choice not in (None, "auto") else None,
                )
                body.pop("temperature", None)
                if choice == "auto":
                    body["tool_choice"] = "auto"
                outcome = await _one_tool_try(client, url, body)
                counts[outcome] += 1
                if outcome == "valid":
                    counts["call"] += 1
            print(
                f"  {label:<24}  {counts['call']:>9}  {counts['valid']:>10}  {counts['text']:>4}  "
                f"{counts['failed']:>20}  {counts['error']:>10}",
                flush=True,
            )


async def _one_tool_try(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> str:
    """valid (a tool call whose arguments are a JSON object with a command), call (a tool
    call with bad arguments), text, failed (a 200 whose stream ended with no event or broke
    off: llama-cpp-python failing inside the response), error (an HTTP error status)."""
    from xclaw.llm.wire import parse_tool_arguments

    events = 0
    args = ""
    called = False
    try:
        async with client.stream("POST", f"{url}/chat/completions", json=body) as r:
            if r.status_code != 200:
                return "error"
            async for line in r.aiter_lines():
                if not line.startswith("data: {"):
                    continue  # comments (sse-starlette's pings), [DONE]
                events += 1
                for choice in json.loads(line[6:]).get("choices") or ():
                    for frag in (choice.get("delta") or {}).get("tool_calls") or ():
                        called = True
                        args += (frag.get("function") or {}).get("arguments") or ""
    except httpx.HTTPError:  # the server closed the connection without a response
        return "failed"
    if not events:
        return "failed"
    if not called:
        return "text"
    parsed = parse_tool_arguments(args)
    return "valid" if "_error" not in parsed and isinstance(parsed.get("command"), str) else "call"


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30, help="measured rounds (default 30)")
    ap.add_argument("--tries", type=int, default=20, help="tool-call tries per way (default 20)")
    ap.add_argument("--url", help="a running server's base URL (default: start one)")
    args = ap.parse_args()
    if args.rounds < 1 or args.tries < 0:
        ap.error("--rounds must be >= 1 and --tries >= 0")
    server = None
    log: Path | None = None
    url = args.url
    if url is None:
        python = llama_python()
        log = Path(tempfile.mkdtemp(prefix="xclaw-llama-")) / "server.log"
        # The server's own thread defaults, as a user starting it by hand gets them.
        server = LlamaServer(python, model_file(python), log, threads=None).launch().wait_ready()
        url = server.url
        print(f"llama-cpp-python server on {url} (log {log})")
    try:
        # A busy neighbour moves the model's speed from one second to the next: say how busy.
        print(f"load average {os.getloadavg()[0]:.2f} at the start")
        print(f"latency: {args.rounds} rounds, max_tokens {MAX_TOKENS}, temperature 0")
        await latency(url, args.rounds, log if server is not None else None)
        print(f"load average {os.getloadavg()[0]:.2f} at the end of the latency rounds")
        if args.tries:
            await tool_calls(url, args.tries)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
