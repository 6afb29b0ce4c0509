"""Gateway benchmark: many sessions at once over real WebSockets against a real `xclaw serve`
with the scripted model.

Each session runs one 20-step task: the user's message (1 step), nine LLM calls that each ask
for one tool call (18 steps) and a final answer (1 step). A step counts when its trace row is
finished (the live `step` frame with status completed/failed). Step latency is what a client
waits for each next finished step of its session (the first measured from sending the
message). Throughput is every finished step of every session over the wall time from the
first message sent to the last reply.

    .venv/bin/python bench/gateway_bench.py                # 1, 50 and 200 sessions
    .venv/bin/python bench/gateway_bench.py --sessions 1 10 --tool shell
    .venv/bin/python bench/gateway_bench.py --llm-ms 1000  # a model that takes 1 s per call
    .venv/bin/python bench/gateway_bench.py --sessions 1000 --llm-ms 1000 --repeat 5
    .venv/bin/python bench/gateway_bench.py --sessions 700 --llm-ms 1000 --server-core 0

`--server-core N` pins the server's process to CPU N (taskset) and this client to the others:
the per-core goal (a server with a core of its own) is read off such runs.

`--tool list_dir` (default) is a near no-op tool, so the figures are the gateway's, the
runtime's and the store's own; `--tool shell` runs `echo` in a subprocess for every call.
"steps/commit" is finished steps per write transaction the server committed (the `commits`
of its /api/health, which also counts leases, snapshots and status changes): above 1, steps
of one run or of several sessions shared a commit. "writer busy" is the share of the wall
time SQLite's one writer thread spent running transactions (`writerBusyMs` of /api/health;
nan against a checkout that does not report it): near 100 % the writer is the bottleneck,
and every write waits for the transactions queued before it.

With the default instant model every session asks for its next step the moment the last one
is done, so the server is saturated and a step's wait is mostly its turn in the queue
(Little's law: ~sessions / throughput). `--llm-ms N` makes every model call take N ms, as a
real model does; the "xclaw ms" columns are then what a client waits beyond the model's own
time (an llm_call step's wait minus N): the latency xclaw adds per step. Paced sessions send
their message at a random moment within the first N ms (`--together` sends them all in the
same instant, so every model call of every session ends at once: a thundering herd).

`--compare PYTHON` also starts the `xclaw serve` of another checkout (the python of its own
venv, where xclaw is installed from that checkout) and runs every configuration against it
and against this one back to back, in the same run, so both see the same machine state; a
third row per configuration gives this checkout's figures over the other's ("ratio": steps/s
and server CPU per step, >1 = more; latencies, <1 = shorter). `--repeat N` runs every
configuration N times, alternating the servers (base, this, base, this, ...), and adds a row
of each figure's median over the runs: on a shared machine one run's p99 can move 2x from one
minute to the next, so a before/after or a goal is read off medians of alternated runs.

    git worktree add /tmp/perf-base REV && python3 -m venv /tmp/perf-base/.venv \
        && /tmp/perf-base/.venv/bin/pip install -e /tmp/perf-base
    .venv/bin/python bench/gateway_bench.py --compare /tmp/perf-base/.venv/bin/python

`--api-client` runs the Python API's remote client (`xclaw.connect`, docs/python-api.md)
side by side with this benchmark's own client against one gateway, alternated: steps/s,
events (frames) per second and the client's CPU per step. The API's client reads every frame
into its typed class and asks the gateway whether the run is over when a frame may be its
last (an HTTP request and a ping), which the benchmark's client does not.

"server ms/step" is the server process's CPU time (user + system, all threads) per finished
step: what each step costs the machine, whatever the concurrency.

`--protocols ws agui a2a` runs the same tasks through each protocol's front door against one
gateway of this checkout, alternated, and prints the server's CPU per step of each over the
native WebSocket's (the adapters' cost, docs/ag-ui.md and docs/a2a.md): `agui` posts each
task to `/agui` and reads its SSE stream (a step finishes at its STEP_FINISHED event), `a2a`
sends it with SendStreamingMessage to `/a2a` and reads the task's stream to its final status
(A2A says nothing per step: its latency columns are the task's end only).

`--budgets` runs this checkout twice, alternated: without budgets (base) and with caps no
task reaches on the session and the deployment (this, docs/budgets.md), so every model call is
reserved, checked and settled: the ratio row's server CPU per step is what budgets cost.

`--members` signs every session of this checkout's server in as a member of a team, each with
a user and token of its own (docs/teams.md), made in its database before the first round: every
frame, attach and the watch over open sockets then go through the team checks (a `--compare`
base without users keeps the server's token). With `--compare` against a checkout of main,
the ratio row is what authorisation costs per step.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import connect

TOOL_TURNS = 9  # 1 user_input + 9 x (llm_call + tool_call) + 1 final llm_call = 20 steps
STEPS_PER_TASK = 1 + 2 * TOOL_TURNS + 1


def script(tool: str, llm_ms: float = 0.0) -> dict[str, Any]:
    call = (
        {"name": "shell", "input": {"command": "echo step"}}
        if tool == "shell"
        else {"name": "list_dir", "input": {"path": "."}}
    )
    turns: list[dict[str, Any]] = [
        {"text": f"step {i}", "tool_calls": [call]} for i in range(TOOL_TURNS)
    ]
    turns.append({"text": "task done"})
    if llm_ms:
        for t in turns:
            t["sleep"] = llm_ms / 1000
    return {"turns": turns}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Gateway:
    proc: subprocess.Popen[bytes]
    url: str
    token: str
    home: Path
    llm_ms: float = 0.0
    stagger_ms: float = 0.0
    # One token per session when its sessions sign in as team members (--members).
    tokens: list[str] = field(default_factory=list)

    def token_of(self, i: int) -> str:
        return self.tokens[i % len(self.tokens)] if self.tokens else self.token


# --budgets: caps no task reaches, on every scope a session without an owner has (the session,
# the deployment's day and month; the scripted model has no price, so dollars count 0): every
# model call is reserved, checked and settled (docs/budgets.md).
BUDGETS = (
    "budgets:\n  session_tokens: 1000000000\n  total_daily_tokens: 1000000000000\n"
    "  total_monthly_usd: 1000000\n"
)
# --budgets --budget-caps session: the session's cap alone (no shared scope, no counters).
BUDGETS_SESSION = "budgets:\n  session_tokens: 1000000000\n"


def spawn_serve(
    home: Path,
    tool: str,
    token: str,
    *args: str,
    llm_ms: float = 0.0,
    python: str = sys.executable,
    core: int | None = None,
    config_extra: str = "",
    **env_extra: str,
) -> tuple[subprocess.Popen[bytes], int]:
    """A real `xclaw serve` with the scripted 20-step task (approval yolo) in `home`, started
    and listening; returns the process and its port. `python` runs it: another checkout's venv
    serves that checkout's code. Shared with workers_bench.py."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "script.json").write_text(json.dumps(script(tool, llm_ms)))
    (home / "xclaw.yaml").write_text("approval:\n  mode: yolo\nmax_iterations: 50\n" + config_extra)
    port = free_port()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "XCLAW_"))
    }
    env.update(
        XCLAW_HOME=str(home),
        XCLAW_CONFIG=str(home / "xclaw.yaml"),
        XCLAW_MODEL=f"script:{home / 'script.json'}",
        XCLAW_TOKEN=token,
        **env_extra,
    )
    out = home / "stdout.txt"
    with out.open("wb") as stdout, (home / "stderr.txt").open("wb") as stderr:
        # `core`: the server's process (every thread it starts) on that CPU alone (taskset).
        pinned = ["taskset", "-c", str(core)] if core is not None else []
        proc = subprocess.Popen(
            [
                *pinned,
                python,
                "-m",
                "xclaw",
                "serve",
                "--port",
                str(port),
                "--log-level",
                "warning",
                *args,
            ],
            cwd=home,
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
    deadline = time.monotonic() + 30
    while "listening on" not in out.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"xclaw serve did not start:\n{(home / 'stderr.txt').read_text()}")
        time.sleep(0.05)
    return proc, port


