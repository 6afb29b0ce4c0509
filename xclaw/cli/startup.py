"""[cli] An `xclaw` process's imports, made without the cycle collector running through them.

CPython 3.11 starts a collection after every 700 net new container objects: importing what a
command needs (450-650 modules: classes, functions, pydantic schemas) set off 115-130 of them,
each older generation's visiting everything imported so far — 23-56 ms of CPU a start
(`xclaw sessions`, `xclaw run`; bench/README.md, "Process starts"). What an import makes lives
as long as the process, so the command pauses the collector while it imports, then freezes
what it imported (`gc.freeze`: no later collection visits it; the server did so already once
it was up, xclaw/gateway/heap.py) and lets collections go on as before: 4-5 ms a start. The
few cycles an import leaves behind are kept with it (~800 objects for `xclaw serve`'s, such as
the classes `dataclass(slots=True)` replaced): a block runs once a process, never per request.

Only in a process that `main()` started (`begin`): a program that runs the commands in its own
process (click's test runner, an application importing xclaw) keeps its collector as it was.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_command_process = False


def begin() -> None:
    """This process runs one `xclaw` command: its imports may pause the collector."""
    global _command_process
    _command_process = True


@contextmanager
def importing() -> Iterator[None]:
    """No automatic collection inside the block; what it made is frozen after it (in a
    command's process; nested blocks leave it to the outermost)."""
    if not _command_process or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
