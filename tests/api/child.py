"""A program that uses xclaw as a library, run as a real process by the durability tests
(tests/api/test_durability.py): it prints each event of a run as a JSON line, so the test can
SIGKILL it at a chosen moment, and a fresh process can take the session up again.

    python child.py send    DB HOME SCRIPT TEXT         a new session; prints {"session": ID}
    python child.py resume  DB HOME SCRIPT ID yes|no    resume() it, answering approvals
"""

from __future__ import annotations

import asyncio
import json
import sys

import xclaw


def say(data: object) -> None:
    print(json.dumps(data), flush=True)


async def main(argv: list[str]) -> None:
    phase, db, home, script = argv[:4]
    async with xclaw.open(db=db, home=home, model=f"script:{script}", approval="ask") as agent:
        if phase == "send":
            session = await agent.new_session()
            say({"session": session.id})
            events = session.send(argv[4], approve=True)
        else:
            session = await agent.session(argv[4])
            events = session.resume(approve=argv[5] == "yes")
        async for event in events:
            say(event.wire())
        info = await session.info()
        say({"end": info.state, "status": info.status})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
