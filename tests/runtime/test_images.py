"""Images through the whole runtime and the real SDKs: view_file on a PNG sends an image block
(Anthropic `image`, OpenAI `image_url` data URL), the bytes live in the blob store and not in
the trace row, a later turn rebuilt from the record carries the image again, a rollback lets
the blob go, and wrong sizes and types get a clear error."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pytest

from tests.llm.fakes import FakeCall, Reply
from tests.runtime.test_real_sdks import provider  # noqa: F401 (fixture)
from xclaw.config.settings import Settings
from xclaw.errors import MissingBlobs
from xclaw.llm.registry import entry
from xclaw.runtime.runtime import Runtime
from xclaw.store import open_store
from xclaw.store.steps.model import StepType
from xclaw.tools.base import ToolContext
from xclaw.tools.files import IMAGE_MAX_BYTES, ReadFileTool


def png(width: int = 2, height: int = 2) -> bytes:
    """A valid RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(b"\0" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _images_in(body: dict) -> list[bytes]:
    """Every image the request carries, decoded, in either wire format."""
    found: list[bytes] = []

    def walk(x: object) -> None:
        if isinstance(x, dict):
            if x.get("type") == "image":
                found.append(base64.b64decode(x["source"]["data"]))
            elif x.get("type") == "image_url":
                found.append(base64.b64decode(x["image_url"]["url"].partition(";base64,")[2]))
            else:
                for v in x.values():
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(body["messages"])
    return found


async def test_image_round_trip_blob_store_and_rebuilt_history(tmp_path: Path, provider) -> None:  # noqa: F811
    kind, srv = provider
    picture = png(3, 2)
    srv.push(
        Reply(
            text="Looking.", tool_calls=[FakeCall.of("view_file", {"path": "pic.png"}, id="call_1")]
        ),
        Reply(text="A red picture."),
        Reply(text="Still red."),
    )
    # The picture goes into the session's workspace before the first message.
    ws_root = tmp_path / "ws"
    settings = Settings(
        home=tmp_path,
        database=str(tmp_path / "x.db"),
        workspace_root=ws_root,
        approval={"mode": "yolo"},
        providers=(
            entry(f"{kind}:test-model", {"api_key": "sk-test-123456", "base_url": srv.url}),
        ),
        llm_retries=0,
    )
    runtime = Runtime(open_store(settings.database), settings)
    session, _ = await runtime.open(None)
    sid = session.session_id
    (ws_root / sid).mkdir(parents=True, exist_ok=True)
    (ws_root / sid / "pic.png").write_bytes(picture)
    frames: list[dict] = []
    runtime.subscribe(sid, frames.append)
    await runtime.send(sid, "what is in pic.png?")
    await runtime.wait_idle(sid)
    assert [f["content"] for f in frames if f["type"] == "reply"] == ["A red picture."]
    assert not srv.rejections, srv.rejections
    assert _images_in(srv.requests[1]) == [picture]

    steps = runtime.store.record.steps(sid)
    (tool,) = [s for s in steps if s.step_type is StepType.TOOL_CALL]
    (ref,) = tool.output_data["images"]
    assert ref["media_type"] == "image/png" and ref["size"] == len(picture)
    assert base64.b64encode(picture).decode() not in json.dumps(tool.output_data)
    assert runtime.store.snapshots.get_blobs([ref["hash"]]) == {ref["hash"]: picture}
    await runtime.shutdown()
    runtime.store.close()

    # A new process: the next turn's history is rebuilt from the record, image included.
    runtime = Runtime(open_store(settings.database), settings)
    await runtime.open(sid)
    await runtime.send(sid, "and now?")
    await runtime.wait_idle(sid)
    assert not srv.rejections, srv.rejections
    assert _images_in(srv.requests[2]) == [picture]

    # Rollback to before the tool call: the step goes, and its blob with it.
    runtime.store.record.rollback(sid, tool.seq)
    runtime.store.snapshots.gc_blobs()
    with pytest.raises(MissingBlobs):
        runtime.store.snapshots.get_blobs([ref["hash"]])
    await runtime.shutdown()
    runtime.store.close()


async def test_image_limits_and_types_give_clear_errors(tmp_path: Path) -> None:
    tool = ReadFileTool("view_file", images=True)
    ctx = ToolContext(workspace=tmp_path, session_id="s")
    (tmp_path / "big.png").write_bytes(png() + b"\0" * IMAGE_MAX_BYTES)
    (tmp_path / "pic.bmp").write_bytes(b"BM" + b"\0" * 64)
    (tmp_path / "ok.gif").write_bytes(b"GIF89a" + b"\x01\x00\x01\x00" + b"\0" * 20)
    big = await tool.run({"path": "big.png"}, ctx)
    assert big.is_error and "view_file shows images up to 5.0 MB" in big.content and not big.images
    bmp = await tool.run({"path": "pic.bmp"}, ctx)
    assert bmp.is_error and "PNG, JPEG, GIF and WebP images only" in bmp.content
    gif = await tool.run({"path": "ok.gif"}, ctx)
    assert not gif.is_error and gif.images[0].media_type == "image/gif"
    # read_file stays text-only and says where to look.
    plain = await ReadFileTool("read_file").run({"path": "ok.gif"}, ctx)
    assert plain.is_error and "use view_file to see it" in plain.content
