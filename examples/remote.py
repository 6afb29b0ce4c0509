"""The same program through a running gateway: `xclaw.connect` instead of `xclaw.open`.

    python examples/remote.py URL [TOKEN]

URL is the gateway's (`http://127.0.0.1:3000`, or the `?token=` link `xclaw serve` prints);
TOKEN its access token (XCLAW_TOKEN, or $XCLAW_HOME/token on its machine).
"""

from __future__ import annotations

import asyncio
import sys

import xclaw


async def main(url: str, token: str | None) -> None:
    async with xclaw.connect(url, token=token) as agent:
        session = await agent.new_session(title="remote notes")
        result = await session.send("prepare the release notes", approve=True)
        print("reply:", result.reply)
        for step in await session.steps():
            print(step.id, step.type, step.name, step.status)
        branch = await session.fork("s0002", title="shorter")
        print("fork:", (await branch.send("make it shorter", approve=True)).reply)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
