"""[sandbox/container] The processes inside a session's container, seen from the host.

Every command xclaw runs in a container carries, in its environment, the lease epoch of the
run that started it (`XCLAW_LEASE_EPOCH`, the session's fencing token), the step it belongs to
(`XCLAW_STEP_SEQ`), the worker whose run it was (`XCLAW_WORKER`) and the step's tag (`XCLAW_STEP_TAG`, xclaw/tools/step_processes.py); what
it starts inherits them. From the host (root) every process of the container is found by its
PID namespace, and those variables are read from `/proc/PID/environ`: a takeover kills the
processes another worker started under an older epoch, a rollback those of the steps it
removed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass

EPOCH_VAR = "XCLAW_LEASE_EPOCH"
SEQ_VAR = "XCLAW_STEP_SEQ"
OWNER_VAR = "XCLAW_WORKER"


@dataclass(frozen=True, slots=True)
class ContainerProcess:
    pid: int  # on the host
    epoch: int | None  # None: not started by xclaw (the container's own keeper, a person)
    seq: int | None
    command: str
    owner: str | None = None  # the worker whose run started it

    def to_json(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "epoch": self.epoch,
            "step": self.seq,
            "worker": self.owner,
            "command": self.command,
        }


def _ns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _value(environ: list[bytes], name: str) -> str | None:
    prefix = f"{name}=".encode()
    for item in environ:
        if item.startswith(prefix):
            return item[len(prefix) :].decode("utf-8", "replace")
    return None


def _number(environ: list[bytes], name: str) -> int | None:
    value = _value(environ, name)
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def processes_in(init_pid: int) -> list[ContainerProcess]:
    """The live processes sharing the PID namespace of `init_pid` (the container's first
    process), the first one included; empty when it is gone."""
    ns = _ns(init_pid)
    if ns is None:
        return []
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or _ns(entry) != ns:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            if stat[stat.rfind(b")") + 2 :].split()[:1] in ([b"Z"], [b"X"]):
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").strip().decode("utf-8", "replace")
        except OSError:
            continue
        out.append(
            ContainerProcess(
                int(entry),
                _number(environ, EPOCH_VAR),
                _number(environ, SEQ_VAR),
                command,
                _value(environ, OWNER_VAR),
            )
        )
    return sorted(out, key=lambda p: p.pid)


def kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
