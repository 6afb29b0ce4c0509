"""A lead agent that hands its work to a reviewer sub-agent (docs/agents.md): the reviewer
has its own instructions, only read_file, and answers with a structured review; its steps
are a subtree of the lead's trace.

    python examples/reviewer.py [DB]
"""

from __future__ import annotations

import asyncio
import sys

from pydantic import BaseModel

import xclaw


class Review(BaseModel):
    approved: bool
    issues: list[str]


reviewer = xclaw.Agent(
    "reviewer",
    description="reviews a change and lists its issues",
    instructions="You review code. Read the files named in the task; list every bug.",
    builtin_tools=["read_file"],
    output_type=Review,
)
lead = xclaw.Agent(
    "lead",
    instructions="You write code. Before you finish, have the reviewer review your change.",
    extend_default=True,
    builtin_tools=["read_file", "write_file", "edit_file"],
    sub_agents=[reviewer],
)


def show(nodes: list[xclaw.TreeNode], depth: int = 0) -> None:
    for node in nodes:
        who = "" if node.agent == "main" else f"  [sub-agent of {node.agent}]"
        print(f"{'  ' * depth}{node.id} {node.type} {node.name}{who}")
        show(node.children, depth + 1)


async def main(db: str) -> None:
    async with xclaw.open(
        db=db, model="script:examples/scripts/reviewer.json", agent=lead, approval="yolo"
    ) as agent:
        session = await agent.new_session()
        result = await session.send("write add(a, b) in add.py")
        print("reply:", result.reply)
        spawned = next(s for s in await session.steps() if s.name == "spawn_agent")
        review = Review.model_validate_json(spawned.output)  # the reviewer's answer
        print(f"review: approved={review.approved} issues={review.issues}")
        show(await session.trace())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "reviewer.db"))
