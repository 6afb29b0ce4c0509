"""Every field a model, a tool or a user can fill, filled with a credential, and every route
out of xclaw searched for it.

The secrets: two credentials the server is told of, and two tokens of the form xclaw issues
that it is not told of (a member's, another server's). A scripted (prompt-injected) model
puts them in the session's first message (its title), in tool names (one unknown tool is
named after a secret, so "unknown tool X" echoes it), tool inputs and outputs, errors,
thinking, a sub-agent's task and tool names, a file name and a file's contents in the
workspace, a provider error, and streams them split across deltas at every position
(`chunks`, docs/scripted-model.md). The owner then names a session after them (`/title`,
`/fork`, the API). Then: no database row (and no byte of the SQLite file or its
WAL), no frame two real WebSocket clients received (each frame, and the concatenation of the
deltas), no API answer, no export, no OTLP span, no log line and no CLI output (listings,
export, workspace diff, fsck, replay) holds it, raw or JSON-escaped.

(The workspace file itself is the user's and snapshots keep it verbatim: no step here snapshots
the workspace after it is written, so the database bytes are searched whole;
tests/cli/test_commands_workspace.py covers a snapshot holding one.)
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import Client, Server, write_script, xclaw_cmd
from xclaw.people.teams import new_token
from xclaw.security.credentials import SERVER_TOKEN_PREFIX, issue_token

pytestmark = pytest.mark.slow

SECRET = "corpus-key-5e1b7a93c40d"  # CORPUS_API_KEY: a credential by its name
ODD = 'odd"pass\\word-2718'  # ODD_SECRET: JSON and repr escape its `"` and `\`
# Tokens xclaw issues that this server was never told of, found by their form: a member's (the
# server keeps only its hash) and another server's.
MEMBER = new_token()
FOREIGN = issue_token(SERVER_TOKEN_PREFIX)
SECRETS = (SECRET, ODD, MEMBER, FOREIGN)


def forms(secret: str) -> set[str]:
    """The secret as written, and as JSON or repr() would write it inside a string."""
    return {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
    }


def every_split(secret: str) -> list[str]:
    """Deltas splitting `secret` at every position, then one character per delta."""
    chunks: list[str] = []
    for i in range(1, len(secret)):
        chunks += [f" [{i}] {secret[:i]}", f"{secret[i:]}"]
    chunks += [" each:", *secret, " end."]
    return chunks


def turns() -> list[dict[str, Any]]:
    return [
        {
            "thinking": f"I remember the key {SECRET} and {ODD} and {MEMBER}",
            "chunks": ["Keys: ", *every_split(SECRET), *every_split(ODD), *every_split(MEMBER)],
            "tool_calls": [
                {"name": SECRET, "input": {"why": SECRET}},  # unknown tool named after it
                {"name": f"tool_{SECRET}", "input": {}},
                {
                    "name": "shell",
                    "input": {
                        "command": f"echo out {SECRET} {MEMBER}; echo err {SECRET} >&2; exit 3"
                    },
                },
                {
                    "name": "write_file",
                    "input": {"path": f"{SECRET}.txt", "content": f"k={SECRET}\n"},
                },
                {"name": "read_file", "input": {"path": f"missing-{SECRET}"}},
                {
                    "name": "read_file",
                    "input": {"_error": f"bad {SECRET}", "_raw_arguments": f"{{{ODD}"},
                },
                {"name": "spawn_agent", "input": {"task": f"sub task {SECRET} {FOREIGN}"}},
            ],
        },
        {
            "chunks": [
                *("Done: ", SECRET[:3], SECRET[3:9], SECRET[9:], " and ", ODD[:4], ODD[4:]),
                *(" and ", FOREIGN[:6], FOREIGN[6:30], FOREIGN[30:], "."),
            ]
        },
        {"fail": f"provider exploded with {SECRET} {ODD} {MEMBER}"},
    ]


SUBAGENT = {
    "turns": [
        {
            "text": f"sub {SECRET} {FOREIGN}",
            "tool_calls": [{"name": f"sub_{SECRET}", "input": {"k": SECRET}}],
        },
        {"text": f"sub done {SECRET}"},
    ]
}


class _Receiver(BaseHTTPRequestHandler):
    """A stand-in OTLP/HTTP collector: keeps every request body it is sent."""

    bodies: list[bytes]

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.bodies.append(self.rfile.read(length))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def otlp() -> Iterator[tuple[str, list[bytes]]]:
    bodies: list[bytes] = []
    handler = type("Receiver", (_Receiver,), {"bodies": bodies})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", bodies
    httpd.shutdown()
    httpd.server_close()


def strings(value: Any) -> Iterator[str]:
    """Every string inside JSON-like data, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def leaks_in_data(where: str, value: Any) -> list[str]:
    return [f"{where}: {s[:120]!r}" for s in strings(value) for sec in SECRETS if sec in s]


def leaks_in_text(where: str, text: str | bytes) -> list[str]:
    found = []
    for sec in SECRETS:
        for form in forms(sec):
            needle: str | bytes = form.encode() if isinstance(text, bytes) else form
            if needle in text:  # type: ignore[operator]
                found.append(f"{where}: {form!r}")
    return found


