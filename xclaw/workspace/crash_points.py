"""[workspace] Named moments inside a snapshot, a restore or a session container's life at which a
SIGKILL must leave a state that reopening completes (the workspace is the old state or the new one,
never a mix).

The workspace code announces each moment to a hook, `SnapshotConfig.crash_point`. In
production the hook is `no_crash_point` and does nothing; the crash tests
(tests/workspace/test_crash.py) give their child process a hook that stops at one point
until the test kills it. Nothing here reads the environment or sleeps.
"""

from __future__ import annotations

from collections.abc import Callable

# Called with the name of the moment reached, e.g. "restore.half-swapped".
CrashPoint = Callable[[str], None]

# Every moment announced, in the order an operation reaches them.
POINTS = (
    "snapshot.stored",  # contents stored, the manifest not yet
    "restore.materialising",  # the first file of the new state written
    "restore.materialised",  # the new state complete beside the workspace
    "restore.half-swapped",  # the old workspace moved aside, the new one not yet in place
    "restore.swapped",  # the new state in place, the old one beside it
    "restore.moving",  # the first unversioned file moved back from the old state
    "restore.done",  # files durable, the journal row not yet dropped
)

# The moments of a session container's life (docs/containers.md), exercised by
# tests/workspace/test_container_kills.py.
CONTAINER_POINTS = (
    "container.created",  # made under a name of its own, its layer not yet written
    "container.layer-written",  # its layer written, not yet renamed to the session's
    "container.started",  # a stopped or new container started, not yet adopted
    "env.stopped",  # a rewind: the container stopped, its layer not yet rewritten
    "env.half-written",  # a rewind: the layer's old entries removed, the new ones not all in
)


def no_crash_point(point: str) -> None:
    """Production: every moment passes straight through."""
