"""A session working in a directory of its own (an editor's project, `xclaw acp`'s cwd):
its tools work there, its snapshots are of it, a rollback rewinds it in place (the same
directory; what snapshots do not version stays), a fork gets a default workspace of its own,
a delete leaves the project alone, and dangerous directories are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import xclaw
from tests.store.builders import tool
from tests.workspace.helpers import settle, tree
from tests.writes import finish
from xclaw.errors import ConfigError, WorkspaceError
from xclaw.store import Access, open_store
from xclaw.store.steps.model import OWN_WORKSPACE_KEY
from xclaw.store.steps.writes import BeginStep
from xclaw.workspace.snapshots import SnapshotConfig
from xclaw.workspace.timetravel import Workspaces

pytestmark = pytest.mark.asyncio


def _script(tmp_path: Path, turns: list[dict[str, Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return f"script:{path}"


WRITES = [
    {"tool_calls": [{"name": "write_file", "input": {"path": "a.txt", "content": "one\n"}}]},
    {"tool_calls": [{"name": "write_file", "input": {"path": "sub/b.txt", "content": "b\n"}}]},
    {"tool_calls": [{"name": "shell", "input": {"command": "echo two > a.txt; rm -f keep.txt"}}]},
    {"text": "done"},
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    (p / ".git").mkdir(parents=True)
    (p / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (p / "keep.txt").write_text("kept\n")
    return p


def _inode(path: Path) -> int:
    return path.stat().st_ino


def _given(tmp_path: Path, home: Path, where: str) -> str:
    return {
        "/": "/",
        "HOME": str(Path.home()),
        "XCLAW_HOME": str(home),
        "INSIDE_XCLAW_HOME": str(home / "inner"),
        "WORKSPACE_ROOT": str(home / "workspaces"),
        "DB_HOLDER": str(tmp_path / "holder"),
        "missing": str(tmp_path / "nope"),
        "relative": "project",
        "file": str(tmp_path / "f"),
    }[where]


def _open(tmp_path: Path, model: str, **kw: Any) -> Any:
    return xclaw.open(
        db=tmp_path / "x.db", model=model, home=tmp_path / "home", approval="yolo", **kw
    )


async def test_tools_snapshots_and_rollback_work_in_the_project_in_place(
    tmp_path: Path, project: Path
) -> None:
    inode = _inode(project)
    async with _open(tmp_path, _script(tmp_path, WRITES)) as agent:
        session = await agent.new_session(workspace=project)
        assert (await session.info()).metadata[OWN_WORKSPACE_KEY] == str(project)
        result = await session.send("write things")
        assert result.reply == "done", result.events
        assert tree(project) == {
            ".git": "dir",
            ".git/HEAD": "ref: refs/heads/main\n",
            "a.txt": "two\n",
            "sub": "dir",
            "sub/b.txt": "b\n",
        }
        # Nothing was written in the default workspace.
        assert not (tmp_path / "home" / "workspaces" / session.id).exists()
        first = next(s.id for s in await session.steps() if s.name == "write_file")
        (project / ".git" / "ORIG_HEAD").write_text("unversioned, written after\n")
        settle()
        await session.rollback(first)  # before the first write
        assert tree(project) == {
            ".git": "dir",
            ".git/HEAD": "ref: refs/heads/main\n",
            ".git/ORIG_HEAD": "unversioned, written after\n",
            "keep.txt": "kept\n",
        }
        assert _inode(project) == inode  # the same directory, rewound in place


async def test_a_fork_gets_a_workspace_of_its_own_and_the_project_stays(
    tmp_path: Path, project: Path
) -> None:
    async with _open(tmp_path, _script(tmp_path, WRITES)) as agent:
        session = await agent.new_session(workspace=project)
        await session.send("write things")
        first = next(s for s in await session.steps() if s.name == "write_file")
        fork = await session.fork(first.id, title="branch")
        info = await fork.info()
        assert OWN_WORKSPACE_KEY not in info.metadata
        own = tmp_path / "home" / "workspaces" / fork.id
        assert tree(own) == {
            ".git": "dir",
            ".git/HEAD": "ref: refs/heads/main\n",
            "a.txt": "one\n",
            "keep.txt": "kept\n",
        }
        assert (project / "a.txt").read_text() == "two\n"  # the source's project untouched
        await session.delete()
        assert (project / "a.txt").read_text() == "two\n"  # a delete leaves the project


async def test_every_process_resolves_the_recorded_directory(tmp_path: Path, project: Path) -> None:
    """Another process on the same database (here: the offline Workspaces of `xclaw
    rollback`) finds the session's directory from its record."""
    async with _open(tmp_path, _script(tmp_path, WRITES)) as agent:
        session = await agent.new_session(workspace=project)
        await session.send("write things")
        target = next(s for s in await session.steps() if s.name == "shell").id
    store = open_store(str(tmp_path / "x.db"), access=Access.WRITE)
    try:
        workspaces = Workspaces(store, tmp_path / "home" / "workspaces")
        assert workspaces.path(session.id) == project
        workspaces.rollback(session.id, target)
        assert (project / "a.txt").read_text() == "one\n"
        assert (project / "keep.txt").read_text() == "kept\n"
    finally:
        store.close()


