"""A session runs under the sandbox policy it started with (xclaw/runtime/sandbox_pin.py,
docs/containers.md): recorded by its first run; a worker with another container policy, or
without containers at all, refuses it with the reason instead of running its commands
elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers import remove_containers, test_image
from tests.runtime.harness import Harness
from xclaw.errors import ConfigMismatch
from xclaw.runtime.sandbox_pin import recorded_policy, refusal
from xclaw.sandbox.container.policy import SandboxPolicy

HOST = SandboxPolicy("host")
BOX = SandboxPolicy("container", "img:1", 512, 1.0, 64, False)


def test_nothing_recorded_or_the_same_policy_runs() -> None:
    assert refusal(None, BOX, "w") is None
    assert refusal(BOX, BOX, "w") is None
    assert refusal(HOST, HOST, "w") is None


def test_a_container_session_is_never_run_on_the_host_nor_under_other_limits() -> None:
    why = refusal(BOX, HOST, "w2")
    assert why is not None and "a container of image img:1 (512 MB, 1 CPUs, 64 processes" in why
    assert "worker w2 runs shell commands on the worker's host" in why
    other = SandboxPolicy("container", "img:1", 1024, 1.0, 64, False)
    assert refusal(BOX, other, "w") is not None
    assert refusal(HOST, BOX, "w") is not None  # nor a host session moved into a container


def test_the_policy_reads_back_from_metadata_and_garbage_is_nothing() -> None:
    assert SandboxPolicy.from_json(BOX.to_json()) == BOX
    assert recorded_policy({"sandbox": {"kind": "container", "image": 3}}) is None
    assert recorded_policy({"sandbox": "container"}) is None


@pytest.fixture
def cleanup(tmp_path: Path) -> Iterator[None]:
    yield
    remove_containers(tmp_path / "ws")


@pytest.mark.slow
async def test_a_worker_without_the_sessions_container_policy_refuses_it(
    tmp_path: Path, cleanup: None
) -> None:
    turns = [{"text": "first"}, {"text": "second"}, {"text": "third"}]
    boxed = Harness(tmp_path, turns, sandbox={"isolation": "container", "image": test_image()})
    sid = await boxed.session()
    await boxed.turn(sid, "one")
    pinned = recorded_policy(boxed.store.record.get_session(sid).metadata)
    await boxed.close()
    assert pinned is not None and pinned.kind == "container" and pinned.image == test_image()

    host = Harness(tmp_path, turns, sandbox={"isolation": "none"})
    try:
        await host.session(sid)
        with pytest.raises(ConfigMismatch, match="runs under its sandbox policy, a container"):
            await host.runtime.send(sid, "two")
    finally:
        await host.close()

    bigger = Harness(
        tmp_path,
        turns,
        sandbox={"isolation": "container", "image": test_image(), "memory_mb": 4096},
    )
    try:
        await bigger.session(sid)
        with pytest.raises(ConfigMismatch, match="4096 MB"):
            await bigger.runtime.send(sid, "two")
    finally:
        await bigger.close()

    same = Harness(tmp_path, turns, sandbox={"isolation": "container", "image": test_image()})
    try:
        await same.session(sid)
        await same.turn(sid, "two")  # the same policy: it runs
        assert [f for f in same.of("reply")], same.frames
    finally:
        await same.close()
