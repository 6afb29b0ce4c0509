"""[tools] The shell tool: `bash -c COMMAND` in the session's workspace, contained as a process
group.

The command gets its own session (process group), so a timeout or a cancelled run can stop the
command *and everything it started* with one signal. Output is read as it comes and kept within
a fixed memory bound (head and tail), whatever the command prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xclaw.errors import ToolError, XclawError
from xclaw.sandbox import landlock
from xclaw.sandbox.isolation import Isolation
from xclaw.sandbox.settings import SANDBOX_DEFAULTS
from xclaw.security.credentials import child_env
from xclaw.tools import lifeline
from xclaw.tools.base import Tool, ToolContext, ToolResult
from xclaw.tools.effects import EffectClass
from xclaw.tools.git_programs import describe, git_env, program_sources, runs_git
from xclaw.tools.schema import check_args
from xclaw.tools.shell_reading import NotSafe, simple_commands
from xclaw.tools.step_processes import (
    StepProcesses,
    live_members,
    register,
    sweep_stale_scopes,
    unregister,
)

_READ_CHUNK = 64 * 1024


class HeadTail:
    """Keeps the first and last `limit/2` bytes of a stream, counting what falls between."""

    def __init__(self, limit: int) -> None:
        self.head_limit = max(limit // 2, 0)
        self.tail_limit = max(limit - self.head_limit, 0)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[... {self.dropped} bytes truncated ...]\n{tail}"


async def _wait_exit(proc: asyncio.subprocess.Process, limit_s: float) -> bool:
    """True once the command's own process has exited; False when `limit_s` passes first.

    `Process.wait()` alone also waits for the output pipe to close, which a background job
    can keep open indefinitely; so the exit status is polled beside it.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    waiter = asyncio.ensure_future(proc.wait())
    try:
        while proc.returncode is None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await asyncio.wait({waiter}, timeout=min(0.05, remaining))
        return True
    finally:
        waiter.cancel()


async def _sandbox_gone(pgid: int, limit_s: float = 1.0) -> None:
    """bubblewrap's PID namespace is torn down by the kernel just after the command ends
    (everything in it is killed with its init): wait for that, so that processes still
    exiting are not reported as background processes left behind."""
    deadline = time.monotonic() + limit_s
    # Polled: the kernel gives no event for a process group emptying (noqa below).
    while live_members(pgid) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.005)