async def test_an_in_place_rollback_cut_short_is_completed_by_the_next_recover(
    tmp_path: Path, project: Path
) -> None:
    store = open_store(str(tmp_path / "x.db"), access=Access.CREATE)
    try:
        sid = store.record.create_session(
            title="t", metadata={OWN_WORKSPACE_KEY: str(project)}
        ).session_id

        class Crash(Exception):
            pass

        def crash(point: str) -> None:
            if point == "restore.materialising":
                raise Crash(point)

        broken = Workspaces(store, tmp_path / "root", SnapshotConfig(crash_point=crash))
        steps = []
        for i in range(3):
            step = store.record.write(BeginStep(session_id=sid, step=tool()))
            broken.snapshot(sid, step)
            (project / f"f{i}.txt").write_text(f"{i}\n")
            (project / "keep.txt").write_text(f"changed {i}\n")
            store.record.write(finish(sid, step.seq, output_data="ok"))
            steps.append(step)
            settle()
        with pytest.raises(Crash):
            broken.rollback(sid, steps[1].seq)
        assert store.snapshots.pending_restores(sid)  # journaled, not finished
        Workspaces(store, tmp_path / "root").recover(sid)
        assert not store.snapshots.pending_restores(sid)
        assert {k: v for k, v in tree(project).items() if not k.startswith(".git")} == {
            "f0.txt": "0\n",
            "keep.txt": "changed 0\n",
        }
    finally:
        store.close()


async def test_a_missing_directory_is_said_not_recreated(tmp_path: Path, project: Path) -> None:
    store = open_store(str(tmp_path / "x.db"), access=Access.CREATE)
    try:
        sid = store.record.create_session(
            title="t", metadata={OWN_WORKSPACE_KEY: str(tmp_path / "gone")}
        ).session_id
        with pytest.raises(WorkspaceError, match="does not exist any more"):
            Workspaces(store, tmp_path / "root").directory(sid)
        assert not (tmp_path / "gone").exists()
    finally:
        store.close()


@pytest.mark.parametrize(
    "where",
    [
        "/",
        "HOME",
        "XCLAW_HOME",
        "INSIDE_XCLAW_HOME",
        "WORKSPACE_ROOT",
        "DB_HOLDER",
        "missing",
        "relative",
        "file",
    ],
)
async def test_dangerous_or_bad_directories_are_refused(tmp_path: Path, where: str) -> None:
    home = tmp_path / "home"
    (home / "workspaces").mkdir(parents=True)
    (home / "inner").mkdir()
    (tmp_path / "holder").mkdir()
    (tmp_path / "f").write_text("x")
    given = _given(tmp_path, home, where)
    async with xclaw.open(
        db=tmp_path / "holder" / "x.db", model=_script(tmp_path, WRITES), home=home
    ) as agent:
        with pytest.raises(ConfigError) as e:
            await agent.new_session(workspace=given)
        assert "director" in str(e.value) or "refusing" in str(e.value)
        assert await agent.sessions() == []
