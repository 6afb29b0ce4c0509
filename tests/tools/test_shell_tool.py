"""The shell tool against real bash processes in a real temporary workspace."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from tests.waiting import until
from xclaw.tools.base import ToolContext
from xclaw.tools.shell import HeadTail, ShellTool, child_env


def alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie nobody reaped (a zombie holds nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def _text_of(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


async def wait_for_file(path: Path) -> str:
    """The file's text, once it has some."""
    return await until(lambda: _text_of(path), f"{path} is written", in_thread=True)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ToolContext(workspace=ws, session_id="s1")


async def test_runs_in_the_workspace_and_returns_output(ctx: ToolContext) -> None:
    result = await ShellTool().run({"command": "pwd; echo hello"}, ctx)
    assert not result.is_error
    assert result.content == f"{ctx.workspace}\nhello"
    assert result.data["exit_code"] == 0


async def test_stdout_and_stderr_are_interleaved_in_order(ctx: ToolContext) -> None:
    result = await ShellTool().run({"command": "echo one; echo two >&2; echo three"}, ctx)
    assert result.content == "one\ntwo\nthree"


async def test_nonzero_exit_is_an_error_with_the_code(ctx: ToolContext) -> None:
    result = await ShellTool().run({"command": "echo partial; exit 3"}, ctx)
    assert result.is_error
    assert result.content == "partial\n[exit code 3]"
    assert result.data["exit_code"] == 3


async def test_no_output_says_so(ctx: ToolContext) -> None:
    result = await ShellTool().run({"command": "true"}, ctx)
    assert (result.content, result.is_error) == ("(no output)", False)


async def test_stdin_is_empty_so_readers_do_not_hang(ctx: ToolContext) -> None:
    result = await ShellTool(default_timeout_s=5).run({"command": "cat; echo after"}, ctx)
    assert result.content == "after"


async def test_output_is_capped_keeping_head_and_tail(ctx: ToolContext) -> None:
    result = await ShellTool(output_cap=1000).run({"command": "seq 1 100000"}, ctx)
    total = sum(len(f"{i}\n") for i in range(1, 100001))
    dropped = total - 1000
    assert result.data["output_bytes"] == total
    assert result.data["truncated_bytes"] == dropped
    assert result.content.startswith("1\n2\n3\n")
    assert result.content.endswith("99999\n100000")
    assert f"[... {dropped} bytes truncated ...]" in result.content
    assert len(result.content) < 1100


async def test_non_utf8_output_is_replaced_not_fatal(ctx: ToolContext) -> None:
    result = await ShellTool().run({"command": r"printf 'ok \xff\xfe end'"}, ctx)
    assert not result.is_error
    assert result.content == "ok \ufffd\ufffd end"


async def test_timeout_kills_the_whole_process_group(ctx: ToolContext) -> None:
    ws = ctx.workspace
    command = "echo $$ > sh.pid; sleep 100 & echo $! > bg.pid; sleep 100"
    started = time.monotonic()
    result = await ShellTool(kill_grace_s=1).run({"command": command, "timeout": 0.5}, ctx)
    assert time.monotonic() - started < 10  # vs sleep 100: killed, not waited for
    assert result.is_error and result.data["timed_out"]
    assert "timed out after 0.5s" in result.content
    for name in ("sh.pid", "bg.pid"):
        pid = int((ws / name).read_text())
        assert not alive(pid), f"{name} ({pid}) survived the timeout"


async def test_processes_ignoring_sigterm_are_killed_after_the_grace(ctx: ToolContext) -> None:
    command = "trap '' TERM; echo $$ > sh.pid; sleep 100 & echo $! > bg.pid; sleep 100"
    started = time.monotonic()
    result = await ShellTool(kill_grace_s=0.3).run({"command": command, "timeout": 0.3}, ctx)
    assert time.monotonic() - started < 10  # vs sleep 100: killed, not waited for
    assert result.data["timed_out"]
    for name in ("sh.pid", "bg.pid"):
        assert not alive(int((ctx.workspace / name).read_text()))


async def test_timeout_is_capped_by_the_maximum(ctx: ToolContext) -> None:
    tool = ShellTool(default_timeout_s=0.2, max_timeout_s=0.4, kill_grace_s=0.2)
    started = time.monotonic()
    result = await tool.run({"command": "sleep 30", "timeout": 1000}, ctx)
    assert time.monotonic() - started < 10  # vs sleep 30
    assert "timed out after 0.4s" in result.content


