"""Spans at a real OTLP receiver (Arize Phoenix), from real `xclaw run` and `xclaw serve`
processes switched on by the standard OTEL_* variables — including a turn cut by SIGKILL,
exported once its resumed run ends, and a receiver that is down, which costs the run nothing."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.harness import Client, Server, close_open_clients
from tests.ports import free_port

from .conftest import Phoenix

# One pytest-xdist worker runs them all: one Phoenix for the module (tests/conftest.py).
pytestmark = pytest.mark.slow


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith(("XCLAW_", "OTEL_"))
    }
    env.update(
        {"XCLAW_HOME": str(tmp), "NO_COLOR": "1", "XCLAW_MODEL": f"script:{tmp / 'script.json'}"}
    )
    env.update(extra)
    return env


def _run(tmp: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xclaw", "run", *args],
        check=False,
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _session(tmp: Path) -> str:
    conn = sqlite3.connect(tmp / "xclaw.db")
    try:
        return str(conn.execute("SELECT session_id FROM sessions").fetchone()[0])
    finally:
        conn.close()


def _by_name(spans: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        out.setdefault(s["name"], []).append(s)
    return out


def test_xclaw_run_exports_genai_spans_to_phoenix(tmp_path: Path, phoenix: Phoenix) -> None:
    (tmp_path / "script.json").write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "",
                        "tool_calls": [
                            {
                                "name": "write_file",
                                "input": {"path": "a.txt", "content": "token-abcdef123"},
                            },
                            {"name": "spawn_agent", "input": {"task": "count the files"}},
                        ],
                    },
                    {"text": "all done"},
                ],
                "subagent": {
                    "turns": [
                        {"text": "", "tool_calls": [{"name": "list_dir", "input": {"path": "."}}]},
                        {"text": "one file"},
                    ]
                },
            }
        )
    )
    # The batch timer is an hour: spans reach Phoenix only because xclaw flushes at exit.
    env = _env(
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="3600000",
        OTEL_SERVICE_NAME="xclaw-test",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
        MY_TOKEN="token-abcdef123",
    )
    (tmp_path / "xclaw.yaml").write_text("secret_env: [MY_TOKEN]\n")
    r = _run(tmp_path, env, "--approval", "yolo", "write and count")
    assert r.returncode == 0, r.stdout + r.stderr
    sid = _session(tmp_path)
    # Flushed before exit: the spans are there without waiting for a batch timer.
    spans = phoenix.wait_for(sid, lambda s: len(s) >= 8, timeout=30)
    names = _by_name(spans)
    [root] = names["invoke_agent xclaw"]
    assert root["parent_id"] is None
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert {s["context"]["trace_id"] for s in spans} == {root["context"]["trace_id"]}
    chats = names["chat script.json"]
    assert len(chats) == 4  # two main, two sub-agent
    for c in chats:
        a = c["attributes"]
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.request.model"] == "script.json"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] >= 1
        assert a["gen_ai.response.finish_reasons"] in (["tool_use"], ["end_turn"])
        assert a["gen_ai.usage.cache_read.input_tokens"] == 0  # recorded usage (none cached)
    [write] = names["execute_tool write_file"]
    assert write["attributes"]["gen_ai.tool.name"] == "write_file"
    assert write["attributes"]["gen_ai.tool.call.id"] == "call_0_0"
    assert write["parent_id"] == root["context"]["span_id"]
    [spawn] = names["execute_tool spawn_agent"]
    [sub] = [s for s in spans if s["name"].startswith("invoke_agent s0")]
    assert sub["parent_id"] == spawn["context"]["span_id"]
    [listing] = names["execute_tool list_dir"]
    assert listing["parent_id"] == sub["context"]["span_id"]
    # Content was opted in, and the secret is redacted in it.
    assert "write and count" in root["attributes"]["gen_ai.input.messages"]
    assert all("token-abcdef123" not in json.dumps(s["attributes"]) for s in spans)
    assert "[REDACTED]" in write["attributes"]["gen_ai.tool.call.arguments"]


def test_a_turn_killed_mid_tool_is_exported_after_its_resume(
    tmp_path: Path, phoenix: Phoenix
) -> None:
    (tmp_path / "script.json").write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "",
                        "tool_calls": [{"name": "shell", "input": {"command": "sleep 60"}}],
                    },
                    {"text": "resumed and finished"},
                ]
            }
        )
    )
    env = _env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.endpoint)
    proc = subprocess.Popen(
        [sys.executable, "-m", "xclaw", "run", "--approval", "yolo", "wait"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if (tmp_path / "xclaw.db").exists():
                conn = sqlite3.connect(f"file:{tmp_path / 'xclaw.db'}?mode=ro", uri=True, timeout=5)
                try:
                    row = conn.execute(
                        "SELECT 1 FROM traces WHERE name='shell' AND status='running'"
                    ).fetchone()
                except sqlite3.OperationalError:
                    row = None
                finally:
                    conn.close()
                if row:
                    break
            assert time.monotonic() < deadline, "the shell step never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    sid = _session(tmp_path)
    r = _run(tmp_path, env, "--session", sid)  # resume: the interrupted call is settled
    assert r.returncode == 0, r.stdout + r.stderr
    # Every span expected, not just the root: Phoenix may make one export batch queryable
    # before another.
    wanted = ["chat script.json", "chat script.json", "execute_tool shell", "invoke_agent xclaw"]
    spans = phoenix.wait_for(
        sid, lambda s: sorted(x["name"] for x in s if x["name"] in wanted) == wanted, 60
    )
    names = _by_name(spans)
    [root] = names["invoke_agent xclaw"]
    [shell] = names["execute_tool shell"]
    assert shell["status_code"] == "ERROR"
    assert shell["attributes"]["error.type"] == "interrupted"
    assert shell["parent_id"] == root["context"]["span_id"]
    assert len(names["chat script.json"]) == 2
    assert root["status_code"] == "OK"  # the resumed turn ended with its answer


def test_xclaw_serve_exports_each_turn(tmp_path: Path, phoenix: Phoenix) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "hello there"}]}))
    server = Server(tmp_path / "srv", script, approval="yolo")
    env = server.env
    server.env = lambda: {**env(), "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.endpoint}  # type: ignore[method-assign]
    server.start()

    async def talk() -> str:
        client = await Client.open(server)
        try:
            await client.attach(None)
            reply = await client.turn("hi")
            assert reply["type"] == "reply", reply
            assert client.session_id is not None
            return client.session_id
        finally:
            await close_open_clients()

    import asyncio

    try:
        sid = asyncio.run(talk())
        # While the server keeps running: the batch goes out on its own timer.
        spans = phoenix.wait_for(sid, lambda s: len(s) >= 2, timeout=60)
        assert sorted(s["name"] for s in spans) == ["chat script.json", "invoke_agent xclaw"]
    finally:
        server.kill(signal.SIGTERM)


def test_xclaw_serve_flushes_its_spans_when_it_stops(tmp_path: Path, phoenix: Phoenix) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "bye"}]}))
    server = Server(tmp_path / "srv", script, approval="yolo")
    env = server.env
    server.env = lambda: {  # type: ignore[method-assign]
        **env(),
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "3600000",  # no timer: only the flush at exit sends them
    }
    server.start()

    async def talk() -> str:
        client = await Client.open(server)
        try:
            await client.attach(None)
            assert (await client.turn("hi"))["type"] == "reply"
            assert client.session_id is not None
            return client.session_id
        finally:
            await close_open_clients()

    import asyncio

    try:
        sid = asyncio.run(talk())
    finally:
        code = server.kill(signal.SIGTERM)
    assert code is not None
    spans = phoenix.wait_for(sid, lambda s: len(s) >= 2, timeout=30)
    assert sorted(s["name"] for s in spans) == ["chat script.json", "invoke_agent xclaw"]


def test_otlp_grpc_switched_on_by_xclaw_yaml(tmp_path: Path, phoenix: Phoenix) -> None:
    """No OTEL_* variable: xclaw.yaml's `otel` section, over gRPC to Phoenix's OTLP port."""
    (tmp_path / "script.json").write_text(
        json.dumps(
            {
                "turns": [
                    {"text": "", "tool_calls": [{"name": "list_dir", "input": {"path": "."}}]},
                    {"text": "empty"},
                ]
            }
        )
    )
    (tmp_path / "xclaw.yaml").write_text(
        f"otel:\n  endpoint: http://127.0.0.1:{phoenix.grpc_port}\n  protocol: grpc\n"
        "  service_name: xclaw-yaml\n"
    )
    r = _run(tmp_path, _env(tmp_path), "look")
    assert r.returncode == 0, r.stdout + r.stderr
    sid = _session(tmp_path)
    spans = phoenix.wait_for(sid, lambda s: len(s) >= 4, timeout=30)
    assert sorted(s["name"] for s in spans) == [
        "chat script.json",
        "chat script.json",
        "execute_tool list_dir",
        "invoke_agent xclaw",
    ]
    assert not any(k.startswith("gen_ai.input") for s in spans for k in s["attributes"])


def test_a_receiver_that_is_down_costs_the_run_nothing(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text(json.dumps({"turns": [{"text": "fine"}]}))
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = _env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=dead, OTEL_EXPORTER_OTLP_TIMEOUT="2")
    started = time.monotonic()
    r = _run(tmp_path, env, "hello")
    took = time.monotonic() - started
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fine" in r.stdout
    assert took < 30, f"xclaw run took {took:.1f}s with the receiver down"
