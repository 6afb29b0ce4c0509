"""The environment rewinds with memory (docs/containers.md): what a step changed in its
session's container outside the workspace — a file installed under /usr/local, one deleted
from the image, /opt — is captured with the step's snapshot and put back by /rollback and
/fork; processes are not restored: those the removed steps started are stopped.

Real podman with runc and the test image (tests/containers.py), through the runtime and the
scripted model in process, on a real SQLite store."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.containers import remove_containers, test_image
from tests.runtime.harness import sh
from xclaw.sandbox.container.lifecycle import Containers

pytestmark = pytest.mark.slow


@pytest.fixture
def cleanup(tmp_path: Path) -> Iterator[None]:
    yield
    remove_containers(tmp_path / "ws")


def in_container(h: Any, sid: str, command: str) -> str:
    done = subprocess.run(
        ["podman", "exec", h.runtime.workspaces.containers.name(sid), "sh", "-c", command],
        capture_output=True,
        text=True,
        check=False,
    )
    return (done.stdout + done.stderr).strip()


def servers(containers: Containers, sid: str) -> list[str]:
    return sorted(p.command for p in containers.processes(sid) if p.command.startswith("httpd"))


INSTALL_TURNS: list[dict[str, Any]] = [
    {"text": "", "tool_calls": [sh("mkdir -p /opt/tool && echo v1 > /opt/tool/version")]},
    {"text": "", "tool_calls": [sh("httpd -p 127.0.0.1:8081 -h /opt/tool")]},
    {
        "text": "",
        "tool_calls": [
            sh(
                "echo installed > /usr/local/bin/newtool && rm /bin/yes && "
                "echo v2 > /opt/tool/version && httpd -p 127.0.0.1:8082 -h /opt"
            )
        ],
    },
    {"text": "done"},
]


def make_container_harness(make: Any) -> Any:
    return make(INSTALL_TURNS, sandbox={"isolation": "container", "image": test_image()})


async def test_rollback_removes_what_was_installed_after_the_step_and_its_processes(
    make: Any, cleanup: None
) -> None:
    h = make_container_harness(make)
    sid = await h.ask("install things")
    containers = h.runtime.workspaces.containers
    assert in_container(h, sid, "cat /usr/local/bin/newtool /opt/tool/version") == "installed\nv2"
    assert in_container(h, sid, "test -e /bin/yes || echo gone") == "gone"
    assert len(servers(containers, sid)) == 2

    await h.runtime.rollback(sid, h.step_of(sid, "shell", 2))

    assert in_container(h, sid, "test -e /usr/local/bin/newtool || echo gone") == "gone"
    assert in_container(h, sid, "test -e /bin/yes && echo back") == "back"  # a whiteout undone
    assert in_container(h, sid, "cat /opt/tool/version") == "v1"
    notices = [f["content"] for f in h.frames if f.get("type") == "notice"]
    assert any("processes are not restored" in n for n in notices), notices
    # The container was restarted to rewind its layer: every process stopped, and said so.
    assert servers(containers, sid) == []
    assert any("every process in it stopped" in n for n in notices), notices


async def test_rollback_that_changes_nothing_outside_stops_only_the_later_processes(
    make: Any, cleanup: None
) -> None:
    h = make(
        [
            {"text": "", "tool_calls": [sh("httpd -p 127.0.0.1:8081 -h /opt")]},
            {"text": "", "tool_calls": [sh("httpd -p 127.0.0.1:8082 -h /opt")]},
            {"text": "done"},
        ],
        sandbox={"isolation": "container", "image": test_image()},
    )
    sid = await h.ask("start two servers")
    containers = h.runtime.workspaces.containers
    assert len(servers(containers, sid)) == 2
    await h.runtime.rollback(sid, h.step_of(sid, "shell", 1))
    assert servers(containers, sid) == ["httpd -p 127.0.0.1:8081 -h /opt"]
    notices = [f["content"] for f in h.frames if f.get("type") == "notice"]
    assert any("1 process(es) started at or after" in n for n in notices), notices


async def test_a_fork_after_the_install_gets_its_own_container_with_it(
    make: Any, cleanup: None
) -> None:
    h = make_container_harness(make)
    sid = await h.ask("install things")
    containers = h.runtime.workspaces.containers
    before = await h.runtime.fork(sid, h.step_of(sid, "shell", 1), "before the install")
    after = await h.runtime.fork(sid, h.step_of(sid, "shell", 2), "after the install")
    for fork in (before, after):  # made as a command would make it: from the fork's layer
        ws = h.root / fork.session_id
        await asyncio.to_thread(containers.ready, fork.session_id, ws)
    assert in_container(h, after.session_id, "cat /usr/local/bin/newtool") == "installed"
    assert in_container(h, after.session_id, "test -e /bin/yes || echo gone") == "gone"
    assert in_container(h, before.session_id, "test -e /usr/local/bin/newtool || echo no") == "no"
    assert in_container(h, before.session_id, "cat /opt/tool/version") == "v1"
    # The source keeps its own container and state; the forks run none of its processes.
    assert in_container(h, sid, "cat /usr/local/bin/newtool") == "installed"
    assert servers(containers, after.session_id) == []


async def test_the_layer_is_stored_incrementally(make: Any, cleanup: None) -> None:
    """Bytes stored grow with bytes changed: a 1 MB file installed costs ~1 MB once; a step
    that changes nothing outside the workspace adds nothing and reads no file of the layer."""
    h = make(
        [
            {"text": "", "tool_calls": [sh("head -c 1000000 /dev/urandom > /opt/blob")]},
            {"text": "", "tool_calls": [sh("echo hi > in-workspace.txt")]},
            {"text": "done"},
        ],
        sandbox={"isolation": "container", "image": test_image()},
    )
    sid = await h.ask("go")
    snaps = h.store.snapshots.list_snapshots(sid)
    added = [s.new_bytes for s in snaps]
    # before s1 (nothing), after the install, before/after the workspace-only step
    assert max(added) >= 1_000_000 and max(added) < 1_100_000, added
    assert sum(added) < 1_100_000, added
    assert h.runtime.workspaces.env.last_read == 0  # the last capture trusted its stat cache


async def test_a_background_process_started_in_one_turn_answers_in_the_next(
    make: Any, cleanup: None
) -> None:
    """Each turn runs under a new lease (a new epoch): the worker's own earlier processes
    are not fenced out, only another worker's."""
    h = make(
        [
            {"text": "", "tool_calls": [sh("echo pong > ping && httpd -p 127.0.0.1:8083 -h .")]},
            {"text": "started"},
            {"text": "", "tool_calls": [sh("wget -qO- http://127.0.0.1:8083/ping")]},
            {"text": "answered"},
        ],
        sandbox={"isolation": "container", "image": test_image()},
    )
    sid = await h.ask("start a server")
    await h.turn(sid, "ask it")
    [_, ask] = [s for s in h.store.record.steps(sid) if s.name == "shell"]
    assert ask.output_data == "pong", ask.output_data


