"""[tools] The lifeline: how a tool's command learns, without a race, that xclaw has died.

xclaw holds the only write end of one pipe; every shell command gets the read end. Nobody
ever writes to it, so a read on it blocks until the last write end closes — which the kernel
does when xclaw dies, however it dies (SIGKILL included). The command's wrapper starts a
watcher on it *before* the command, and the watcher kills the command's process group on
EOF. If xclaw was already dead when the wrapper started, the read returns at once.

This replaced a parent-death signal (`setpriv --pdeathsig` plus a check of the parent pid):
a signal is sent once, at the moment the parent is reaped, to whatever process then holds
the pid — and bubblewrap's own `--die-with-parent` arms it only after its fork, so a kill
landing in bubblewrap's start-up left the sandboxed command running with no one to stop it.
EOF closes that gap: it is a state, not an event.
"""

from __future__ import annotations

import contextlib
import os
import threading

_lock = threading.Lock()
_fds: tuple[int, int] | None = None  # (read end, write end) of this process's pipe


def read_end() -> int:
    """The fd to pass to a command (`pass_fds`); the pipe is made on first use."""
    global _fds
    with _lock:
        if _fds is None:
            _fds = os.pipe()  # both ends close-on-exec: only pass_fds hands the read end on
        return _fds[0]


def _forget_in_child() -> None:
    # A fork that does not exec (multiprocessing) must not keep xclaw's lifeline open for
    # it: the child's copy of the write end would hide xclaw's death from every watcher.
    # Only the write end is closed: uvloop runs these hooks in the child it is about to
    # exec a command in, and that command needs the read end it was passed.
    global _fds, _lock
    if _fds is not None:
        with contextlib.suppress(OSError):
            os.close(_fds[1])
        _fds = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)

# The wrapper every shell command runs in: `$0` is the shell, `$1` the command, `$2` the
# lifeline's fd. The watcher (a subshell blocked in `read`) kills the whole process group when
# the lifeline reaches EOF; SIGTERM to the wrapper (a cancel, a timeout) does the same at once.
# The command's exit status is passed on, and a death by signal as the same signal (so an
# `exit 130` reads as SIGINT: a shell cannot tell them apart).
WRAPPER = (
    'trap "kill -KILL 0" TERM; { read _ <&"$2"; kill -KILL 0; } & w=$!; '
    '"$0" -c "$1" & wait $! 2>/dev/null; s=$?; kill -KILL $w 2>/dev/null; wait $w 2>/dev/null; '
    "if [ $s -gt 128 ]; then trap - TERM; kill -$((s-128)) $$; fi; exit $s"
)