def cli_leaks(env: dict[str, str], root: Path, sid: str) -> list[str]:
    """What the command line prints about the session (listings, export, workspace diff,
    fsck, replay), searched."""
    leaks: list[str] = []
    for args in (
        ["sessions"],
        ["sessions", "--json"],
        ["steps", sid, "-n", "200"],
        ["steps", sid, "--json"],
        ["trace", sid],
        ["trace", sid, "--json"],
        ["export", sid],
        ["export", "--all", "--json"],
        ["snapshots", sid],
        ["diff", sid, "s0001", "now"],
        ["diff", sid, "s0001", "now", "--json"],
        ["fsck", "--json"],
        ["fsck"],
        ["replay", sid, "--json"],
    ):
        done = subprocess.run(
            [*xclaw_cmd(), *args], env=env, cwd=root, capture_output=True, text=True, timeout=60
        )
        assert done.returncode in (0, 1), (args, done.stdout, done.stderr)
        leaks += leaks_in_text(f"xclaw {' '.join(args[:2])}", done.stdout + done.stderr)
        if args[:1] == ["diff"]:  # the file the model named after the secret is listed
            assert ".txt" in done.stdout, done.stdout
    return leaks


async def test_no_secret_in_any_field_reaches_any_route(tmp_path: Path, otlp) -> None:  # type: ignore[no-untyped-def]
    endpoint, spans = otlp
    root = tmp_path / "corpus"
    root.mkdir()
    script = write_script(root / "script.json", turns())
    data = json.loads(script.read_text())
    data["subagent"] = SUBAGENT
    script.write_text(json.dumps(data))
    server = Server(root=root, script=script, approval="ask")
    base_env = server.env

    def env() -> dict[str, str]:
        e = base_env()
        e.update(
            CORPUS_API_KEY=SECRET,
            ODD_SECRET=ODD,
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_EXPORTER_OTLP_COMPRESSION="none",
            OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
        )
        return e

    server.env = env  # type: ignore[method-assign]
    server.start()
    leaks: list[str] = []
    try:
        c = await Client.open(server)
        await c.attach()
        reply = await c.turn(
            f"please use {SECRET} and {ODD} for this, {MEMBER} {FOREIGN} too",
            approve=True,
            timeout=90,
        )
        assert reply["type"] == "reply", reply
        sid = c.session_id
        assert sid is not None
        # The last answer's deltas join to its reply, the secrets masked the same way.
        deltas = "".join(f["content"] for f in c.of_type("delta"))
        failed = await c.turn(f"again {SECRET}", approve=True, timeout=60)
        assert failed["type"] == "error", failed
        for command, answer in (
            (f"/title name {SECRET} {MEMBER}", "renamed"),
            ("/steps 100", "steps"),
            ("/sessions", "notice"),
            (f"/fork s0002 f {SECRET}", "forked"),
        ):
            await c.send({"type": "message", "sessionId": sid, "content": command})
            await c.until_type(answer, timeout=20)
        later = await Client.open(server)  # joins afterwards: session, history
        await later.attach(sid)
        named = await Client.open(server)  # `/new TITLE` writes its session at once
        await named.attach()
        await named.send(
            {"type": "message", "sessionId": named.session_id, "content": f"/new n {SECRET}"}
        )
        await named.until(lambda f: f.get("type") == "session" and f.get("title"), 20)

        async with httpx.AsyncClient(
            base_url=f"{server.http}/api", headers={"Authorization": f"Bearer {server.token}"}
        ) as h:
            patched = await h.patch(f"/sessions/{sid}", json={"title": f"api {SECRET} {FOREIGN}"})
            forked = await h.post(f"/sessions/{sid}/fork", json={"stepId": "s0002", "title": ODD})
            answers = [patched, forked]
            for path in (
                "/sessions",
                f"/sessions/{sid}",
                f"/sessions/{sid}/steps?n=0",
                f"/sessions/{sid}/tree",
                f"/sessions/{sid}/history",
                f"/sessions/{sid}/export",
            ):
                answers.append(await h.get(path))
        for r in answers:
            assert r.status_code < 300, (r.request.url, r.text)
            leaks += leaks_in_text(f"api {r.request.method} {r.request.url.path}", r.text)
        try:  # a title set through the API is told to the attached clients too
            await c.until(lambda f: f.get("type") == "renamed" and "api" in f["title"], 10)
        except AssertionError:
            leaks.append("no `renamed` frame after PATCH /api/sessions/ID")

        for client, name in ((c, "client"), (later, "late client"), (named, "/new client")):
            for f in client.seen:
                leaks += leaks_in_data(f"{name} frame {f.get('type')}", f)
            joined = "".join(f["content"] for f in client.of_type("delta"))
            leaks += leaks_in_data(f"{name} deltas joined", joined)
    finally:
        server.kill(15)  # a graceful stop: the span exporter flushes

    db = server.home / "xclaw.db"
    raw = b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())
    leaks += leaks_in_text("database file", raw)
    with sqlite3.connect(db) as conn:
        for table in ("sessions", "traces"):
            for row in conn.execute(f"SELECT * FROM {table}").fetchall():
                leaks += leaks_in_data(f"{table} row", [str(v) for v in row])
    leaks += leaks_in_text("server log", server.logs())
    assert spans, "no span reached the OTLP receiver"
    leaks += leaks_in_text("otlp spans", b"".join(spans))

    leaks += cli_leaks({**env(), "XCLAW_DB": str(db)}, root, sid)
    assert not leaks, "\n".join(leaks)
    assert "[REDACTED]" in deltas and deltas.endswith(reply["content"]), (deltas, reply)
