"""The original tutorial's rollback scenario (*the seed*, docs/architecture.md glossary) with real
files, through the runtime and the scripted model (in process), and through a real `xclaw serve`
(the gateway's /rollback and HTTP fork)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.runtime.harness import sh
from tests.workspace.helpers import tree
from xclaw.store import open_store


def wf(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "input": {"path": path, "content": content}}


SEED_TURNS = [
    {"text": "Creating a.", "tool_calls": [wf("a.txt", "A")]},
    {"text": "Creating b.", "tool_calls": [wf("b.txt", "B")]},
    {"text": "Both files are there."},
]


async def test_tutorial_scenario_rollback_removes_b_and_keeps_a(make) -> None:
    h = make(SEED_TURNS)
    sid = await h.ask("create a.txt, then b.txt")
    ws = h.root / sid
    assert tree(ws) == {"a.txt": "A", "b.txt": "B"}
    create_b = h.step_of(sid, "write_file", 1)
    result = await h.runtime.rollback(sid, create_b)
    assert result.restore is not None
    assert tree(ws) == {"a.txt": "A"}  # memory and files agree: b.txt never happened


async def test_tutorial_scenario_fork_at_a_has_only_a(make) -> None:
    h = make(SEED_TURNS)
    sid = await h.ask("create a.txt, then b.txt")
    create_a = h.step_of(sid, "write_file", 0)
    fork = await h.runtime.fork(sid, create_a, "only a")
    assert tree(h.root / fork.session_id) == {"a.txt": "A"}
    assert tree(h.root / sid) == {"a.txt": "A", "b.txt": "B"}  # the original keeps both


async def test_shell_side_effects_are_rewound_too(make) -> None:
    h = make(
        [
            {"text": "", "tool_calls": [wf("a.txt", "A")]},
            {"text": "", "tool_calls": [sh("echo x > c.txt")]},
            {"text": "", "tool_calls": [sh("rm a.txt")]},
            {"text": "done"},
        ]
    )
    sid = await h.ask("go")
    ws = h.root / sid
    assert tree(ws) == {"c.txt": "x\n"}
    await h.runtime.rollback(sid, h.step_of(sid, "shell", 1))  # before `rm a.txt`
    assert tree(ws) == {"a.txt": "A", "c.txt": "x\n"}
    await h.runtime.rollback(sid, h.step_of(sid, "shell", 0))  # before `echo x > c.txt`
    assert tree(ws) == {"a.txt": "A"}


async def test_rollback_then_continue_snapshots_the_new_branch(make) -> None:
    h = make(
        [
            {"text": "", "tool_calls": [wf("a.txt", "A")]},
            {"text": "", "tool_calls": [wf("b.txt", "B")]},
            {"text": "done"},
        ],
        script_extra={
            "branches": [
                {
                    "when": "instead",
                    "turns": [
                        {"text": "", "tool_calls": [wf("c.txt", "C")]},
                        {"text": "done with c"},
                    ],
                }
            ]
        },
    )
    sid = await h.ask("go")
    await h.runtime.rollback(sid, h.step_of(sid, "write_file", 1))
    await h.ask("do c instead", sid)
    assert tree(h.root / sid) == {"a.txt": "A", "c.txt": "C"}
    snaps = [s.seq for s in h.store.snapshots.list_snapshots(sid)]
    assert len(snaps) == 2  # before a (kept) and before c (new); b's went with its step
    await h.runtime.rollback(sid, h.step_of(sid, "write_file", 1))
    assert tree(h.root / sid) == {"a.txt": "A"}


async def test_sub_agent_steps_are_snapshotted_not_the_spawn(make) -> None:
    h = make(
        [
            {"text": "", "tool_calls": [{"name": "spawn_agent", "input": {"task": "make s"}}]},
            {"text": "done"},
        ],
        script_extra={
            "subagent": {
                "turns": [
                    {"text": "", "tool_calls": [wf("s.txt", "from the sub-agent")]},
                    {"text": "made s"},
                ]
            }
        },
    )
    sid = await h.ask("delegate")
    steps = h.store.record.steps(sid)
    spawn = next(s for s in steps if s.name == "spawn_agent")
    write = next(s for s in steps if s.name == "write_file")
    assert write.agent != "main"
    assert [s.seq for s in h.store.snapshots.list_snapshots(sid)] == [write.seq]
    await h.runtime.rollback(sid, spawn.display_id)
    assert tree(h.root / sid) == {}


async def test_read_only_tools_take_no_snapshot(make) -> None:
    h = make(
        [
            {"text": "", "tool_calls": [wf("a.txt", "A")]},
            {"text": "", "tool_calls": [{"name": "read_file", "input": {"path": "a.txt"}}]},
            {"text": "", "tool_calls": [{"name": "list_dir", "input": {"path": "."}}]},
            {"text": "done"},
        ]
    )
    sid = await h.ask("go")
    assert len(h.store.snapshots.list_snapshots(sid)) == 1


# --- through a real server: the gateway gets it from the runtime ------------------------------


async def test_gateway_rollback_and_http_fork_move_the_files(tmp_path: Path) -> None:
    from tests.gateway.harness import Client, Server, close_open_clients, write_script

    script = write_script(tmp_path / "script.json", SEED_TURNS)
    server = Server(root=tmp_path / "srv", script=script, approval="yolo").start()
    try:
        client = await Client.open(server)
        await client.attach(None)
        sid = client.session_id
        assert sid is not None
        reply = await client.turn("create a.txt, then b.txt")
        assert reply["type"] == "reply"
        ws = server.workspace(sid)
        assert tree(ws) == {"a.txt": "A", "b.txt": "B"}
        with open_store(server.home / "xclaw.db") as store:
            writes = [s for s in store.record.steps(sid) if s.name == "write_file"]
        headers = {"Authorization": f"Bearer {server.token}"}
        async with httpx.AsyncClient(base_url=server.http, headers=headers) as http:
            r = await http.post(f"/api/sessions/{sid}/fork", json={"stepId": writes[0].display_id})
            assert r.status_code == 201, r.text
            fork_id = r.json()["session"]["sessionId"]
        assert tree(server.workspace(fork_id)) == {"a.txt": "A"}
        await client.send(
            {"type": "message", "sessionId": sid, "content": f"/rollback {writes[1].display_id}"}
        )
        await client.until(lambda f: "[rollback]" in str(f.get("content", "")))
        assert tree(ws) == {"a.txt": "A"}
    finally:
        await close_open_clients()
        server.kill()


SLOW_WRITER = "f=$(mktemp -p . part.XXXXXX); chmod 644 $f; echo 1 > $f; sleep 0.4; echo 2 >> $f"


async def test_rolling_back_a_parallel_sub_agent_step_keeps_its_sibling_whole(make) -> None:
    """Two sub-agents write a file in two halves at the same time. The later of their steps
    started only once the earlier one had finished, so rolling back to it restores the
    earlier one's file whole — never the half a snapshot taken mid-command would hold."""

    def spawn(task):
        return {"name": "spawn_agent", "input": {"task": task}}

    h = make(
        [{"text": "", "tool_calls": [spawn("one"), spawn("two")]}, {"text": "both wrote"}],
        script_extra={
            "subagent": {
                "turns": [{"text": "", "tool_calls": [sh(SLOW_WRITER)]}, {"text": "wrote"}]
            }
        },
    )
    sid = await h.ask("write in parallel")
    ws = h.root / sid
    assert sorted(tree(ws).values()) == ["1\n2\n", "1\n2\n"]
    writers = [s for s in h.store.record.steps(sid) if s.name == "shell"]
    assert len(writers) == 2 and len({s.agent for s in writers}) == 2
    first, later = sorted(writers, key=lambda s: s.seq)
    assert first.end_time is not None and later.start_time >= first.end_time  # took turns
    await h.runtime.rollback(sid, later.display_id)
    assert list(tree(ws).values()) == ["1\n2\n"]


async def test_parallel_side_effects_can_be_allowed_to_overlap(make) -> None:
    def spawn(task):
        return {"name": "spawn_agent", "input": {"task": task}}

    h = make(
        [{"text": "", "tool_calls": [spawn("one"), spawn("two")]}, {"text": "both wrote"}],
        script_extra={
            "subagent": {
                "turns": [{"text": "", "tool_calls": [sh("sleep 1.5")]}, {"text": "slept"}]
            }
        },
        sandbox={"parallel_side_effects": True},
    )
    sid = await h.ask("write in parallel")
    first, later = sorted(
        (s for s in h.store.record.steps(sid) if s.name == "shell"), key=lambda s: s.seq
    )
    assert first.end_time is not None and later.start_time < first.end_time  # overlapped
    assert h.of("reply")[-1]["content"] == "both wrote"
