"""Two creators of one session's container at once (docs/containers.md): two commands of a
run in this process, or two workers on one workspace root, each finding it missing. Each
makes its own under a name of its own and renames it to the session's; whoever names it
second adopts the first one's and removes its own — never "name already in use" as a
command's result. Real podman with runc, the test image."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers import containers_of, remove_containers, test_image
from xclaw.sandbox.container.lifecycle import Containers
from xclaw.sandbox.container.podman import find_podman
from xclaw.sandbox.container.policy import SandboxPolicy

pytestmark = pytest.mark.slow

SID = "RaceRaceRaceRaceRace01"


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    image = test_image()  # skips (or fails under XCLAW_TEST_REQUIRE_PODMAN) without podman
    root = (tmp_path / "ws").resolve()
    (root / SID).mkdir(parents=True)
    (root / ".image").write_text(image)
    yield root
    remove_containers(root)


def containers(root: Path) -> Containers:
    policy = SandboxPolicy("container", (root / ".image").read_text(), 256, 1.0, 64, False)
    return Containers(find_podman(), policy, root)


def test_a_worker_that_names_its_container_second_adopts_the_first_ones(root: Path) -> None:
    mine, other = containers(root), containers(root)
    theirs: list[str] = []

    def another_worker_first(point: str) -> None:
        # Between making ours and naming it: the other worker makes and names its own.
        if point == "container.created" and not theirs:
            theirs.append(other.ensure(SID, root / SID, 1).info.id)

    mine.crash_point = another_worker_first
    got = mine.ensure(SID, root / SID, 2)

    assert theirs and got.info.id == theirs[0]
    assert got.info.running
    listed = containers_of(root)
    assert [c["Id"] for c in listed] == theirs, listed  # ours removed, no half-made one left


def test_two_commands_at_once_make_one_container(root: Path) -> None:
    c = containers(root)
    errors: list[BaseException] = []

    def ready() -> None:
        try:
            c.ready(SID, root / SID)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=ready) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    listed = containers_of(root)
    assert len(listed) == 1, listed
    info = c.inspect(SID)
    assert info is not None and info.running