def start_gateway(
    home: Path,
    tool: str,
    llm_ms: float = 0.0,
    python: str = sys.executable,
    core: int | None = None,
    members: int = 0,
    config_extra: str = "",
) -> Gateway:
    token = "bench-token-0123456789"
    proc, port = spawn_serve(
        home, tool, token, llm_ms=llm_ms, python=python, core=core, config_extra=config_extra
    )
    gw = Gateway(proc, f"ws://127.0.0.1:{port}/ws", token, home, llm_ms)
    if members:
        gw.tokens = add_members(home / "xclaw.db", members)
    return gw


def add_members(db: Path, n: int) -> list[str]:
    """n members of a team in the server's database (it is running: SQLite's WAL lets this
    process write beside it), one token each (docs/teams.md)."""
    from xclaw.people.teams import UserRole, new_token, token_hash
    from xclaw.store.sqlite.store import SQLiteStore

    tokens = [new_token() for _ in range(n)]
    store = SQLiteStore(db)
    try:
        teams = store.teams
        for i, t in enumerate(tokens):
            teams.add_user(f"bench-member-{i}", UserRole.MEMBER, token_hash(t))
    finally:
        store.close()
    return tokens


@dataclass
class SessionRun:
    latencies_ms: list[float] = field(default_factory=list)
    added_ms: list[float] = field(default_factory=list)  # beyond the model's own time
    # (step type, when it finished, added ms) of each step, for --detail
    timeline: list[tuple[str, float, float]] = field(default_factory=list)
    steps: int = 0
    finished_at: float = 0.0
    frames: int = 0  # every frame (or event) the client read in its run


