"""A pending id is nobody's until written, and then only its writer's (docs/teams.md).

The tutorial's clients choose their own session ids (`cli`), so two people can be attached to
one id nobody has written yet. The attacker attaches to it and fires one kind of frame every
couple of milliseconds while the owner writes the session with its first message; whatever
the attacker's frames meet once it is written is another's session, and must answer as an id
nobody has. Every kind of frame, many tries, both directions (whoever writes first is the
owner), one server and two workers on PostgreSQL (the attacker on one, the owner on the other:
approvals and cancels travel between workers there). Real servers, real sockets.

After each try the record is read by the admin: nothing the loser fired changed it (no share,
cancel, rollback, fork or title of theirs, no approval answered by them, no compaction, no
message of theirs), and nothing of the owner's reached the loser's socket (no steps, no text,
no approval request, no frame of the owner's run).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import Client, Server, clean_env, xclaw_cmd
from tests.gateway.teams_harness import SCRIPT, add_user, team_server
from tests.gateway.test_workers import TOKEN, PgServer
from tests.store.conftest import PostgresBackend, postgres_url

pytestmark = pytest.mark.slow

# What the owner writes the session with, per kind of frame fired: what gives the frame
# something to act on (an approval waiting, a run to cancel, a finished turn to rewind; the
# attacker's messages meet a run the owner must still be able to answer).
OWNER_TEXT = {
    "share": "hello",
    "steps": "hello",
    "approval": "write f",
    "cancel": "slow please",
    "rollback": "hello",
    "fork": "hello",
    "title": "hello",
    "compact": "hello",
    "message": "write f",
}
# Kinds whose try ends with the owner answering their own approval.
OWNER_APPROVES = ("approval", "message")
KINDS = tuple(OWNER_TEXT)
TRIES = int(os.environ.get("XCLAW_TEST_PENDING_TRIES", "3"))
FIRE_EVERY_S = 0.002
# How long the attacker goes on firing after the owner's turn is under way: well inside the
# second after which the gateway's watch detaches a socket that lost its session.
FIRE_AFTER_S = 0.3


def attack_frames(kind: str, sid: str, attacker: str) -> list[dict[str, Any]]:
    """The frames fired, in turn, for one kind (approvals: each step id one might be)."""

    def msg(text: str) -> dict[str, Any]:
        return {"type": "message", "sessionId": sid, "content": text}

    return {
        "share": [msg(f"/share {attacker} collaborator")],
        "steps": [msg("/steps")],
        "approval": [
            {"type": "approval", "sessionId": sid, "stepId": f"s{n:04d}", "approve": True}
            for n in (2, 3, 4)
        ],
        "cancel": [{"type": "cancel", "sessionId": sid}],
        "rollback": [msg("/rollback s0001")],
        "fork": [msg("/fork s0001 mine")],
        "title": [msg("/title pwned")],
        "compact": [msg("/compact")],
        "message": [msg("hello from the attacker")],
    }[kind]


# What a socket attached to an id nobody has written may be told: its own attach, and the
# answers about a session with nothing in it yet (or, once someone else wrote it, the
# answer for an unknown id).
PENDING_NOTICES = (
    "No steps yet: this session starts with your first message.",
    "[cancel] nothing is running",
)


def leaked(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Frames the loser's socket got that an id nobody has would not give. Before the
    session is written: the answers about a session with nothing in it; from the first
    `unknown_session` on (it is written, and someone else's), nothing but that."""
    out = []
    refused = False
    for f in frames:
        kind = f.get("type")
        if refused and kind != "pong" and f.get("code") != "unknown_session":
            out.append(f)
            continue
        refused = refused or f.get("code") == "unknown_session"
        if kind in ("session", "status"):  # its own attach: a new session, nothing running
            if (
                f.get("busy")
                or f.get("status") != "Init"
                or (kind == "session") != bool(f.get("created"))
            ):
                out.append(f)
            continue
        if kind == "history":
            if f.get("messages"):
                out.append(f)
            continue
        if kind == "pong":
            continue
        if kind == "notice" and f.get("content") in PENDING_NOTICES:
            continue
        if kind == "error" and f.get("code") in ("unknown_session", "bad_step"):
            if f.get("code") == "bad_step" and "no approval is waiting" not in f["content"]:
                out.append(f)
            continue
        if kind == "error" and f.get("code") == "busy" and "in flight" in f["content"]:
            continue  # its message met the other's first message being written, not yet done
        out.append(f)
    return out


@dataclass
class Try:
    kind: str
    sid: str
    owner: str
    attacker: str
    at_once: bool  # fire from the owner's first message on (else: once its run started)
    fired: int = 0
    attacker_frames: list[dict[str, Any]] = field(default_factory=list)
    owner_frames: list[dict[str, Any]] = field(default_factory=list)


