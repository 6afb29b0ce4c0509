"""Schedules and webhooks through the Python API, the same program both ways: in process
(`xclaw.open`, a real SQLite file, `schedules=True` firing them here) and through a real
`xclaw serve` (`xclaw.connect`, over /api/schedules and /api/hooks). Typed answers, the API's
errors, a schedule that fires and a signed webhook delivery that runs, each once, read back as
fires; a member of a shared gateway sees and changes only their own (docs/python-api.md,
docs/schedules.md)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

import xclaw
from tests.api.conftest import write_script
from tests.waiting import until
from xclaw.api.remote import RemoteSession
from xclaw.schedules.signing import sign

pytestmark = pytest.mark.slow

TURNS = [{"text": f"answer {i}"} for i in range(6)]


async def _delivered(agent: xclaw.Agent, schedule_id: str) -> list[xclaw.FireInfo]:
    async def done() -> list[xclaw.FireInfo]:
        fires = await agent.schedule_fires(schedule_id)
        return fires if fires and all(f.step for f in fires) else []

    return await until(done, f"the fires of {schedule_id} delivered", timeout=60, every=0.1)


async def _the_same_program(agent: xclaw.Agent) -> tuple[xclaw.Session, xclaw.HookMade]:
    session = await agent.new_session(title="reports")
    assert (await session.send("hello")).reply == "answer 0"  # a step: forkable
    daily = await session.add_schedule(
        "Summarise", cron="0 9 * * 1-5", tz="Europe/Paris", catch_up="once"
    )
    assert isinstance(daily, xclaw.ScheduleInfo)
    assert (daily.kind, daily.spec, daily.tz, daily.catch_up) == (
        "cron",
        "0 9 * * 1-5",
        "Europe/Paris",
        "once",
    )
    assert (daily.session_id, daily.fork_of, daily.paused, daily.fired) == (
        session.id,
        None,
        False,
        0,
    )
    assert daily.next_fire is not None
    nine = dt.datetime.fromtimestamp(daily.next_fire / 1000, ZoneInfo("Europe/Paris"))
    assert (nine.hour, nine.minute, nine.weekday() < 5) == (9, 0, True)
    forks = await session.add_schedule("Check the queue", every="30m", fork=True)
    assert (forks.fork_of, forks.session_id, forks.spec) == (session.id, None, "1800000")
    assert [s.id for s in await session.schedules()] == [daily.id, forks.id]
    assert {daily.id, forks.id} <= {s.id for s in await agent.schedules()}
    assert (await agent.pause_schedule(forks.id)).paused is True
    assert (await agent.schedule(forks.id)).paused is True
    assert (await agent.resume_schedule(forks.id)).paused is False
    await agent.remove_schedule(forks.id)
    with pytest.raises(xclaw.UnknownSchedule):
        await agent.schedule(forks.id)
    with pytest.raises(xclaw.UnknownSchedule):
        await agent.pause_schedule("schnothere")
    wrong: list[tuple[dict[str, Any], str]] = [
        ({"cron": "* *"}, "five fields"),
        ({"every": "3 weeks"}, "period"),
        ({}, "one of"),
        ({"every": "1h", "cron": "* * * * *"}, "one of"),
        ({"at": "2026-12-24T09:00", "tz": "Mars/Olympus"}, "time zone"),
    ]
    for kwargs, says in wrong:
        with pytest.raises(xclaw.BadRequest, match=says):
            await session.add_schedule("x", **kwargs)
    with pytest.raises(xclaw.BadRequest):
        await session.add_schedule("x", every="1h", catch_up="twice")  # type: ignore[arg-type]
    # A moment already past fires at once, once.
    ping = await session.add_schedule("Ping", at="2020-01-01T00:00:00Z")
    [fire] = await _delivered(agent, ping.id)
    assert isinstance(fire, xclaw.FireInfo)
    assert (fire.id, fire.source, fire.state) == (
        f"schedule.{ping.id}.{ping.next_fire}",
        "schedule",
        "delivered",
    )
    await session.wait(timeout=60)
    inputs = [s for s in await session.steps() if s.type == "user_input"]
    assert [(s.id, s.input) for s in inputs[1:]] == [(fire.step, "Ping")]
    assert (await agent.schedule(ping.id)).next_fire is None
    # Webhooks: the secret once, then never.
    hook = await session.add_hook("ci", "Build {status}")
    assert isinstance(hook, xclaw.HookMade)
    assert hook.secret.startswith("whsec_") and hook.url == "/hooks/ci"
    assert hook.session_id == session.id
    listed = await agent.hooks()
    assert [h.name for h in listed] == ["ci"] and type(listed[0]) is xclaw.HookInfo
    assert hook.secret not in repr(listed)
    assert [h.name for h in await session.hooks()] == ["ci"]
    assert await agent.hook_fires("ci") == []
    with pytest.raises(xclaw.BadRequest, match="name"):
        await session.add_hook("Bad Name", "x")
    with pytest.raises(xclaw.UnknownSchedule):
        await agent.hook_fires("nosuch")
    return session, hook


async def _a_new_session_takes_them(agent: xclaw.Agent) -> xclaw.Session:
    """A session just made, nothing said to it (so not written yet), takes a schedule and a
    webhook as any other: written then, empty; its first fire is its first message (and
    titles it). Forking one is refused with what to do (it has no step to fork from)."""
    fresh = await agent.new_session()
    with pytest.raises(xclaw.BadRequest, match=r"no step to fork from.*first message"):
        await fresh.add_schedule("x", every="1h", fork=True)
    ping = await fresh.add_schedule("Ping", at="2020-01-01T00:00:00Z")
    assert ping.session_id == fresh.id
    [fire] = await _delivered(agent, ping.id)
    await fresh.wait(timeout=60)
    inputs = [(s.id, s.input) for s in await fresh.steps() if s.type == "user_input"]
    assert inputs == [(fire.step, "Ping")]
    assert (await fresh.info()).title == "Ping"  # titled by its first message, as any
    other = await agent.new_session()
    hook = await other.add_hook("fresh", "Build {status}")
    assert hook.session_id == other.id and (await other.info()).state == "new"
    assert other.id in {s.session_id for s in await agent.sessions()}
    await agent.remove_hook("fresh")
    return fresh


async def test_in_process(open_agent: Any) -> None:
    agent = await open_agent(TURNS, schedules=True)
    await _the_same_program(agent)
    await _a_new_session_takes_them(agent)
    await agent.remove_hook("ci")
    assert await agent.hooks() == []
    with pytest.raises(xclaw.UnknownSchedule):
        await agent.remove_hook("ci")
    # The sync API says the same in the same words.
    assert xclaw.SyncSession.add_schedule.__doc__ == xclaw.Session.add_schedule.__doc__


async def test_in_process_without_firing_makes_and_reads_only(open_agent: Any) -> None:
    agent = await open_agent(TURNS)
    session = await agent.new_session(title="t")
    ping = await session.add_schedule("Ping", at="2020-01-01T00:00:00Z")
    await asyncio.sleep(1.5)  # longer than a check's poll: nothing here fires it
    assert await agent.schedule_fires(ping.id) == []
    assert (await agent.schedule(ping.id)).next_fire == ping.next_fire


async def test_through_a_gateway(gateway: Any) -> None:
    server = gateway(TURNS)
    async with xclaw.connect(server.http, token=server.token) as agent:
        session, hook = await _the_same_program(agent)
        body = json.dumps({"status": "green"}).encode()
        ts = str(int(time.time()))
        headers = {
            "X-Xclaw-Timestamp": ts,
            "X-Xclaw-Delivery": "build-7",
            "X-Xclaw-Signature": sign(hook.secret, ts, body),
        }
        async with httpx.AsyncClient(timeout=30) as http:
            for _ in range(2):  # the sender retries: it runs once
                r = await http.post(f"{server.http}{hook.url}", content=body, headers=headers)
                assert r.status_code in (200, 202), r.text
        [fire] = await agent.hook_fires("ci")
        assert (fire.id, fire.source, fire.state) == ("hook.ci.build-7", "hook", "delivered")
        await session.wait(timeout=60)
        texts = [s.input for s in await session.steps() if s.type == "user_input"]
        assert texts.count("Build green") == 1
        await agent.remove_hook("ci")
        async with httpx.AsyncClient(timeout=30) as http:
            gone = await http.post(f"{server.http}{hook.url}", content=body, headers=headers)
        assert gone.status_code == 401
        fresh = await _a_new_session_takes_them(agent)
    # The session a client opened, written under the id it chose (POST /api/sessions with
    # sessionId): made once (201), then answered as it is (200).
    auth = {"Authorization": f"Bearer {server.token}"}
    async with httpx.AsyncClient(timeout=30, headers=auth) as http:
        made = await http.post(f"{server.http}/api/sessions", json={"sessionId": "opened-1"})
        assert made.status_code == 201 and made.json()["sessionId"] == "opened-1"
        again = await http.post(f"{server.http}/api/sessions", json={"sessionId": "opened-1"})
        assert again.status_code == 200 and again.json()["sessionId"] == "opened-1"
        ours = await http.post(f"{server.http}/api/sessions", json={"sessionId": fresh.id})
        assert ours.status_code == 200 and ours.json()["title"] == "Ping"
        bad = await http.post(f"{server.http}/api/sessions", json={"sessionId": "a:b"})
        assert bad.status_code == 400


async def test_a_member_sees_and_changes_only_their_own(gateway: Any) -> None:
    from tests.gateway.teams_harness import add_user

    server = gateway(TURNS)
    alice_token, bob_token = add_user(server, "alice"), add_user(server, "bob")
    async with (
        xclaw.connect(server.http, token=alice_token) as alice,
        xclaw.connect(server.http, token=bob_token) as bob,
        xclaw.connect(server.http, token=server.token) as admin,
    ):
        mine = await alice.new_session(title="alice's")
        made = await mine.add_schedule("Check", every="1h")
        assert made.created_by == "alice"
        hook = await mine.add_hook("alices", "x {body}")
        assert hook.created_by == "alice"
        assert [s.id for s in await alice.schedules()] == [made.id]
        assert await bob.schedules() == [] and await bob.hooks() == []
        for call in (
            bob.schedule(made.id),
            bob.pause_schedule(made.id),
            bob.remove_schedule(made.id),
            bob.schedule_fires(made.id),
            bob.hook_fires("alices"),
            bob.remove_hook("alices"),
        ):
            with pytest.raises(xclaw.UnknownSchedule):
                await call
        # Bob has no part in alice's session: it is as unknown to him as to anyone.
        theirs = RemoteSession(bob, mine.id, "")
        with pytest.raises(xclaw.UnknownSession):
            await theirs.add_schedule("x", every="1h")
        assert made.id in {s.id for s in await admin.schedules()}
        assert (await admin.pause_schedule(made.id)).paused is True


def test_without_async(tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", TURNS)
    with xclaw.open_sync(
        db=tmp_path / "s.db", home=tmp_path / "home", model=f"script:{script}", cwd=tmp_path
    ) as agent:
        session = agent.new_session(title="sync")
        made = session.add_schedule("Check", every="1h", catch_up="all")
        assert isinstance(made, xclaw.ScheduleInfo) and made.catch_up == "all"
        assert [s.id for s in session.schedules()] == [made.id]
        assert agent.pause_schedule(made.id).paused is True
        assert agent.resume_schedule(made.id).paused is False
        assert agent.schedule(made.id).id == made.id
        assert agent.schedule_fires(made.id) == []
        hook = session.add_hook("sync-hook", "x {body}")
        assert hook.secret.startswith("whsec_")
        assert [h.name for h in session.hooks()] == ["sync-hook"]
        assert agent.hook_fires("sync-hook") == []
        agent.remove_hook("sync-hook")
        agent.remove_schedule(made.id)
        assert agent.schedules() == [] and agent.hooks() == []
        with pytest.raises(xclaw.UnknownSchedule):
            agent.remove_schedule(made.id)
