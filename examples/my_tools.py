"""Your own tools: Python functions given to `xclaw.open(tools=[...])` (or listed in
xclaw.yaml's `tools:` as `module:function`). The model sees each one's schema from its type
hints and its docstring; the declared traits decide approval and what a crash does to it.

    python examples/my_tools.py [DATABASE]
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

import xclaw

ORDERS = {"A-1": "shipped", "A-2": "packing"}


@xclaw.tool(read_only=True)
def order_status(order_id: str) -> str:
    """The delivery status of an order."""
    return ORDERS.get(order_id, "unknown order")


@xclaw.tool(idempotent=True)
async def mark_shipped(order_id: str) -> str:
    """Mark an order shipped (safe to repeat: a crash mid-call runs it again)."""
    ORDERS[order_id] = "shipped"
    return f"{order_id} is shipped"


SCRIPT = {
    "turns": [
        {"tool_calls": [{"name": "order_status", "input": {"order_id": "A-2"}}]},
        {"tool_calls": [{"name": "mark_shipped", "input": {"order_id": "A-2"}}]},
        {"text": "A-2 was packing; it is marked shipped now."},
    ]
}


async def main(db: str) -> None:
    script = Path(tempfile.mkdtemp()) / "orders.json"
    script.write_text(json.dumps(SCRIPT))
    async with xclaw.open(
        db=db, model=f"script:{script}", approval="ask", tools=[order_status, mark_shipped]
    ) as agent:
        for tool in await agent.tools():
            if tool.source.startswith("Python"):
                print(f"{tool.name}: {tool.approval}; after a crash: {tool.resume}")
        session = await agent.new_session(title="orders")
        result = await session.send("ship A-2 if it is still packing", approve=True)
        for event in result.of_type("tool"):
            print(event.wire())
        print("reply:", result.reply)
        print("orders:", ORDERS)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "orders.db"))