async def _git_would_run_programs(command: str, ctx: ToolContext) -> ToolResult | None:
    """A command allowed without asking that runs git, checked again just before it starts:
    since the policy looked, a parallel sub-agent may have written git configuration that
    names a program (the write-then-run chain, xclaw/tools/git_programs.py)."""
    try:
        commands = simple_commands(command)
    except NotSafe:
        return None  # never allowed unasked: the policy reads commands the same way
    if not any(runs_git(words) for words in commands):
        return None
    sources = await asyncio.to_thread(program_sources, Path(ctx.workspace))
    if not sources:
        return None
    return ToolResult(
        "Not run: this command was allowed without asking as read-only, but git here would "
        f"take programs to run from files in the workspace: {describe(sources)}. Issue it "
        "again to have it asked.",
        is_error=True,
    )


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "unknown exit status"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class ShellTool(Tool):
    """Runs a bash command in the workspace. Not read-only: it may do anything."""

    name = "shell"
    description = (
        "Run a bash command in the session's workspace directory and return its combined "
        "stdout/stderr and exit status. Non-interactive (stdin is empty). Use `timeout` (seconds) "
        "for long commands. Background processes are stopped when the command ends."
    )
    read_only = False
    effect = EffectClass.WORKSPACE
    parallel_safe = False

    def __init__(
        self,
        default_timeout_s: float = SANDBOX_DEFAULTS.shell_timeout_s,
        max_timeout_s: float = 600.0,
        output_cap: int = SANDBOX_DEFAULTS.output_cap,
        kill_grace_s: float = 2.0,
        secret_env: Iterable[str] = (),
        shell: str = "bash",
        secret_values: Iterable[str] = (),
        isolation: Isolation | None = None,
    ) -> None:
        self.default_timeout_s = default_timeout_s
        self.max_timeout_s = max(max_timeout_s, default_timeout_s)
        self.output_cap = output_cap
        self.kill_grace_s = kill_grace_s
        self.drain_s = 1.0
        self.secret_env = tuple(secret_env)
        # Values no variable given to the command may hold (whatever the variable's name).
        self.secret_values = tuple(secret_values)
        self.shell = shell
        # OS isolation (bubblewrap) around the lifeline wrapper; None: a plain process.
        self.isolation = isolation
        if isolation is not None and isolation.container is not None:
            self.description = (
                "Run a bash command in the session's own container (the workspace is its "
                "working directory, /workspace) and return its combined stdout/stderr and exit "
                "status. Non-interactive (stdin is empty). Use `timeout` (seconds) for long "
                "commands. What a command starts in the background (`server &`) keeps running "
                "across steps and turns; what it installs outside the workspace is kept with "
                "the session and rewound by a rollback."
            )
        # Processes a killed xclaw left in its steps' cgroup scopes are stopped now.
        sweep_stale_scopes()
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to run."},
                "timeout": {
                    "type": "number",
                    "minimum": 0,
                    "description": (
                        f"Seconds before the command is killed (default {default_timeout_s:g}, "
                        f"at most {self.max_timeout_s:g})."
                    ),
                },
            },
            "required": ["command"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            clean = check_args(self.name, self.input_schema, args)
            if not clean["command"].strip():
                raise ToolError("shell needs a non-empty 'command'")
            if "\0" in clean["command"]:
                raise ToolError("shell 'command' contains a NUL byte, which no program can take")
            if not await asyncio.to_thread(Path(ctx.workspace).is_dir):
                raise ToolError(f"the workspace directory {str(ctx.workspace)!r} does not exist")
        except ToolError as e:
            return ToolResult(e.message, is_error=True)
        timeout = min(float(clean.get("timeout", self.default_timeout_s)), self.max_timeout_s)
        if ctx.confined and (refused := await _git_would_run_programs(clean["command"], ctx)):
            return refused
        if ctx.confined and (self.isolation is None or not self.isolation.can_confine):
            # The policy allows unasked commands only where they can be confined; never run
            # one unconfined on the strength of a guess.
            return ToolResult(
                "Not run: this command was allowed without asking only to run confined, and "
                "no sandbox is available here",
                is_error=True,
            )
        return await self._execute(clean["command"], timeout, ctx)

    def _argv(
        self, command: str, workspace: Path, confined: bool = False, scratch: str | None = None
    ) -> list[str]:
        """The command, wrapped so that it dies with us: if xclaw is killed (even SIGKILL),
        the lifeline reaches EOF and the wrapper kills the whole group (tools/lifeline.py).
        Without this an interrupted call would go on running unrecorded — the very "executed
        without a record" the write-ahead rule forbids. With isolation, bubblewrap sits
        outside the wrapper, so the watcher runs inside the sandbox with the command."""
        inner = [self.shell, "-c", lifeline.WRAPPER, self.shell, command, str(lifeline.read_end())]
        if self.isolation is None:
            return inner
        if confined and not self.isolation.active and scratch is not None:
            return landlock.confine_argv(inner, scratch)  # no bubblewrap: Landlock
        return self.isolation.wrap(inner, workspace, confined=confined)

    async def _execute(self, command: str, limit_s: float, ctx: ToolContext) -> ToolResult:
        in_container = self.isolation is not None and self.isolation.container is not None
        step = StepProcesses.start(ctx.session_id, scoped=not in_container)
        register(step)
        # Landlock confinement (no bubblewrap): the only place the command may write.
        scratch = (
            tempfile.mkdtemp(prefix="xclaw-scratch-")
            if ctx.confined and self.isolation is not None and not self.isolation.active
            else None
        )
        try:
            return await self._execute_step(command, limit_s, ctx, step, scratch)
        finally:
            unregister(step)
            step.close()
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)

    async def _execute_step(
        self,
        command: str,
        limit_s: float,
        ctx: ToolContext,
        step: StepProcesses,
        scratch: str | None = None,
    ) -> ToolResult:
        started = time.monotonic()
        env = child_env(os.environ, {**ctx.env, **step.env}, self.secret_env, self.secret_values)
        env.update(git_env(env, Path(ctx.workspace), confined=ctx.confined))
        container = self.isolation.container if self.isolation is not None else None
        if container is not None:
            # The session's own container: made, started or adopted first (blocking work).
            try:
                await asyncio.to_thread(container.ready, ctx.session_id, Path(ctx.workspace))
            except XclawError as e:
                return ToolResult(f"Not run: {e.message}", is_error=True)
            inner = [self.shell, "-c", lifeline.WRAPPER, self.shell, command, "3"]
            marks = {**ctx.env, **step.env}
            argv = container.exec_argv(ctx.session_id, inner, marks, lifeline.read_end())
        else:
            argv = self._argv(command, Path(ctx.workspace), ctx.confined, scratch)
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *step.wrap(argv),
                # (podman's conmon writes into its working directory: not the workspace)
                cwd=container.quiet_dir if container is not None else ctx.workspace,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,  # interleaved as a terminal would show them
                start_new_session=True,  # its own process group: one signal reaches all of it
                pass_fds=(lifeline.read_end(),),
            )
        )
        cancelled: asyncio.CancelledError | None = None
        try:
            proc = await asyncio.shield(spawn)
        except OSError as e:
            return ToolResult(f"could not start {self.shell}: {e}", is_error=True)
        except asyncio.CancelledError as e:
            # The command may be running already (asyncio would kill only its first process):
            # let the start complete, then stop the whole group below.
            cancelled = e
            try:
                proc = await spawn
            except OSError:
                raise e from None
        pgid = step.pgid = proc.pid
        out = HeadTail(self.output_cap)
        assert proc.stdout is not None
        reader = asyncio.create_task(self._pump(proc.stdout, out))
        stopped_leftovers = False
        try:
            if cancelled is not None:
                raise cancelled
            timed_out = not await _wait_exit(proc, limit_s)
            if self.isolation is not None and self.isolation.active:
                await _sandbox_gone(pgid)
            if (timed_out or container is None) and step.live():
                # After a timeout: the command itself. After a normal exit: background jobs it
                # left behind (in its group, or detached with setsid but still tagged), which
                # nobody could otherwise track or stop — except in a session's container,
                # where they live on until the session ends (docs/containers.md).
                stopped_leftovers = not timed_out
                await step.stop(self.kill_grace_s)
            await self._reap(proc, reader)
        except BaseException:
            # Cancelled (or anything else): the command must not outlive the run. The reader
            # keeps draining the pipe so that the exit can be collected.
            await step.stop(self.kill_grace_s)
            await self._reap(proc, reader)
            raise
        code = proc.returncode
        if self.isolation is not None:
            code = self.isolation.exit_status(code)
        result = self._result(code, out, timed_out, limit_s, stopped_leftovers, started)
        if container is not None and result.is_error and not timed_out:
            why = await asyncio.to_thread(container.limit_reached, ctx.session_id, code, out.text())
            if why is not None:
                result = ToolResult(f"{result.content}\n[{why}]", is_error=True, data=result.data)
        if ctx.confined:
            result.data["confined"] = True
            if result.is_error:
                # The model should know why a write failed, and how to get it done.
                result = ToolResult(
                    result.content + "\n[ran without approval, so confined: the workspace is "
                    "read-only and the network is off; a command that must write is asked]",
                    is_error=True,
                    data=result.data,
                )
        return result

    async def _reap(self, proc: asyncio.subprocess.Process, reader: asyncio.Task[None]) -> None:
        """Collect the rest of the output and the exit status once the group is gone."""
        # Every writer of the pipe is dead now, unless something detached into its own session
        # and still holds it: then stop reading rather than wait for that process.
        done, _ = await asyncio.wait({reader}, timeout=self.drain_s)
        if not done:
            reader.cancel()
            transport = getattr(proc, "_transport", None)  # the only handle that drops the pipe
            if transport is not None:
                transport.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), self.drain_s)

    @staticmethod
    async def _pump(stream: asyncio.StreamReader, out: HeadTail) -> None:
        while chunk := await stream.read(_READ_CHUNK):
            out.feed(chunk)

    def _result(
        self,
        code: int | None,
        out: HeadTail,
        timed_out: bool,
        timeout: float,
        stopped_leftovers: bool,
        started: float,
    ) -> ToolResult:
        text = out.text()
        notes = []
        if timed_out:
            notes.append(
                f"[timed out after {timeout:g}s; the command and its children were killed]"
            )
        elif code != 0:
            notes.append(f"[{_describe_exit(code)}]")
        if stopped_leftovers:
            notes.append("[background processes still running when the command ended were stopped]")
        if not text and not notes:
            text = "(no output)"
        content = "\n".join(p for p in (text.rstrip("\n"), *notes) if p)
        return ToolResult(
            content,
            is_error=timed_out or code != 0,
            data={
                "exit_code": code,
                "timed_out": timed_out,
                "output_bytes": out.total,
                "truncated_bytes": out.dropped,
                "duration_ms": int((time.monotonic() - started) * 1000),
            },
        )
