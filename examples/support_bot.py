"""A support bot on xclaw (docs/agents.md): no shell and no files, one tool of its own that
reads its context, and a structured ticket as its answer.

    python examples/support_bot.py [DB]
"""

from __future__ import annotations

import asyncio
import sys

from pydantic import BaseModel, Field

import xclaw
from xclaw.frames import ToolFrame


class Ticket(BaseModel):
    """What the bot files for each request."""

    summary: str = Field(description="one line: what the customer needs")
    order_id: str | None = Field(description="the order it is about, if any")
    priority: int = Field(ge=1, le=3, description="1: urgent, 3: whenever")


@xclaw.tool(read_only=True)
def order_status(order_id: str, ctx: xclaw.ToolContext) -> str:
    """The delivery status of an order.

    Args:
        order_id: the order's id, like A-1
    """
    orders: dict[str, str] = ctx.deps  # the program's own object, given to xclaw.open
    return f"{order_id}: {orders.get(order_id, 'unknown order')} (asked in {ctx.session_id})"


support = xclaw.Agent(
    "support",
    description="answers order questions",
    instructions="You answer customers about their orders. File one ticket per request.",
    builtin_tools=[],  # no shell, no files
    tools=[order_status],
    output_type=Ticket,
)


async def main(db: str) -> None:
    async with xclaw.open(
        db=db,
        model="script:examples/scripts/support.json",
        agent=support,
        deps={"A-1": "shipped on Monday"},
    ) as agent:
        print("tools:", [t.name for t in await agent.tools()])
        session = await agent.new_session()
        result = await session.send("Where is my order A-1? It is late!")
        for event in result.of_type("tool"):
            if isinstance(event, ToolFrame) and event.state != "running":
                print(f"[{event.name}] {event.state}: {event.output}")
        ticket = result.output_as(Ticket)
        print(f"ticket: {ticket.summary} (order {ticket.order_id}, priority {ticket.priority})")
        print("recorded:", (await session.info()).agent)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "support.db"))