async def one_session(
    gw: Gateway, go: asyncio.Event, ready: asyncio.Queue[None], i: int = 0
) -> SessionRun:
    run = SessionRun()
    async with connect(
        gw.url,
        additional_headers={"Authorization": f"Bearer {gw.token_of(i)}"},
        max_size=None,
        max_queue=None,
        open_timeout=30,
    ) as ws:
        await ws.send(json.dumps({"type": "reconnect", "sessionId": None}))
        sid = None
        while True:  # attached once the post-attach status arrives
            f = json.loads(await ws.recv())
            if f["type"] == "session":
                sid = f["sessionId"]
            if f["type"] == "status" and "busy" in f:
                break
        ready.put_nowait(None)
        await go.wait()
        if gw.stagger_ms:
            await asyncio.sleep(random.uniform(0, gw.stagger_ms) / 1000)
        last = time.perf_counter()
        await ws.send(
            json.dumps({"type": "message", "sessionId": sid, "content": "run the 20-step task"})
        )
        async for raw in ws:
            now = time.perf_counter()  # when it arrived, before the client's own parsing
            f = orjson.loads(raw)
            run.frames += 1
            kind = f["type"]
            if kind == "step" and f["step"]["status"] != "running":
                run.latencies_ms.append((now - last) * 1000)
                model_ms = gw.llm_ms if f["step"]["type"] == "llm_call" else 0.0
                run.added_ms.append((now - last) * 1000 - model_ms)
                run.timeline.append((f["step"]["type"], now, run.added_ms[-1]))
                run.steps += 1
                last = now
            elif kind == "reply":
                run.finished_at = time.perf_counter()
                break
            elif kind == "error":
                raise RuntimeError(f"session {sid}: {f}")
    return run


async def one_api_session(
    gw: Gateway, go: asyncio.Event, ready: asyncio.Queue[None], agent: Any
) -> SessionRun:
    """one_session through the Python API's remote client (`xclaw.connect`): the same task,
    its events read into their typed classes, the same timing."""
    from xclaw.wire.frames import ErrorFrame, ReplyFrame, StepFrame

    run = SessionRun()
    session = await agent.new_session()
    await session._socket().ensure()  # connected and attached before the clock starts
    ready.put_nowait(None)
    await go.wait()
    if gw.stagger_ms:
        await asyncio.sleep(random.uniform(0, gw.stagger_ms) / 1000)
    last = time.perf_counter()
    async for event in session.send("run the 20-step task"):
        now = time.perf_counter()
        run.frames += 1
        if isinstance(event, StepFrame) and event.step.status != "running":
            run.latencies_ms.append((now - last) * 1000)
            model_ms = gw.llm_ms if event.step.type == "llm_call" else 0.0
            run.added_ms.append((now - last) * 1000 - model_ms)
            run.timeline.append((event.step.type, now, run.added_ms[-1]))
            run.steps += 1
            last = now
        elif isinstance(event, ReplyFrame):
            run.finished_at = time.perf_counter()
        elif isinstance(event, ErrorFrame):
            raise RuntimeError(f"session {session.id}: {event}")
    return run


def _http_of(gw: Gateway) -> str:
    return gw.url.replace("ws://", "http://").rsplit("/ws", 1)[0]


async def one_agui_session(
    gw: Gateway, go: asyncio.Event, ready: asyncio.Queue[None], i: int, http: Any
) -> SessionRun:
    """one_session through AG-UI: POST /agui, the task's events read off its SSE stream."""
    run = SessionRun()
    thread = f"agui-{os.getpid()}-{i}-{random.getrandbits(48):x}"
    body = {
        "threadId": thread,
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "run the 20-step task"}],
    }
    ready.put_nowait(None)
    await go.wait()
    if gw.stagger_ms:
        await asyncio.sleep(random.uniform(0, gw.stagger_ms) / 1000)
    last = time.perf_counter()
    headers = {"Authorization": f"Bearer {gw.token_of(i)}", "Accept": "text/event-stream"}
    async with http.stream("POST", f"{_http_of(gw)}/agui", json=body, headers=headers) as r:
        if r.status_code != 200:
            raise RuntimeError(f"thread {thread}: {r.status_code} {await r.aread()!r}")
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            now = time.perf_counter()
            event = orjson.loads(line[6:])
            run.frames += 1
            kind = event["type"]
            if kind == "STEP_FINISHED":
                step_type = event["stepName"].split(" ")[1]
                run.latencies_ms.append((now - last) * 1000)
                model_ms = gw.llm_ms if step_type == "llm_call" else 0.0
                run.added_ms.append((now - last) * 1000 - model_ms)
                run.timeline.append((step_type, now, run.added_ms[-1]))
                run.steps += 1
                last = now
            elif kind == "RUN_FINISHED":
                run.finished_at = time.perf_counter()
                break
            elif kind == "RUN_ERROR":
                raise RuntimeError(f"thread {thread}: {event}")
    return run


