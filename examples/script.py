"""xclaw in an async program: a session, its events, approvals, the record, time travel.

    python examples/script.py [DATABASE] [MODEL]

Runs offline with the scripted model of examples/scripts/notes.json; give a real model
(`openai:gpt-4o-mini`, with OPENAI_API_KEY set) to run it against one.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import xclaw
from xclaw.frames import ApprovalRequestFrame, DeltaFrame, ReplyFrame, ToolFrame

HERE = Path(__file__).resolve().parent


async def main(db: str, model: str) -> None:
    async with xclaw.open(db=db, model=model, approval="ask") as agent:
        session = await agent.new_session(title="release notes")
        print(f"session {session.id}")
        async for event in session.send("prepare the release notes"):
            if isinstance(event, DeltaFrame):
                print(event.content, end="", flush=True)
            elif isinstance(event, ToolFrame) and event.state == "running":
                print(f"\n[{event.name}] {event.input}")
            elif isinstance(event, ApprovalRequestFrame):
                print(f"\napproving {event.name} ({event.reason})")
                await session.approve(event.step_id, True)
            elif isinstance(event, ReplyFrame):
                print(f"\nreply: {event.content}")

        for step in await session.steps():
            print(f"{step.id} {step.type:<12} {step.name:<10} {step.status}")
        usage = await session.usage()
        print(f"{usage.llm_calls} LLM calls, {usage.usage.input} tokens in")

        # A branch from the model's first answer, asked for something shorter.
        shorter = await session.fork("s0002", title="shorter notes")
        result = await shorter.send("make it shorter", approve=True)
        print(f"fork {shorter.id}: {result.reply}")

        # And this session rewound to before its tool call: the file is gone with it.
        rolled = await session.rollback("s0003")
        print(f"rolled back to before {rolled.step_id}: {rolled.deleted} steps deleted")


if __name__ == "__main__":
    database = sys.argv[1] if len(sys.argv) > 1 else "notes.db"
    spec = sys.argv[2] if len(sys.argv) > 2 else f"script:{HERE / 'scripts' / 'notes.json'}"
    asyncio.run(main(database, spec))
