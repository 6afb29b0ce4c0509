"""File contents the object store lost (docs/deploy.md): a pack deleted from the bucket behind
xclaw's back — a lifecycle rule, a manual delete, blob_store pointed at another prefix. The
record still names them; every use of them says so in words, under its own code
(`blob_store_lost`, docs/protocol.md), with what to do — not `internal_error`, not a bare 500.

Real components: one `xclaw serve` on SQLite with `blob_store: s3://…` on a real SeaweedFS
(tests/seaweed.py)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

import xclaw
import xclaw.errors
from tests.gateway.harness import Client, Server, write_script
from tests.seaweed import BUCKET, Seaweed, running_seaweed

pytestmark = pytest.mark.slow


@dataclass
class StoreServer(Server):
    """`xclaw serve` whose file contents live in the object store at `blob_store`."""

    blob_store: str = ""
    s3_env: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        return {**super().env(), "XCLAW_BLOB_STORE": self.blob_store, **self.s3_env}


@pytest.fixture
def weed(tmp_path: Path) -> Iterator[Seaweed]:
    with running_seaweed(tmp_path) as w:
        yield w


@pytest.fixture
def server(tmp_path: Path, weed: Seaweed) -> Iterator[StoreServer]:
    script = write_script(
        tmp_path / "script.json",
        [
            {
                "text": "",
                "tool_calls": [
                    {"name": "write_file", "input": {"path": "a.txt", "content": "kept?"}}
                ],
            },
            {"text": "done"},
        ],
    )
    s = StoreServer(
        root=tmp_path / "srv",
        script=script,
        approval="yolo",
        blob_store=weed.url(),
        s3_env=weed.env,
    )
    try:
        yield s.start()
    finally:
        s.kill()


def delete_every_pack(weed: Seaweed, url: str) -> int:
    prefix = url.split("/", 3)[3]
    s3 = weed.client()
    keys = [
        item["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        for item in page.get("Contents", [])
    ]
    for key in keys:
        s3.delete_object(Bucket=BUCKET, Key=key)
    return len(keys)


async def test_a_pack_gone_from_the_bucket_is_said_as_such_with_its_own_code(
    server: StoreServer, weed: Seaweed
) -> None:
    c = await Client.open(server)
    await c.attach(None)
    sid = c.session_id
    assert (await c.turn("write a.txt"))["content"] == "done"
    assert (server.workspace(sid) / "a.txt").read_text() == "kept?"
    assert delete_every_pack(weed, server.blob_store) > 0

    # The HTTP API: a fork needs the files of s0003 from the bucket.
    async with httpx.AsyncClient(timeout=60) as http:
        r = await http.post(
            f"{server.http}/api/sessions/{sid}/fork",
            json={"stepId": "s0003"},
            headers={"Authorization": f"Bearer {server.token}"},
        )
    assert r.status_code == 502, r.text
    body = r.json()
    assert body["code"] == "blob_store_lost", body
    text = body["error"]
    # Which store (its bucket reads [REDACTED] here: the test's access key has its name).
    prefix = server.blob_store.rsplit("/", 1)[1]
    assert "the object store s3://" in text and prefix in text and "no longer holds" in text
    assert "deleted outside xclaw" in text and "restore the objects" in text  # what to do
    assert "the database lacks" not in text

    # The WebSocket: the same code, the connection usable.
    await c.send({"type": "message", "sessionId": sid, "content": "/fork s0003"})
    err = await c.until_type("error", timeout=60)
    assert err["code"] == "blob_store_lost" and "no longer holds" in err["content"]
    await c.send({"type": "ping"})
    assert (await c.until_type("pong"))["type"] == "pong"

    # A run on a worker whose cache lacks the files (here: removed) fetches them first.
    shutil.rmtree(server.workspace(sid))
    err = await c.turn("and again")
    assert err["type"] == "error" and err["code"] == "blob_store_lost", err
    assert "no longer holds" in err["content"]
    await c.close()

    # The Python API through the gateway: the run ends with that error (it does not wait on).
    shutil.rmtree(server.workspace(sid), ignore_errors=True)
    async with xclaw.connect(server.http, token=server.token) as agent:
        session = await agent.session(sid)
        result = await asyncio.wait_for(session.send("once more", approve=True), 60)
        assert result.error is not None and result.error.code == "blob_store_lost"
        assert isinstance(xclaw.errors.from_code(result.error.code, ""), xclaw.BlobStoreLost)