async def one_a2a_session(
    gw: Gateway, go: asyncio.Event, ready: asyncio.Queue[None], i: int, http: Any
) -> SessionRun:
    """one_session through A2A: SendStreamingMessage, the task's stream read to its end (A2A
    reports no steps: the task's 20 count as finished when it is)."""
    run = SessionRun()
    context = f"a2a-{os.getpid()}-{i}-{random.getrandbits(48):x}"
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {
            "message": {
                "messageId": f"{context}-m",
                "contextId": context,
                "role": "ROLE_USER",
                "parts": [{"text": "run the 20-step task"}],
            }
        },
    }
    ready.put_nowait(None)
    await go.wait()
    if gw.stagger_ms:
        await asyncio.sleep(random.uniform(0, gw.stagger_ms) / 1000)
    start = time.perf_counter()
    headers = {
        "Authorization": f"Bearer {gw.token_of(i)}",
        "Accept": "text/event-stream",
        "A2A-Version": "1.0",
    }
    async with http.stream("POST", f"{_http_of(gw)}/a2a", json=call, headers=headers) as r:
        async for line in r.aiter_lines():
            if not line.startswith("data:"):
                continue
            event = orjson.loads(line[5:])
            run.frames += 1
            result = event.get("result") or {}
            if "error" in event:
                raise RuntimeError(f"context {context}: {event}")
            state = (result.get("statusUpdate") or result.get("task") or {}).get("status", {})
            if state.get("state") == "TASK_STATE_COMPLETED":
                run.finished_at = time.perf_counter()
                per_step = (run.finished_at - start) * 1000 / STEPS_PER_TASK
                for _ in range(STEPS_PER_TASK):
                    run.latencies_ms.append(per_step)
                    run.added_ms.append(per_step)
                run.steps = STEPS_PER_TASK
                break
    return run


def machine_speed_ms() -> float:
    """A fixed piece of pure-Python work (best of 3, ms), printed with every run: the same
    code's figures here moved 2-3x between half hours of one day, and this says which kind of
    half hour a run was taken in (bench/HISTORY.md, "How fast was the machine?")."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        x = 0
        for i in range(1_000_000):
            x += i
        best = min(best, time.perf_counter() - start)
    return best * 1000


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def server_cpu_s(pid: int) -> float:
    """utime + stime of the server process (Linux /proc), to see who is busy: it or us."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_health(gw: Gateway) -> tuple[int | None, int | None]:
    """Write transactions the server has committed and the ms its SQLite writer has spent in
    them (GET /api/health; None where the server does not say: an older checkout)."""
    http = gw.url.replace("ws://", "http://").rsplit("/ws", 1)[0]
    try:
        with urllib.request.urlopen(  # our own loopback server
            urllib.request.Request(
                f"{http}/api/health", headers={"Authorization": f"Bearer {gw.token}"}
            ),
            timeout=10,
        ) as r:
            health = json.load(r)
    except OSError:
        return None, None
    commits, busy = health.get("commits"), health.get("writerBusyMs")
    return (
        commits if isinstance(commits, int) else None,
        busy if isinstance(busy, int) else None,
    )


def _delta(before: int | None, after: int | None) -> int | None:
    return None if before is None or after is None else after - before