class Attacker:
    """A socket that fires `frames` in turn, every FIRE_EVERY_S, and keeps what it is told."""

    def __init__(self, client: Client, frames: list[dict[str, Any]]) -> None:
        self.client = client
        self.frames = frames
        self.fired = 0
        self.stop = asyncio.Event()
        self.got: list[dict[str, Any]] = []

    async def fire(self) -> None:
        while not self.stop.is_set():
            await self.client.send(self.frames[self.fired % len(self.frames)])
            self.fired += 1
            await asyncio.sleep(FIRE_EVERY_S)

    async def read(self) -> None:
        while True:
            frame = await self.client.recv(timeout=30)
            self.got.append(frame)
            if frame.get("type") == "pong" and self.stop.is_set():
                return

    async def finish(self) -> None:
        """Stop firing, then read until every frame fired has been answered (a ping's pong
        comes after them: a socket's frames are handled in order)."""
        self.stop.set()
        await self.client.send({"type": "ping"})


def admin_get(server: Server, path: str, token: str) -> httpx.Response:
    return httpx.get(
        f"{server.http}/api{path}", headers={"Authorization": f"Bearer {token}"}, timeout=15
    )


def export(server: Server, admin: str, sid: str) -> list[dict[str, Any]]:
    r = admin_get(server, f"/sessions/{sid}/export", admin)
    if r.status_code == 404:
        return []
    assert r.status_code == 200, r.text
    return [json.loads(x) for x in r.text.splitlines()]


async def run_try(
    owner_server: Server,
    attacker_server: Server,
    admin: str,
    tokens: dict[str, str],
    t: Try,
) -> list[str]:
    """One race; what got through (empty: nothing)."""
    m = await Client.open(attacker_server, token=tokens[t.attacker])
    a = await Client.open(owner_server, token=tokens[t.owner])
    await m.attach(t.sid)
    await a.attach(t.sid)
    assert m.seen[0]["created"] and a.seen[0]["created"]
    attacker = Attacker(m, attack_frames(t.kind, t.sid, t.attacker))
    reader = asyncio.create_task(attacker.read())
    wanted = {"approval": "approval_request", "message": "approval_request", "cancel": "status"}
    wanted = wanted.get(t.kind, "reply")

    def outcome(f: dict[str, Any]) -> bool:
        return f.get("type") in (wanted, "error") and (
            f.get("type") != "status" or f.get("status") == "Running"
        )

    await a.send({"type": "message", "sessionId": t.sid, "content": OWNER_TEXT[t.kind]})
    if not t.at_once:  # once the owner's run has started: the session is written
        await a.until(lambda f: f.get("type") in ("step", "reply", "approval_request", "error"))
    firing = asyncio.create_task(attacker.fire())
    first = next((f for f in a.seen if outcome(f)), None) or await a.until(outcome, timeout=30)
    await asyncio.sleep(FIRE_AFTER_S)
    await attacker.finish()
    await firing
    await asyncio.wait_for(reader, 30)
    t.fired = attacker.fired
    t.attacker_frames = attacker.got
    owner_won = first.get("type") != "error"
    # The owner ends what they started, and still can: their approval answered by them, their
    # slow run cancelled by them.
    kept: list[str] = []
    if owner_won and t.kind in OWNER_APPROVES:
        await a.send(
            {"type": "approval", "sessionId": t.sid, "stepId": first["stepId"], "approve": True}
        )
        ended = await a.until(lambda f: f.get("type") in ("reply", "error"), timeout=30)
        if ended != {"type": "reply", "content": "done", "sessionId": t.sid}:
            kept.append(f"the owner's approval: {ended}")
    if owner_won and t.kind == "cancel":
        await a.send({"type": "cancel", "sessionId": t.sid})
        said = await a.until(lambda f: f.get("type") == "notice" and "[cancel]" in f["content"])
        if "nothing is running" in said["content"]:
            kept.append("the owner's run was cancelled before the owner cancelled it")
    kept += [f"the owner was told {f['content']!r}" for f in a.seen if "[lease]" in str(f)]
    t.owner_frames = a.seen
    await m.close()
    await a.close()
    if not owner_won:  # the attacker wrote it first: the roles are swapped
        assert first.get("code") in ("unknown_session", "busy"), first
        return check(
            owner_server,
            admin,
            tokens,
            t.sid,
            writer=t.attacker,
            loser=t.owner,
            loser_frames=a.seen,
            fired_by=t.attacker,
        )
    return kept + check(
        owner_server,
        admin,
        tokens,
        t.sid,
        writer=t.owner,
        loser=t.attacker,
        loser_frames=attacker.got,
        fired_by=t.attacker,
    )