def container_cli(h: Any, sid: str) -> dict[str, Any]:
    config = h.tmp / "xclaw.yaml"
    config.write_text(
        f"database: {h.settings.database}\nworkspace_root: {h.root.resolve()}\n"
        f"sandbox:\n  isolation: container\n  image: {test_image()}\n"
    )
    env = {**os.environ, "XCLAW_HOME": str(h.tmp), "XCLAW_CONFIG": str(config)}
    done = subprocess.run(
        [sys.executable, "-m", "xclaw", "container", sid, "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


async def test_the_sessions_view_lists_the_processes_its_commands_left_running(
    make: Any, cleanup: None
) -> None:
    h = make(
        [
            {"text": "", "tool_calls": [sh("httpd -p 127.0.0.1:8085 -h /opt")]},
            {"text": "started"},
        ],
        sandbox={"isolation": "container", "image": test_image()},
    )
    sid = await h.ask("start a server")
    seq = int(h.step_of(sid, "shell", 0)[1:])
    view = await asyncio.to_thread(container_cli, h, sid)
    assert view["state"] == "running"
    assert view["policy"]["kind"] == "container" and view["policy"]["image"] == test_image()
    [server] = view["processes"]
    assert server["command"] == "httpd -p 127.0.0.1:8085 -h /opt"
    assert server["step"] == seq and server["epoch"] >= 1


async def test_the_python_api_lists_them_in_process_and_none_after_a_rollback(
    tmp_path: Path, cleanup: None
) -> None:
    """`session.processes()` of `xclaw.open`: the runtime's one list, typed; a rollback past
    the step that started the server stops it, and the list then says why it is empty."""
    import xclaw

    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"text": "", "tool_calls": [sh("httpd -p 127.0.0.1:8086 -h /opt")]},
                    {"text": "started"},
                ]
            }
        )
    )
    async with xclaw.open(
        tmp_path / "x.db",
        model=f"script:{script}",
        approval="yolo",
        workspace=tmp_path / "ws",
        home=tmp_path / "home",
        config={"sandbox": {"isolation": "container", "image": test_image()}},
    ) as agent:
        session = await agent.new_session()
        assert (await session.send("start a server")).reply == "started"
        [shell] = [s for s in await session.steps() if s.name == "shell"]
        listing = await session.processes()
        assert isinstance(listing, xclaw.SessionProcesses)
        assert [(p.command, p.step_id) for p in listing.processes] == [
            ("httpd -p 127.0.0.1:8086 -h /opt", shell.id)
        ]
        assert listing.state == "running" and listing.reason is None
        await session.rollback(shell.id)
        after = await session.processes()
        assert after.processes == [] and after.state == "running"
        assert after.reason == "nothing its commands started runs in its container now"