async def one_round(
    gw: Gateway, sessions: int, agent: Any = None, protocol: str = "ws"
) -> tuple[list[SessionRun], float, float, float]:
    """All sessions attach, then send their message at the same instant. `agent`: through
    the Python API's remote client instead of the benchmark's own; `protocol`: through
    AG-UI or A2A instead of the WebSocket."""
    go = asyncio.Event()
    ready: asyncio.Queue[None] = asyncio.Queue()
    http = None
    if protocol != "ws":
        import httpx

        http = httpx.AsyncClient(
            timeout=httpx.Timeout(600.0),
            limits=httpx.Limits(max_connections=sessions + 10),
        )

    def start(i: int) -> Any:
        if agent is not None:
            return one_api_session(gw, go, ready, agent)
        if protocol == "agui":
            return one_agui_session(gw, go, ready, i, http)
        if protocol == "a2a":
            return one_a2a_session(gw, go, ready, i, http)
        return one_session(gw, go, ready, i)

    tasks = [asyncio.create_task(start(i)) for i in range(sessions)]
    for _ in range(sessions):
        await ready.get()
    # The client's own collector pauses are not the server's latency (a full collection of a
    # thousand connections' objects took ~70 ms here): none during the measured round.
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        cpu_server, cpu_client = server_cpu_s(gw.proc.pid), time.process_time()
        go.set()
        runs = await asyncio.gather(*tasks)
        cpu_server, cpu_client = (
            server_cpu_s(gw.proc.pid) - cpu_server,
            time.process_time() - cpu_client,
        )
    finally:
        gc.enable()
        if http is not None:
            await http.aclose()
    wall = max(r.finished_at for r in runs) - start
    return runs, wall, cpu_server, cpu_client


def _print_detail(runs: list[SessionRun]) -> None:
    """Where the added latency is: by step type, and its p99 second by second of the round
    (a burst or a pause shows as one bad second)."""
    points = [p for r in runs for p in r.timeline]
    if not points:
        return
    t0 = min(t for _, t, _ in points)
    for kind in ("user_input", "llm_call", "tool_call"):
        xs = [a for k, _, a in points if k == kind]
        if xs:
            print(
                f"    {kind:<10} n={len(xs):<6} added p50 {statistics.median(xs):6.1f}  "
                f"p99 {pct(xs, 99):6.1f}  max {max(xs):6.1f} ms"
            )
    by_second: dict[int, list[float]] = {}
    for _, t, a in points:
        by_second.setdefault(int(t - t0), []).append(a)
    print(
        "    added p99 by second: "
        + " ".join(f"{s}s:{pct(v, 99):.0f}" for s, v in sorted(by_second.items()))
    )


async def bench(
    gw: Gateway,
    sessions: int,
    *,
    min_rounds: int = 3,
    min_seconds: float = 2.0,
    detail: bool = False,
    agent: Any = None,
    protocol: str = "ws",
) -> dict[str, float]:
    """Rounds of `sessions` concurrent tasks until at least min_rounds and min_seconds of
    measurement: one 20-step task alone is over in milliseconds, too short to time once."""
    runs: list[SessionRun] = []
    wall = cpu_server = cpu_client = 0.0
    rounds = 0
    commits_before, busy_before = await asyncio.to_thread(server_health, gw)
    while rounds < min_rounds or (wall < min_seconds and rounds < 50):
        r, w, cs, cc = await one_round(gw, sessions, agent, protocol)
        runs += r
        wall, cpu_server, cpu_client, rounds = (
            wall + w,
            cpu_server + cs,
            cpu_client + cc,
            rounds + 1,
        )
    commits_after, busy_after = await asyncio.to_thread(server_health, gw)
    commits = _delta(commits_before, commits_after)
    busy_ms = _delta(busy_before, busy_after)
    if detail:
        _print_detail(runs)
    lat = [x for r in runs for x in r.latencies_ms]
    added = [x for r in runs for x in r.added_ms]
    steps = sum(r.steps for r in runs)
    if steps != rounds * sessions * STEPS_PER_TASK:
        raise RuntimeError(
            f"expected {rounds * sessions * STEPS_PER_TASK} finished steps, saw {steps}"
        )
    return {
        "sessions": sessions,
        "rounds": rounds,
        "steps": steps,
        "wall_s": wall,
        "steps_per_s": steps / wall,
        "p50_ms": statistics.median(lat),
        "p99_ms": pct(lat, 99),
        "max_ms": max(lat),
        "added_p50_ms": statistics.median(added),
        "added_p99_ms": pct(added, 99),
        "steps_per_commit": steps / commits if commits else float("nan"),
        "writer_busy": busy_ms / 1000 / wall if busy_ms is not None else float("nan"),
        "server_ms_per_step": cpu_server / steps * 1000,
        "server_cpu": cpu_server / wall,
        "client_cpu": cpu_client / wall,
        "frames_per_s": sum(r.frames for r in runs) / wall,
        "client_ms_per_step": cpu_client / steps * 1000,
    }


