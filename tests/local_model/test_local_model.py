"""xclaw against a real model on a real local inference server: llama-cpp-python's
OpenAI-compatible server running Gemma 3 270M (tests/local_model/conftest.py), driven
through the real `xclaw serve` (a WebSocket client) and `xclaw run`, as a user would.

The model is tiny and erratic: nothing here depends on what it says, only on what xclaw
does with it. Where a tool call is needed it is asked for the way a user of a small model
would, with `first_tool_choice` in xclaw.yaml (docs/local-models.md); temperature 0 keeps
the runs repeatable.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.local_model.llama import N_CTX, LlamaServer
from tests.local_model.relay import Relay
from tests.ports import free_port
from xclaw.demo.process import Client, Frame, ServerProcess

# One pytest-xdist worker runs the whole file (`--dist loadfile`): one model server for it.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.local_model,
    pytest.mark.timeout(900),
]

TOKEN = "local-model-test-token-123456"
MODEL = "openai:gemma-3-270m"
# A message this model echoes back at length (it repeats what it is given): a long,
# predictable generation to kill or cancel in the middle of.
LONG = " ".join(str(i) for i in range(1, 81))


def write_config(
    home: Path,
    base_url: str,
    *,
    first_tool_choice: str | None = None,
    max_tokens: int = 48,
    approval: str = "ask",
) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    entry: dict[str, Any] = {"model": MODEL, "base_url": base_url}
    if first_tool_choice:
        entry["first_tool_choice"] = first_tool_choice
    config = {
        "providers": [entry],
        "max_tokens": max_tokens,
        "temperature": 0,
        "context_window_tokens": N_CTX,
        "llm_retry_base_delay": 0.1,
        # Every shell command asks, so that a tool call goes through an approval.
        "approval": {"mode": approval, "safe_commands": []},
    }
    path = home / "xclaw.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def xclaw_env(home: Path, config: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("XCLAW_", "OPENAI_", "ANTHROPIC_", "OTEL_"))
    }
    env.update(
        XCLAW_HOME=str(home),
        XCLAW_CONFIG=str(config),
        XCLAW_TOKEN=TOKEN,
        NO_COLOR="1",
    )
    return env


def xclaw(
    env: dict[str, str], *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xclaw", *args],
        env=env,
        cwd=env["XCLAW_HOME"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def db_rows(home: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(home / "xclaw.db") as db:
        return db.execute(sql, args).fetchall()


def is_end(f: Frame) -> bool:
    return f.get("type") in ("reply", "error")


async def turn(client: Client, text: str, within_s: float = 300) -> Frame:
    """Send a message and wait for its reply (or error), answering nothing."""
    mark = client.mark()
    await client.say(text)
    return await client.until(is_end, within_s=within_s, since=mark)


# --- a run started before its model server (first: it starts the module's server) ----------


def test_xclaw_run_waits_for_a_model_server_that_is_still_loading(
    llama_setup: tuple[str, str], llama_server: LlamaServer, tmp_path: Path
) -> None:
    """`xclaw run` first, the model server second (nothing listens on its port until the
    model is loaded): the run says it is waiting, then completes. The late server is the
    module's own, not started yet when this test comes first in the file (as it does): the
    tests after it use it; run after them, it is a server of its own."""
    python, model = llama_setup
    home = tmp_path / "home"
    own = llama_server.proc is not None
    late = (
        LlamaServer(python, model, tmp_path / "late.log", port=free_port()) if own else llama_server
    )
    env = xclaw_env(home, write_config(home, late.url))
    run = subprocess.Popen(
        [sys.executable, "-m", "xclaw", "run", "What is 2 and 2?"],
        env=env,
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        time.sleep(3)
        assert run.poll() is None, run.communicate()[0]  # still waiting, not failed
        late.launch()
        out, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
        if own:
            late.stop()
    assert run.returncode == 0, out
    assert f"the model server at {late.url} is not answering yet" in out
    assert db_rows(home, "SELECT current_status FROM sessions") == [("Success",)]


# --- a plain answer, streamed ----------------------------------------------------------------


async def test_a_plain_answer_streams_and_its_unknown_usage_is_not_a_zero(
    llama: LlamaServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = xclaw_env(home, write_config(home, llama.url))
    server = ServerProcess(home, env, TOKEN, port=free_port())
    server.start()
    try:
        client = await Client.attach(server, None, lambda f: None)
        sid = str(client.session_id)
        reply = await turn(client, "What is the capital of France?")
        assert reply["type"] == "reply", reply
        deltas = [f["content"] for f in client.frames if f["type"] == "delta"]
        assert len(deltas) >= 2 and "".join(deltas) == reply["content"]
        async with httpx.AsyncClient() as http:
            got = await http.get(
                f"{server.url}/api/sessions/{sid}/steps",
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
        steps = got.json()
        await client.close()
    finally:
        server.kill(signal.SIGTERM)
    # The server streamed no usage: NULL in the token columns, xclaw's estimate flagged.
    (llm,) = [s for s in steps["steps"] if s["type"] == "llm_call"]
    assert llm["tokens"] == {"prompt": None, "completion": None}
    assert llm["usage"]["estimated"] is True and llm["usage"]["input"] > 0
    assert llm["cost"] is None  # a local model: no price
    assert llm["output"]["endpoint"] == llama.url
    assert db_rows(home, "SELECT token_usage_prompt FROM traces WHERE step_type='llm_call'") == [
        (None,)
    ]
    listing = xclaw(env, "steps", sid).stdout
    assert "(estimated)" in listing and "$" not in listing
    table = xclaw(env, "sessions").stdout
    assert "~" in table.splitlines()[1]


# --- a tool call under approval, its result sent back, several turns -------------------------


async def test_tool_calls_run_under_approval_and_their_results_go_back_over_turns(
    llama: LlamaServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with Relay(llama.port) as relay:
        env = xclaw_env(home, write_config(home, relay.url, first_tool_choice="shell"))
        server = ServerProcess(home, env, TOKEN, port=free_port())
        server.start()
        try:
            client = await Client.attach(server, None, lambda f: None)
            sid = str(client.session_id)
            answers = [True, False]
            for text in ("Run the command: date", "Now list the files with ls"):
                mark = client.mark()
                await client.say(text)
                ask = await client.until(
                    lambda f: f["type"] in ("approval_request", "error"), within_s=300, since=mark
                )
                assert ask["type"] == "approval_request", ask
                assert ask["name"] == "shell"
                await client.send(
                    {
                        "type": "approval",
                        "sessionId": sid,
                        "stepId": ask["stepId"],
                        "approve": answers.pop(0),
                    }
                )
                end = await client.until(is_end, within_s=300, since=mark)
                assert end["type"] == "reply", end
            await client.close()
        finally:
            server.kill(signal.SIGTERM)
        bodies = [r.body for r in relay.requests()]

    # Each turn: a forced first call, then the call that reads the tool's result.
    assert len(bodies) == 4, [b.get("tool_choice") for b in bodies]
    forced = {"type": "function", "function": {"name": "shell"}}
    assert [b.get("tool_choice") for b in bodies] == [forced, None, forced, None]
    steps = db_rows(
        home,
        "SELECT seq, step_type, name, status, call_id, output_data FROM traces ORDER BY seq",
    )
    tools = [r for r in steps if r[1] == "tool_call"]
    # Approved: it ran (whatever the model's command did: its output is the shell's);
    # denied: refused, not run.
    ran = [r for r in tools if not str(json.loads(r[5])).startswith("Not run")]
    assert len(ran) == 1 and len(tools) == 2, tools
    approvals = [json.loads(r[5]) for r in steps if r[2] == "approval"]
    assert [a["approved"] for a in approvals] == [True, False]
    # The result went back to the model as a tool message answering its call, and the next
    # turn carried the whole first turn.
    call_id = ran[0][4]
    second = bodies[1]["messages"]
    (result,) = [m for m in second if m["role"] == "tool"]
    assert result["content"] == json.loads(ran[0][5]) or json.loads(ran[0][5]) in result["content"]
    (asked,) = [m for m in second if m.get("tool_calls")]
    assert asked["content"] == "" and asked["tool_calls"][0]["function"]["name"] == "shell"
    assert result["tool_call_id"] == asked["tool_calls"][0]["id"]
    assert call_id.startswith("call__0_shell_")  # llama-cpp-python's own ids, kept
    last = bodies[3]["messages"]
    assert [m["role"] for m in last].count("tool") == 2
    assert any("Not run" in m["content"] for m in last if m["role"] == "tool")


# --- kill -9 mid-generation, resume, rollback, fork -------------------------------------------


async def test_kill_9_mid_generation_resumes_then_rollback_and_fork(
    llama: LlamaServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = xclaw_env(home, write_config(home, llama.url, max_tokens=160))
    server = ServerProcess(home, env, TOKEN, port=free_port())
    server.start()
    try:
        client = await Client.attach(server, None, lambda f: None)
        sid = str(client.session_id)
        await client.say(LONG)
        first = await client.until(lambda f: f["type"] in ("delta", "reply", "error"), 300)
        assert first["type"] == "delta", first  # the model is answering right now
        server.kill()  # SIGKILL, mid-generation
        await client.close()
        (running,) = db_rows(
            home, "SELECT seq FROM traces WHERE step_type='llm_call' AND status='running'"
        )

        # 160 tokens were for a generation long enough to be killed in; the call made again
        # after the restart only has to answer (it generated all 160, ~5 CPU-s of the
        # server's, at ~35 ms a token).
        write_config(home, llama.url, max_tokens=48)
        server.start()
        client = await Client.attach(server, sid, lambda f: None)
        history = await client.until(lambda f: f["type"] == "history")
        assert LONG in json.dumps(history)
        reply = await client.until(is_end, within_s=300)
        assert reply["type"] == "reply", reply  # the interrupted call was made again
        llm = db_rows(
            home, "SELECT seq, status, error_message FROM traces WHERE step_type='llm_call'"
        )
        assert llm[0] == (running[0], "failed", "interrupted")  # kept, marked
        assert [r[1] for r in llm[1:]] == ["completed"]

        # Another turn, then /rollback to it: its steps go, their ids are never reused.
        second = await turn(client, "Thank you.")
        assert second["type"] == "reply", second
        (target,) = db_rows(
            home, "SELECT max(seq) FROM traces WHERE step_type='user_input' AND session_id=?", sid
        )
        before = db_rows(home, "SELECT max(seq) FROM traces WHERE session_id=?", sid)[0][0]
        mark = client.mark()
        await client.say(f"/rollback s{target[0]:04d}")
        await client.until(
            lambda f: f["type"] == "notice" and "[rollback]" in f["content"], since=mark
        )
        assert db_rows(
            home, "SELECT count(*) FROM traces WHERE seq >= ? AND session_id=?", target[0], sid
        ) == [(0,)]
        third = await turn(client, "Say yes.")
        assert third["type"] == "reply", third
        (after,) = db_rows(
            home, "SELECT min(seq) FROM traces WHERE seq >= ? AND session_id=?", target[0], sid
        )
        assert after[0] > before  # ids never reused

        # /fork just after the resumed answer: a new session with a copy up to there.
        original = db_rows(home, "SELECT step_id, status FROM traces WHERE session_id=?", sid)
        mark = client.mark()
        await client.say(f"/fork s{llm[1][0]:04d} branch")
        forked = await client.until(lambda f: f["type"] == "forked", since=mark)
        fork_id = str(forked["sessionId"])
        await client.close()
        branch = await Client.attach(server, fork_id, lambda f: None)
        other = await turn(branch, "Say no.")
        assert other["type"] == "reply", other
        await branch.close()
    finally:
        server.kill(signal.SIGTERM)
    copied = db_rows(home, "SELECT seq FROM traces WHERE session_id=? ORDER BY seq", fork_id)
    assert [r[0] for r in copied[: llm[1][0]]] == list(range(1, llm[1][0] + 1))
    assert len(copied) > llm[1][0]  # and its own new turn after them
    assert db_rows(home, "SELECT step_id, status FROM traces WHERE session_id=?", sid) == original


# --- cancel stops the model ------------------------------------------------------------------


async def test_cancel_closes_the_request_and_the_server_stops_generating(
    llama: LlamaServer, tmp_path: Path
) -> None:
    """The `cancel` frame mid-generation: xclaw closes the HTTP request, llama-cpp-python
    notices between two tokens and stops. Measured: the server's CPU time after the cancel,
    in tokens' worth of generation, and how long a follow-up request waits for the server
    (it serves one request at a time: still generating, it would make it wait)."""
    home = tmp_path / "home"
    env = xclaw_env(home, write_config(home, llama.url, max_tokens=400))
    server = ServerProcess(home, env, TOKEN, port=free_port())
    server.start()
    try:
        client = await Client.attach(server, None, lambda f: None)
        sid = str(client.session_id)
        mark = client.mark()
        await client.say(LONG)

        def deltas(n: int) -> Any:
            return lambda f: (
                is_end(f) or sum(1 for x in client.frames[mark:] if x["type"] == "delta") >= n
            )

        await client.until(deltas(5), within_s=300, since=mark)
        cpu_a, t_a = llama.cpu_seconds(), time.monotonic()
        n_a = sum(1 for x in client.frames[mark:] if x["type"] == "delta")
        await client.until(deltas(25), within_s=300, since=mark)
        cpu_b, t_b = llama.cpu_seconds(), time.monotonic()
        n_b = sum(1 for x in client.frames[mark:] if x["type"] == "delta")
        assert not any(is_end(f) for f in client.frames[mark:]), "answered before the cancel"
        per_token = (cpu_b - cpu_a) / (n_b - n_a)
        rate = (n_b - n_a) / (t_b - t_a)

        await client.send({"type": "cancel", "sessionId": sid})
        cpu_c = llama.cpu_seconds()
        status = await client.until(
            lambda f: f["type"] == "status" and f.get("awaitingInput") is True, since=mark
        )
        await asyncio.sleep(3.0)
        after = llama.cpu_seconds() - cpu_c
        t0 = time.monotonic()
        async with httpx.AsyncClient(timeout=120) as http:
            r = await http.post(
                f"{llama.url}/chat/completions",
                json={
                    "model": "m",
                    "messages": [{"role": "user", "content": "Hi"}],
                    "max_tokens": 1,
                },
            )
        follow_up = time.monotonic() - t0
        await client.close()
    finally:
        server.kill(signal.SIGTERM)
    tokens_after = after / per_token
    print(
        f"\ncancel: {rate:.1f} tokens/s while streaming, {per_token * 1000:.0f} ms CPU a token; "
        f"after the cancel the server used {after * 1000:.0f} ms CPU in 3 s "
        f"(~{tokens_after:.1f} tokens' worth); a follow-up request took {follow_up:.2f} s"
    )
    assert r.status_code == 200
    assert tokens_after < 5, (after, per_token)
    # 375 tokens were left to generate at `rate`: had the server gone on, the follow-up would
    # have waited for them.
    assert follow_up < 0.5 * (400 - n_b) / rate
    assert status["status"] == "Running" and status["busy"] is False  # waiting, not Failed
    (llm,) = db_rows(home, "SELECT status, error_message FROM traces WHERE step_type='llm_call'")
    assert llm == ("failed", "cancelled by the user")
    assert db_rows(home, "SELECT current_status FROM sessions") == [("Running",)]


# --- xclaw run ---------------------------------------------------------------------------------


def test_xclaw_run_calls_a_tool_and_answers(llama: LlamaServer, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = xclaw_env(home, write_config(home, llama.url, first_tool_choice="shell"))
    r = xclaw(env, "run", "--approval", "yolo", "Run the command: pwd")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[shell]" in r.stdout
    kinds = db_rows(home, "SELECT step_type, status FROM traces ORDER BY seq")
    assert [k for k, _ in kinds] == ["user_input", "llm_call", "tool_call", "llm_call"]
    assert db_rows(home, "SELECT current_status FROM sessions") == [("Success",)]


# --- the demo with a real model ---------------------------------------------------------------


def test_xclaw_demo_completes_with_the_local_model(llama: LlamaServer, tmp_path: Path) -> None:
    """`xclaw demo --model openai:…` against the local server: the crash lands while the
    model's call is in flight, and every stage checks xclaw, not what the model chose to do."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("XCLAW_", "OPENAI_", "ANTHROPIC_", "OTEL_"))
    }
    env.update(OPENAI_BASE_URL=llama.url, NO_COLOR="1")
    r = subprocess.run(
        [sys.executable, "-m", "xclaw", "demo", "--model", MODEL, "--home", str(tmp_path / "d")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    for expected in (
        f"model {MODEL}",
        "kill -9: SIGKILL the server while the model's call is in flight",
        "the database holds the interrupted llm_call as `running`",
        "the task finished after the restart",
        "none executed twice",
        "every later step are deleted",
        "the workspace is back to what it was before that instruction",
        "the fork holds the history up to",
        "the original session is untouched",
    ):
        assert expected in r.stdout, expected


def test_a_prompt_over_the_servers_window_fails_in_words(
    llama: LlamaServer, tmp_path: Path
) -> None:
    """llama-cpp-python refuses a prompt longer than its --n_ctx inside a 200 response, as an
    empty event stream: the run fails (Failed, resumable) saying what that usually means."""
    home = tmp_path / "home"
    env = xclaw_env(home, write_config(home, llama.url))
    huge = " ".join(f"word{i}" for i in range(6000))  # ~4 tokens a word: well over 4096
    r = xclaw(env, "run", huge)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "empty event stream" in r.stdout + r.stderr
    assert "--n_ctx" in r.stdout + r.stderr
    assert db_rows(home, "SELECT current_status FROM sessions") == [("Failed",)]
    assert "context window of 4096" in llama.log()  # what the server's log said


async def test_this_server_reports_no_window_so_the_configured_one_stands(
    llama: LlamaServer,
) -> None:
    """llama-cpp-python reports no context window (neither /v1/models nor /props has it):
    xclaw asks, finds none, and keeps `context_window_tokens` (docs/local-models.md)."""
    from xclaw.llm.openai import OpenAIModel

    assert await OpenAIModel("gemma-3-270m", base_url=llama.url).context_window() is None
    assert '"GET /props HTTP/1.1" 404' in llama.log()
