"""Session containers nobody runs (xclaw/workspace/container_reaper.py, docs/containers.md):
stopped once no worker has run their session for the grace period (their file system kept
for its next run), removed with their session or when it is gone; `xclaw gc` finds them.

Real podman with runc and the test image (tests/containers.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.containers import containers_of, remove_containers, test_image
from tests.runtime.harness import sh

pytestmark = pytest.mark.slow


@pytest.fixture
def cleanup(tmp_path: Path) -> Iterator[None]:
    yield
    remove_containers(tmp_path / "ws")


def states(root: Path) -> dict[str, str]:
    return {str(c["Labels"]["xclaw.session"]): str(c["State"]) for c in containers_of(root)}  # type: ignore[index]


def gc(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xclaw", "gc", "--yes", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


TURNS: list[dict[str, Any]] = [
    {"text": "", "tool_calls": [sh("echo kept > /opt/kept && httpd -p 127.0.0.1:8084 -h /opt")]},
    {"text": "installed"},
    {"text": "", "tool_calls": [sh("cat /opt/kept")]},
    {"text": "read"},
]


async def test_an_idle_sessions_container_is_stopped_and_starts_again_with_its_files(
    make: Any, cleanup: None
) -> None:
    h = make(
        TURNS,
        sandbox={"isolation": "container", "image": test_image(), "container_grace_s": 0},
    )
    sid = await h.ask("install")
    root = h.root.resolve()
    assert states(root) == {sid: "running"}
    reaped = h.runtime.workspaces.reap_containers()
    assert [(r.session_id, r.action) for r in reaped] == [(sid, "stopped")]
    assert states(root) == {sid: "exited"}
    await h.turn(sid, "read it")  # started again for the run, its layer as it was
    read = [s for s in h.store.record.steps(sid) if s.name == "shell"][-1]
    assert read.output_data == "kept"
    assert states(root) == {sid: "running"}


async def test_a_container_within_its_grace_is_left_running(make: Any, cleanup: None) -> None:
    h = make(TURNS, sandbox={"isolation": "container", "image": test_image()})
    sid = await h.ask("install")
    assert h.runtime.workspaces.reap_containers() == []
    assert states(h.root.resolve()) == {sid: "running"}


async def test_deleting_a_session_removes_its_container_and_gc_removes_orphans(
    make: Any, cleanup: None, tmp_path: Path
) -> None:
    h = make(TURNS, sandbox={"isolation": "container", "image": test_image()})
    sid = await h.ask("install")
    root = h.root.resolve()
    await h.runtime.delete(sid)
    assert states(root) == {}
    assert not (root / ".containers" / sid).exists()

    other = await h.ask("install", sid=None)
    assert states(root) == {other: "running"}
    h.store.record.delete_session(other)  # behind the workspaces' back: its container is an orphan
    await h.close()
    config = tmp_path / "xclaw.yaml"
    config.write_text(
        f"database: {h.settings.database}\nworkspace_root: {root}\n"
        f"sandbox:\n  isolation: container\n  image: {test_image()}\n"
    )
    env = {**os.environ, "XCLAW_HOME": str(tmp_path), "XCLAW_CONFIG": str(config)}
    done = gc(env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["containers"] == [
        {
            "sessionId": other,
            "action": "removed",
            "why": "its session does not exist in this database",
        }
    ]
    assert states(root) == {}