def check(
    server: Server,
    admin: str,
    tokens: dict[str, str],
    sid: str,
    *,
    writer: str,
    loser: str,
    loser_frames: list[dict[str, Any]],
    fired_by: str,
) -> list[str]:
    """What of the loser's got through to the writer's session, by the record and by what
    the loser's socket was told (`fired_by`: who fired the frames of the try — the writer
    when their /title or message wrote the session first)."""
    lines = export(server, admin, sid)
    assert lines, f"{sid} was not written"
    head, steps = lines[0], lines[1:]
    assert head["owner"] == writer, head
    got: list[str] = []
    for action in head.get("actions", []):
        if action.get("user") == loser or (action.get("detail") or {}).get("user") == loser:
            got.append(f"action {action['kind']} by {action.get('user')}")
    for st in steps:
        by = (st.get("output") or {}).get("by") if isinstance(st.get("output"), dict) else None
        if isinstance(by, dict) and by.get("user") == loser:
            got.append(f"step {st['id']} {st['type']} by {loser}")
        if isinstance(st.get("output"), dict) and st["output"].get("compaction"):
            got.append(f"step {st['id']} compaction")
    if head["title"] == "pwned" and writer != fired_by:
        got.append("title")
    # A fork the loser made of it.
    mine = admin_get(server, "/sessions", tokens[loser]).json()["sessions"]
    for s in mine:
        if s.get("parentSessionId") == sid:
            got.append(f"fork {s['sessionId']}")
    if admin_get(server, f"/sessions/{sid}", tokens[loser]).status_code != 404:
        got.append("a part in it")
    for f in leaked(loser_frames):
        got.append(f"told {json.dumps(f)[:160]}")
    return got


async def race(
    owner_server: Server,
    attacker_server: Server,
    admin: str,
    tokens: dict[str, str],
    *,
    owner: str,
    attacker: str,
    tries: int,
    tag: str,
) -> None:
    failures: dict[str, list[str]] = {}
    for kind in KINDS:
        for i in range(tries):
            t = Try(kind, f"cli-{tag}-{kind}-{i}", owner, attacker, at_once=i % 2 == 0)
            got = await run_try(owner_server, attacker_server, admin, tokens, t)
            assert t.fired > 10, t  # the attacker really fired through the race
            if got:
                failures[t.sid] = got
    assert not failures, "\n".join(
        f"{sid}: {len(got)} got through: {got[:4]}" for sid, got in failures.items()
    )


@pytest.fixture(scope="module")
def team(module_server_factory: Any) -> Server:
    return team_server(module_server_factory, name="pending")


@pytest.fixture(scope="module")
def tokens(team: Server) -> dict[str, str]:
    return {name: add_user(team, name) for name in ("alice", "mallory")}


async def test_an_attacker_on_a_pending_id_acts_on_nothing_once_the_owner_writes_it(
    team: Server, tokens: dict[str, str]
) -> None:
    await race(
        team, team, team.token, tokens, owner="alice", attacker="mallory", tries=TRIES, tag="fwd"
    )


async def test_the_owners_socket_acts_on_nothing_when_the_other_writes_first(
    team: Server, tokens: dict[str, str]
) -> None:
    """The other direction: the one who fires is the one who happened to attach second."""
    await race(
        team,
        team,
        team.token,
        tokens,
        owner="mallory",
        attacker="alice",
        tries=max(1, TRIES // 2),
        tag="rev",
    )


# --- two workers on PostgreSQL --------------------------------------------------------------


def pg_users(pg: PostgresBackend, root: Path, *names: str) -> dict[str, str]:
    out = {}
    for name in names:
        r = subprocess.run(
            [*xclaw_cmd(), "users", "add", name, "--db", pg.url],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(XCLAW_HOME=str(root / "cli-home"), NO_COLOR="1"),
            check=False,
        )
        assert r.returncode == 0, r.stderr
        out[name] = r.stdout.strip()
    return out


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[tuple[PgServer, PgServer, PostgresBackend]]:
    pg = PostgresBackend(postgres_url())
    pg.url = pg.url.replace("pool_max=4", "pool_max=8")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    servers = []
    try:
        for name in ("a", "b"):
            root = tmp_path / name
            root.mkdir()
            s = PgServer(
                root=root,
                script=script,
                approval="ask",
                db=pg.url,
                shared_workspace=tmp_path / "workspaces",
            )
            servers.append(s)
            s.start()
        yield servers[0], servers[1], pg
    finally:
        for s in servers:
            s.kill()
        pg.drop()


@pytest.mark.postgres
async def test_two_workers_the_attacker_on_one_the_owner_on_the_other(
    two_workers: tuple[PgServer, PgServer, PostgresBackend], tmp_path: Path
) -> None:
    a, b, pg = two_workers
    tokens = pg_users(pg, tmp_path, "alice", "mallory")
    await race(
        b, a, TOKEN, tokens, owner="alice", attacker="mallory", tries=max(1, TRIES // 2), tag="pg"
    )
