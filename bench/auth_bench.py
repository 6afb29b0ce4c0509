"""What the team checks (docs/teams.md) cost the server, operation by operation, in CPU time on
a real SQLite store with N members, each owning sessions: a sign-in with a user's token (the
database asked), the per-frame re-check and part lookup (cached), a session made a member's,
and one tick of the watch over N open sockets. The per-task sum, over the 20 steps of
bench/gateway_bench.py's task, is what authorisation adds per step; set beside that bench's
"server ms/step" it gives the share, free of the noise a shared machine puts in an A/B run.

    .venv/bin/python bench/auth_bench.py              # 200 members
    .venv/bin/python bench/auth_bench.py --members 1000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from xclaw.gateway.access import SessionAccess
from xclaw.gateway.identity import Authenticator, SignedIn
from xclaw.gateway.settings import TeamSettings
from xclaw.people.teams import Identity, Need, UserRole, new_token, token_hash
from xclaw.store.sqlite.store import SQLiteStore
from xclaw.store.steps.model import NewStep, StepType
from xclaw.store.steps.rows import new_session_id
from xclaw.store.steps.writes import OpenTurn

STEPS_PER_TASK = 20


@dataclass(eq=False)
class FakeSocket:
    """What the watch reads of an open socket (xclaw/gateway/context.py Watched)."""

    signed: SignedIn
    session_id: str | None
    pending: bool = False

    def sign_out(self) -> None:
        raise AssertionError("signed out")

    def lose_session(self) -> None:
        raise AssertionError("lost")

    def keep_session(self) -> None:
        pass


async def per_op_us(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    """CPU microseconds per call (process time: every thread, as the server's figure)."""
    start = time.process_time()
    for _ in range(n):
        await fn()
    return (time.process_time() - start) / n * 1e6


async def main_async(members: int, sessions_each: int) -> None:
    from xclaw.config.settings import Settings
    from xclaw.gateway.context import Gateway

    with tempfile.TemporaryDirectory(prefix="xclaw-auth-bench-") as tmp:
        store = SQLiteStore(Path(tmp) / "x.db")
        teams = store.teams
        tokens = [new_token() for _ in range(members)]
        owned: list[str] = []
        for i, t in enumerate(tokens):
            teams.add_user(f"m{i}", UserRole.MEMBER, token_hash(t))
            for _ in range(sessions_each):
                sid = store.record.create_session().session_id
                teams.claim_session(sid, f"m{i}")
                owned.append(sid)
        auth = Authenticator("s" * 32, teams, TeamSettings())
        access = SessionAccess(store, teams)
        who = [Identity(f"m{i}", UserRole.MEMBER) for i in range(members)]
        i = 0

        async def sign_in_uncached() -> None:
            nonlocal i
            auth.forget()
            assert await auth.identify(tokens[i % members], "127.0.0.1", {}) is not None
            i += 1

        signed = await auth.identify(tokens[0], "127.0.0.1", {})
        assert signed is not None

        async def recheck_cached() -> None:
            assert await auth.still(signed)

        async def part_cached() -> None:
            await access.require(who[0], owned[0], Need.ACT)

        async def part_uncached() -> None:
            nonlocal i
            access.forget()
            k = i % members
            await access.require(who[k], owned[k * sessions_each], Need.ACT)
            i += 1

        # As the write that opens a member's first turn makes it (xclaw/runtime/opening.py),
        # the claim rides in the transaction that creates the session: 200 turn openings with
        # and without an owner, in CPU time (a commit's wait for the disk is not CPU).
        async def creates(claimed: bool) -> float:
            start = time.process_time()
            for _ in range(200):
                opening = OpenTurn(
                    session_id=new_session_id(),
                    message=NewStep(StepType.USER_INPUT, "user", "hello"),
                    worker_id="bench",
                    ttl_s=30.0,
                    create=True,
                    owner="m0" if claimed else None,
                )
                store.record.write(opening)
            return (time.process_time() - start) / 200 * 1e6

        plain = [await creates(False) for _ in range(5)]
        claimed = [await creates(True) for _ in range(5)]

        settings = Settings(home=Path(tmp), database=str(Path(tmp) / "x.db"))
        # Only the watch is timed: no runtime drives anything (a stand-in names the worker).
        no_runtime = SimpleNamespace(worker_id="bench")
        gw = Gateway(settings, store, runtime=no_runtime, token="s" * 32, teams=teams)  # type: ignore[arg-type]
        for k in range(members):
            proof = token_hash(tokens[k])
            gw.users_online.add(
                FakeSocket(SignedIn(who[k], proof), owned[k * sessions_each])  # type: ignore[arg-type]
            )

        async def watch_tick() -> None:
            await gw.watch_once()

        results = {
            "sign-in, user's token (database asked)": await per_op_us(sign_in_uncached, 2000),
            "re-check on a frame (cached)": await per_op_us(recheck_cached, 20000),
            "part in a session (cached)": await per_op_us(part_cached, 20000),
            "part in a session (database asked)": await per_op_us(part_uncached, 2000),
            "new session made the member's (claim)": max(
                0.0, statistics.median(claimed) - statistics.median(plain)
            ),
            f"watch tick over {members} sockets": await per_op_us(watch_tick, 50),
        }
        store.close()
    print(f"team checks, {members} members with {sessions_each} session(s) each, SQLite:")
    for name, us in results.items():
        print(f"  {name:<42} {us:9.1f} µs CPU")
    # A gateway_bench task as a member: a new socket (one sign-in), two frames (reconnect,
    # message: re-checks, cached), its session made theirs; the watch ticks once a second.
    per_task = (
        results["sign-in, user's token (database asked)"]
        + 2 * results["re-check on a frame (cached)"]
        + results["new session made the member's (claim)"]
    )
    print(
        f"  per 20-step task: {per_task:.0f} µs = {per_task / STEPS_PER_TASK:.1f} µs per step; "
        f"the watch: {results[f'watch tick over {members} sockets']:.0f} µs a second"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--members", type=int, default=200)
    parser.add_argument("--sessions-each", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main_async(args.members, args.sessions_each))


if __name__ == "__main__":
    main()
