"""A hook that denies a tool call, with a reason the model reads (docs/agents.md): the
decision is a step of the record, replayed — not asked again — if the run is resumed.

    python examples/deny_hook.py [DB]
"""

from __future__ import annotations

import asyncio
import sys

import xclaw
from xclaw.frames import ToolFrame


def no_deletes(event: xclaw.BeforeTool) -> xclaw.HookDecision | None:
    """Before every tool call: a shell command that deletes is denied."""
    command = str(event.input.get("command", ""))
    if event.tool == "shell" and command.split()[:1] == ["rm"]:
        return xclaw.deny("this agent never deletes files; say what should go instead")
    return None  # no objection (the approval policy still applies)


careful = xclaw.Agent(
    "careful",
    instructions="Never delete anything.",
    extend_default=True,  # after xclaw's own prompt
    hooks=xclaw.Hooks(before_tool=no_deletes),
)


async def main(db: str) -> None:
    async with xclaw.open(
        db=db, model="script:examples/scripts/guard.json", agent=careful, approval="yolo"
    ) as agent:
        session = await agent.new_session()
        result = await session.send("clean up the build directory")
        for event in result.of_type("tool"):
            if isinstance(event, ToolFrame) and event.state == "failed":
                print(f"[{event.name}] {event.output}")
        print("reply:", result.reply)
        for step in await session.steps():
            if step.name == "hook":
                print(f"{step.id} hook: {step.input['decision']} by {step.input['by']['hook']}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "guard.db"))