def _row(label: str, r: dict[str, float], paced: bool) -> str:
    def f(key: str, fmt: str) -> str:
        return format(r[key], fmt)

    return (
        f"{label:>6} {r['sessions']:>8.0f} {r['rounds']:>6.0f} {r['steps']:>7.0f} "
        f"{f('wall_s', '>8.2f')} {f('steps_per_s', '>9.0f')} "
        f"{f('p50_ms', '>8.1f')} {f('p99_ms', '>8.1f')} {f('max_ms', '>8.1f')} "
        + (f"{f('added_p50_ms', '>9.1f')} {f('added_p99_ms', '>9.1f')} " if paced else "")
        + f"{f('steps_per_commit', '>12.2f')} {f('writer_busy', '>11.0%')} "
        + f"{f('server_ms_per_step', '>14.3f')} "
        + f"{f('server_cpu', '>10.0%')} {f('client_cpu', '>10.0%')}"
    )


def _median_row(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over repeated runs of one configuration (the `~` rows)."""
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def _ratio_row(new: dict[str, float], old: dict[str, float], paced: bool) -> str:
    def q(key: str) -> str:
        known = old[key] and not math.isnan(old[key]) and not math.isnan(new[key])
        return f"{new[key] / old[key]:.2f}x" if known else "-"

    return (
        f"{'ratio':>6} {'':>8} {'':>6} {'':>7} {'':>8} {q('steps_per_s'):>9} "
        f"{q('p50_ms'):>8} {q('p99_ms'):>8} {q('max_ms'):>8} "
        + (f"{q('added_p50_ms'):>9} {q('added_p99_ms'):>9} " if paced else "")
        + f"{'':>12} {q('writer_busy'):>11} {q('server_ms_per_step'):>14}"
    )


async def api_client_bench(args: argparse.Namespace) -> None:
    """--api-client: the Python API's remote client (xclaw.connect) side by side with this
    benchmark's own client, against one gateway of this checkout, alternated."""
    import xclaw

    with tempfile.TemporaryDirectory(prefix="xclaw-gw-bench-") as tmp:
        gw = start_gateway(Path(tmp) / "this", args.tool, args.llm_ms, core=args.server_core)
        gw.stagger_ms = 0.0 if args.together else args.llm_ms
        http = gw.url.replace("ws://", "http://").rsplit("/ws", 1)[0]
        try:
            async with xclaw.connect(http, token=gw.token) as agent:
                print(
                    f"the Python API's remote client vs the benchmark's own: {STEPS_PER_TASK}-"
                    f"step tasks, tool={args.tool}, model "
                    f"{f'{args.llm_ms:g} ms' if args.llm_ms else 'instant'}; machine: a "
                    f"1M-step Python loop takes {machine_speed_ms():.0f} ms"
                )
                await bench(gw, 2, min_rounds=1, min_seconds=0)
                await bench(gw, 2, min_rounds=1, min_seconds=0, agent=agent)
                min_rounds, min_seconds = (1, 0.0) if args.llm_ms else (3, 2.0)
                print(
                    f"{'client':>7} {'sessions':>8} {'steps/s':>9} {'events/s':>9} "
                    f"{'p50 ms':>8} {'p99 ms':>8} {'client ms/step':>14} {'client cpu':>10} "
                    f"{'server ms/step':>14}"
                )
                for n in args.sessions:
                    results: dict[str, list[dict[str, float]]] = {"own": [], "api": []}
                    for k in range(args.repeat):
                        order = ("own", "api") if k % 2 == 0 else ("api", "own")
                        for label in order:
                            results[label].append(
                                await bench(
                                    gw,
                                    n,
                                    min_rounds=min_rounds,
                                    min_seconds=min_seconds,
                                    agent=agent if label == "api" else None,
                                )
                            )
                    med = {label: _median_row(rs) for label, rs in results.items()}
                    for label in ("own", "api"):
                        r = med[label]
                        print(
                            f"{label:>7} {n:>8} {r['steps_per_s']:>9.0f} "
                            f"{r['frames_per_s']:>9.0f} {r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f} "
                            f"{r['client_ms_per_step']:>14.3f} {r['client_cpu']:>10.0%} "
                            f"{r['server_ms_per_step']:>14.3f}",
                            flush=True,
                        )
                    print(
                        f"{'ratio':>7} {'':>8} "
                        f"{med['api']['steps_per_s'] / med['own']['steps_per_s']:>8.2f}x "
                        f"{med['api']['frames_per_s'] / med['own']['frames_per_s']:>8.2f}x",
                        flush=True,
                    )
        finally:
            gw.proc.send_signal(signal.SIGTERM)
            gw.proc.wait(timeout=30)


async def protocols_bench(args: argparse.Namespace) -> None:
    """--protocols: the same tasks through the WebSocket, AG-UI and A2A against one gateway
    of this checkout, alternated; the server's CPU per step of each over the WebSocket's."""
    with tempfile.TemporaryDirectory(prefix="xclaw-gw-bench-") as tmp:
        gw = start_gateway(Path(tmp) / "this", args.tool, args.llm_ms, core=args.server_core)
        gw.stagger_ms = 0.0 if args.together else args.llm_ms
        try:
            print(
                f"protocols side by side: {STEPS_PER_TASK}-step tasks, tool={args.tool}, model "
                f"{f'{args.llm_ms:g} ms' if args.llm_ms else 'instant'}; machine: a 1M-step "
                f"Python loop takes {machine_speed_ms():.0f} ms"
            )
            for protocol in args.protocols:  # warm-up: imports (the adapters load lazily)
                await bench(gw, 2, min_rounds=1, min_seconds=0, protocol=protocol)
            min_rounds, min_seconds = (1, 0.0) if args.llm_ms else (3, 2.0)
            print(
                f"{'protocol':>8} {'sessions':>8} {'steps/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
                f"{'server ms/step':>14} {'server cpu':>10} {'vs ws':>7}"
            )
            for n in args.sessions:
                results: dict[str, list[dict[str, float]]] = {p: [] for p in args.protocols}
                for k in range(args.repeat):
                    order = list(args.protocols)
                    if k % 2:
                        order.reverse()
                    for protocol in order:
                        results[protocol].append(
                            await bench(
                                gw,
                                n,
                                min_rounds=min_rounds,
                                min_seconds=min_seconds,
                                protocol=protocol,
                            )
                        )
                med = {p: _median_row(rs) for p, rs in results.items()}
                base = med.get("ws")
                for protocol in args.protocols:
                    r = med[protocol]
                    versus = (
                        f"{r['server_ms_per_step'] / base['server_ms_per_step']:.3f}x"
                        if base
                        else "-"
                    )
                    print(
                        f"{protocol:>8} {n:>8} {r['steps_per_s']:>9.0f} {r['p50_ms']:>8.1f} "
                        f"{r['p99_ms']:>8.1f} {r['server_ms_per_step']:>14.3f} "
                        f"{r['server_cpu']:>10.0%} {versus:>7}",
                        flush=True,
                    )
        finally:
            gw.proc.send_signal(signal.SIGTERM)
            gw.proc.wait(timeout=30)


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="xclaw-gw-bench-") as tmp:
        servers = [("this", sys.executable)]
        if args.compare:
            servers.insert(0, ("base", args.compare))
        elif args.budgets:  # base: this checkout without budgets; this: with them
            servers.insert(0, ("base", sys.executable))
        gateways: list[tuple[str, Gateway]] = []
        try:
            for label, python in servers:
                gw = start_gateway(
                    Path(tmp) / label,
                    args.tool,
                    args.llm_ms,
                    python,
                    core=args.server_core,
                    members=max(args.sessions) if args.members and label == "this" else 0,
                    config_extra=(
                        (BUDGETS_SESSION if args.budget_caps == "session" else BUDGETS)
                        if args.budgets and label == "this"
                        else ""
                    ),
                )
                gw.stagger_ms = 0.0 if args.together else args.llm_ms
                gateways.append((label, gw))
            model = f"{args.llm_ms:g} ms per model call" if args.llm_ms else "instant"
            if args.llm_ms and not args.together:
                model += f", starts spread over {args.llm_ms:g} ms"
            print(
                f"xclaw gateway benchmark: {STEPS_PER_TASK}-step tasks, tool={args.tool}, "
                f"scripted model ({model}), SQLite in {tmp}; machine: a 1M-step Python loop "
                f"takes {machine_speed_ms():.0f} ms"
                + (f"; base = {args.compare}, this = {sys.executable}" if args.compare else "")
            )
            for _, gw in gateways:
                # Warm-up: imports, connections, pages (one model call's worth when paced).
                await bench(gw, 2, min_rounds=1, min_seconds=0)
            # A paced task lasts >= 10 model calls: one round is long enough to time.
            min_rounds, min_seconds = (1, 0.0) if args.llm_ms else (3, 2.0)
            paced = bool(args.llm_ms)
            print(
                f"{'server':>6} {'sessions':>8} {'rounds':>6} {'steps':>7} {'wall s':>8} "
                f"{'steps/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
                + (f"{'xclaw p50':>9} {'xclaw p99':>9} " if paced else "")
                + f"{'steps/commit':>12} {'writer busy':>11} {'server ms/step':>14} "
                + f"{'server cpu':>10} "
                + f"{'client cpu':>10}"
            )
            rows: dict[str, list[dict[str, float]]] = {label: [] for label, _ in gateways}
            for n in args.sessions:
                repeats: dict[str, list[dict[str, float]]] = {label: [] for label, _ in gateways}
                for _ in range(args.repeat):  # base, this, base, this: the same machine state
                    done: dict[str, dict[str, float]] = {}
                    for label, gw in gateways:
                        r = await bench(
                            gw,
                            n,
                            min_rounds=min_rounds,
                            min_seconds=min_seconds,
                            detail=args.detail,
                        )
                        repeats[label].append(r)
                        done[label] = r
                        print(_row(label, r, paced), flush=True)
                    if "base" in done:
                        print(_ratio_row(done["this"], done["base"], paced), flush=True)
                medians = {label: _median_row(rs) for label, rs in repeats.items()}
                for label, rs in repeats.items():
                    rows[label].append(medians[label])
                    if args.repeat > 1:
                        print(_row(f"{label}~", medians[label], paced), flush=True)
                        if paced:
                            p99s = " ".join(f"{r['added_p99_ms']:.1f}" for r in rs)
                            print(f"{'':>6} {label} xclaw p99 of each run, ms: {p99s}")
                if args.repeat > 1 and "base" in medians:
                    print(_ratio_row(medians["this"], medians["base"], paced), flush=True)
            for label, _ in gateways:
                by_n = {int(r["sessions"]): r for r in rows[label]}
                if 1 in by_n and max(by_n) > 1:
                    top = max(by_n)
                    print(
                        f"{label}: throughput ratio {top} sessions / 1 session: "
                        f"{by_n[top]['steps_per_s'] / by_n[1]['steps_per_s']:.1f}x"
                    )
            if paced:
                print(
                    "xclaw p50/p99 = a step's wait beyond the model's own time (llm_call steps minus "
                    f"{args.llm_ms:g} ms)"
                )
        finally:
            for _, gw in gateways:
                gw.proc.send_signal(signal.SIGTERM)
            for _, gw in gateways:
                gw.proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 50, 200])
    parser.add_argument("--tool", choices=["list_dir", "shell"], default="list_dir")
    parser.add_argument(
        "--llm-ms",
        type=float,
        default=0.0,
        help="every model call takes this long (default 0: instant, the server saturated)",
    )
    parser.add_argument(
        "--compare",
        metavar="PYTHON",
        help="also run every configuration against the xclaw installed for this python "
        "(another checkout's venv), back to back, and print the ratios",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run every configuration N times (with --compare: base, this, base, this, ...) "
        "and add a row of each figure's median over the runs (label~)",
    )
    parser.add_argument(
        "--detail",
        action="store_true",
        help="with --llm-ms: also print the added latency by step type and second by second",
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="with --llm-ms: every session sends its message in the same instant",
    )
    parser.add_argument(
        "--api-client",
        action="store_true",
        help="instead: the Python API's remote client (xclaw.connect) side by side with this "
        "benchmark's own client against one gateway (steps/s, events/s, client CPU per step)",
    )
    parser.add_argument(
        "--protocols",
        nargs="+",
        choices=["ws", "agui", "a2a"],
        metavar="P",
        help="instead: the same tasks through each of these front doors (ws agui a2a) against "
        "one gateway, alternated: the server's CPU per step over the WebSocket's",
    )
    parser.add_argument(
        "--members",
        action="store_true",
        help="this checkout's sessions sign in as team members, one user each (docs/teams.md)",
    )
    parser.add_argument(
        "--budgets",
        action="store_true",
        help="this checkout twice, alternated: without budgets (base) and with caps no "
        "session reaches (this): the ratio row is what the budget check costs per step",
    )
    parser.add_argument(
        "--budget-caps",
        choices=["session+total", "session"],
        default="session+total",
        help="with --budgets: caps on the session and the deployment's day and month "
        "(default; their counters are kept), or on the session alone",
    )
    parser.add_argument(
        "--server-core",
        type=int,
        metavar="N",
        help="pin the server's process to CPU N and this client to the other CPUs (the "
        "per-core goal: a server with a core of its own)",
    )
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat must be 1 or more, got {args.repeat}")
    if args.server_core is not None:
        cpus = os.sched_getaffinity(0)
        others = cpus - {args.server_core}
        if args.server_core not in cpus or not others:
            parser.error(
                f"--server-core {args.server_core}: this machine's CPUs are {sorted(cpus)}"
            )
        os.sched_setaffinity(0, others)  # before any thread of the client starts
    if args.protocols:
        asyncio.run(protocols_bench(args))
        return
    asyncio.run(api_client_bench(args) if args.api_client else main_async(args))


if __name__ == "__main__":
    main()