async def test_background_jobs_do_not_outlive_the_command(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = await ShellTool(kill_grace_s=1).run(
        {"command": "sleep 100 & echo $! > bg.pid; echo done"}, ctx
    )
    assert time.monotonic() - started < 10  # vs sleep 100: killed, not waited for
    assert not result.is_error
    assert result.content.startswith("done\n")
    assert (
        "background processes still running when the command ended were stopped" in result.content
    )
    assert not alive(int((ctx.workspace / "bg.pid").read_text()))


async def test_cancelling_the_task_kills_the_process_group(ctx: ToolContext) -> None:
    ws = ctx.workspace
    command = "echo $$ > sh.pid; sleep 100 & echo $! > bg.pid; wait"
    task = asyncio.create_task(ShellTool(kill_grace_s=1).run({"command": command}, ctx))
    sh = int(await wait_for_file(ws / "sh.pid"))
    bg = int(await wait_for_file(ws / "bg.pid"))
    assert alive(sh) and alive(bg)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not alive(sh)
    assert not alive(bg)


async def test_secrets_do_not_reach_the_command(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOME_API_KEY", "k1")
    monkeypatch.setenv("GITHUB_TOKEN", "k2")
    monkeypatch.setenv("APP_SECRET", "k3")
    monkeypatch.setenv("XCLAW_TOKEN", "k4")
    monkeypatch.setenv("CUSTOM_CREDENTIAL", "k5")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    ctx = ToolContext(workspace=ctx.workspace, session_id="s1", env={"FROM_RUNTIME": "yes"})
    tool = ShellTool(secret_env=("CUSTOM_CREDENTIAL",))
    result = await tool.run({"command": "env"}, ctx)
    lines = set(result.content.splitlines())
    assert "PLAIN_SETTING=visible" in lines
    assert "FROM_RUNTIME=yes" in lines
    for leaked in ("k1", "k2", "k3", "k4", "k5"):
        assert not any(line.endswith("=" + leaked) for line in lines), leaked


def test_child_env_filters_by_suffix_case_insensitively() -> None:
    base = {"a_api_key": "1", "Db_Password": "2", "PATH": "/bin", "TOKENIZER": "keep"}
    assert child_env(base, {"X": "y"}) == {"PATH": "/bin", "TOKENIZER": "keep", "X": "y"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "shell needs 'command' (string); optional: 'timeout'; 'command' is missing"),
        ({"command": 5}, "'command' must be string, got integer"),
        ({"command": "ls", "timeout": "soon"}, "'timeout' must be number, got string"),
        ({"command": "ls", "timeout": -1}, "'timeout' must be at least 0"),
        ({"command": "   "}, "shell needs a non-empty 'command'"),
        ({"command": "ls", "cwd": "/"}, "unknown argument 'cwd'"),
    ],
)
async def test_bad_input_is_an_error_result(
    ctx: ToolContext, args: dict[str, object], message: str
) -> None:
    result = await ShellTool().run(args, ctx)
    assert result.is_error
    assert message in result.content


async def test_missing_workspace_is_an_error_result(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path / "nope", session_id="s1")
    result = await ShellTool().run({"command": "ls"}, ctx)
    assert result.is_error and "does not exist" in result.content


async def test_killed_by_a_signal_is_reported(ctx: ToolContext) -> None:
    result = await ShellTool().run({"command": "kill -KILL $$"}, ctx)
    assert result.is_error
    assert "[killed by signal SIGKILL]" in result.content


def test_head_tail_keeps_both_ends_within_the_limit() -> None:
    buf = HeadTail(10)
    for chunk in (b"abc", b"defgh", b"ijklmnop", b"qrstuvwxyz"):
        buf.feed(chunk)
    assert (bytes(buf.head), bytes(buf.tail), buf.dropped) == (b"abcde", b"vwxyz", 16)
    assert buf.text() == "abcde\n[... 16 bytes truncated ...]\nvwxyz"
    small = HeadTail(10)
    small.feed(b"0123456789")
    assert small.text() == "0123456789"


async def test_cancelling_a_command_flooding_its_output_is_prompt(ctx: ToolContext) -> None:
    """The pipe is still drained while the group is stopped, so the exit can be collected."""
    task = asyncio.create_task(
        ShellTool(kill_grace_s=1).run({"command": "echo $$ > sh.pid; yes"}, ctx)
    )
    sh = int(await wait_for_file(ctx.workspace / "sh.pid"))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 5  # `yes` never ends by itself
    assert not alive(sh)


def running_with_argument(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if marker.encode() in argv and alive(int(entry)):
                found.append(int(entry))
    return found


@pytest.mark.parametrize("delay", [0, 0.001, 0.003, 0.01, 0.03])
async def test_cancelling_while_the_command_starts_still_kills_the_group(
    ctx: ToolContext, delay: float
) -> None:
    marker = f"100.{os.getpid()}{int(delay * 1000):03}"
    command = f"sleep {marker} & sleep {marker} & wait"
    task = asyncio.create_task(ShellTool(kill_grace_s=1).run({"command": command}, ctx))
    await asyncio.sleep(delay)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # A process forked just before the kill must be dead too (once the kill has reached it).
    await until(lambda: running_with_argument(marker) == [], "no command is left", 10)