async def test_processes_of_steps_another_worker_rolled_back_stop_at_the_next_run(
    make: Any, cleanup: None
) -> None:
    """A rollback made where the container is not (another host's worker: the store alone)
    leaves the process the removed step started running here; the next run here stops it."""
    start = (
        "wget -qO- http://127.0.0.1:8086/ping || echo none; "
        "echo pong > ping && httpd -p 127.0.0.1:8086 -h ."
    )
    h = make(
        [{"text": "ready"}, {"text": "", "tool_calls": [sh(start)]}, {"text": "started"}],
        sandbox={"isolation": "container", "image": test_image()},
    )
    sid = await h.ask("prepare")
    await h.turn(sid, "start a server")
    containers = h.runtime.workspaces.containers
    assert len(servers(containers, sid)) == 1
    second = [s for s in h.store.record.steps(sid) if s.name == "user"][1]
    await asyncio.to_thread(h.store.record.rollback, sid, second.seq)  # the turn that started it
    await h.turn(sid, "start it again")  # the same command: is the old server still there?
    again = [s for s in h.store.record.steps(sid) if s.name == "shell"][-1]
    assert "pong" not in str(again.output_data), again.output_data
    assert len(servers(containers, sid)) == 1  # the new one only


async def test_a_workspace_entry_of_the_reserved_name_is_kept_and_never_taken_for_the_layer(
    make: Any, cleanup: None
) -> None:
    wf = {"name": "write_file", "input": {"path": ".xclaw-container/usr/x", "content": "mine"}}
    h = make(
        [
            {"text": "", "tool_calls": [wf]},
            {"text": "", "tool_calls": [sh("echo layer > /opt/y")]},
            {"text": "done"},
        ],
        sandbox={"isolation": "container", "image": test_image()},
    )
    sid = await h.ask("go")
    latest = h.store.snapshots.list_snapshots(sid)[-1].seq
    manifest = h.store.snapshots.get_snapshot(sid, latest)
    assert manifest is not None
    assert ".xclaw-container/usr/x" not in manifest  # not the layer's, not versioned
    assert manifest[".xclaw-container/opt/y"]["size"] == 6
    await h.runtime.rollback(sid, h.step_of(sid, "write_file", 0))
    assert (h.root / sid / ".xclaw-container" / "usr" / "x").read_text() == "mine"  # kept
    assert in_container(h, sid, "test -e /usr/x || echo absent") == "absent"
