"""A program that declares its own agent, run as a real process by the durability tests
(tests/api/test_agent_durability.py): a support agent with instructions, no built-in tools,
tools of its own that read their ToolContext, a hook and a structured answer. It prints each
event of a run as a JSON line, so the test can SIGKILL it mid-tool and a fresh process can
resume the session — with the same definition, or (VARIANT v2) a changed one.

    python agent_child.py send    DB HOME SCRIPT VARIANT TEXT
    python agent_child.py resume  DB HOME SCRIPT VARIANT ID yes|no

VARIANT: v1, v2 (v1 with other instructions), lead (a lead whose sub-agent does the slow part),
replay (a read-only slow tool, and a hook that denies when asked a second time).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from pydantic import BaseModel

import xclaw


class Ticket(BaseModel):
    title: str
    priority: int


@xclaw.tool(read_only=True)
def note(text: str, ctx: xclaw.ToolContext) -> str:
    """Write a line to the session's notes."""
    with (ctx.workspace / "notes.txt").open("a") as f:
        f.write(f"{ctx.session_id} {text}\n")
    return "noted"


@xclaw.tool
def slow(ctx: xclaw.ToolContext) -> str:
    """Do the slow part (once: a second run returns at once)."""
    marker = ctx.workspace / "marker.txt"
    with marker.open("a") as f:
        f.write(f"{ctx.session_id} {ctx.step_id}\n")
    if len(marker.read_text().splitlines()) == 1:
        time.sleep(30)
    return "slow part done"


@xclaw.tool(read_only=True)
def slow_read(ctx: xclaw.ToolContext) -> str:
    """Read the slow part (read-only: run again after a crash; a second run returns at once)."""
    marker = ctx.workspace / "reads.txt"
    with marker.open("a") as f:
        f.write(f"{ctx.step_id}\n")
    if len(marker.read_text().splitlines()) == 1:
        time.sleep(30)
    return "read"


def counting(event: xclaw.BeforeTool) -> xclaw.HookDecision | None:
    """Allows the first time it is asked, denies after: asked again, it would answer otherwise."""
    asked = Path("hook-asked.txt")
    with asked.open("a") as f:
        f.write(f"{event.call_id}\n")
    if len(asked.read_text().splitlines()) > 1:
        return xclaw.deny("asked a second time")
    return None


def no_secrets(event: xclaw.BeforeTool) -> xclaw.HookDecision | None:
    if "secret" in str(event.input.get("text", "")):
        return xclaw.deny("notes must not hold secrets")
    return None


def support(variant: str) -> xclaw.Agent:
    if variant == "replay":  # a hook that would answer otherwise if it were asked again
        return xclaw.Agent(
            "support",
            builtin_tools=[],
            tools=[slow_read],
            output_type=Ticket,
            hooks=xclaw.Hooks(before_tool=counting),
        )
    if variant == "lead":  # the slow work is a declared sub-agent's
        reviewer = xclaw.Agent(
            "reviewer",
            description="does the slow part",
            instructions="You do the slow part.",
            builtin_tools=[],
            tools=[slow],
            output_type=Ticket,
        )
        return xclaw.Agent("lead", builtin_tools=[], tools=[note], sub_agents=[reviewer])
    return xclaw.Agent(
        "support",
        instructions="You answer support requests." + (" Be brief." if variant == "v2" else ""),
        builtin_tools=[],
        tools=[note, slow],
        output_type=Ticket,
        hooks=xclaw.Hooks(before_tool=no_secrets),
    )


def say(data: object) -> None:
    print(json.dumps(data), flush=True)


async def main(argv: list[str]) -> None:
    phase, db, home, script, variant = argv[:5]
    async with xclaw.open(
        db=db, home=home, model=f"script:{script}", approval="ask", agent=support(variant)
    ) as agent:
        if phase == "send":
            session = await agent.new_session()
            say({"session": session.id})
            events = session.send(argv[5], approve=True)
        else:
            session = await agent.session(argv[5])
            events = session.resume(approve=argv[6] == "yes")
        seen = []
        async for event in events:
            seen.append(event)
            say(event.wire())
        info = await session.info()
        output = xclaw.RunResult(session.id, seen, agent.load_output).output
        say(
            {
                "end": info.state,
                "output": output.model_dump() if isinstance(output, Ticket) else output,
            }
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
