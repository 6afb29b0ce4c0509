"""An MCP server's tool as an xclaw tool: `mcp__<server>__<tool>` (Claude Code's naming), its
input schema as the server gives it, its annotations as traits, its results as text."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from xclaw.tools.base import ToolContext, ToolResult
from xclaw.tools.mcp.client import McpConnection, McpServerError
from xclaw.tools.traits import NO_OVERRIDE, ToolPolicy, ToolTraits

log = logging.getLogger("xclaw.mcp")

PREFIX = "mcp__"
# Stores bytes and returns their sha256 (the store's blob table); None: images stay inline text.
BlobSink = Callable[[bytes], Awaitable[str]]
_MAX_STRUCTURED_CHARS = 20_000


def tool_name(server: str, tool: str) -> str:
    return f"{PREFIX}{server}__{tool}"


class McpTool:
    def __init__(
        self,
        connection: McpConnection,
        mcp_tool: Any,
        *,
        policy: ToolPolicy = NO_OVERRIDE,
        blobs: Callable[[], BlobSink | None] = lambda: None,
    ) -> None:
        self.connection = connection
        self.remote_name: str = mcp_tool.name
        self.name = tool_name(connection.name, mcp_tool.name)
        self.description = (mcp_tool.description or mcp_tool.title or mcp_tool.name).strip()
        schema = mcp_tool.input_schema if isinstance(mcp_tool.input_schema, dict) else {}
        self.input_schema: dict[str, Any] = dict(schema) or {"type": "object", "properties": {}}
        self.input_schema.setdefault("type", "object")
        hints = mcp_tool.annotations
        read_only = bool(getattr(hints, "read_only_hint", None) or False)
        # Destructive only when the server says so (a tool without annotations is asked as
        # "may change things", but not in yolo mode); an absent openWorldHint counts as open
        # world, as MCP's default.
        destructive = bool(getattr(hints, "destructive_hint", None) or False)
        open_world = getattr(hints, "open_world_hint", None)
        self.traits = ToolTraits(
            source=f"MCP server {connection.name!r}",
            read_only=read_only,
            idempotent=bool(getattr(hints, "idempotent_hint", None) or False),
            destructive=(not read_only) and destructive,
            open_world=open_world is None or bool(open_world),
            trusted=connection.config.trusted,
            policy=policy,
        )
        self.read_only = read_only
        self.retry_on_resume = self.traits.retry_on_resume
        self.outside_effects = self.traits.outside_effects
        self._blobs = blobs

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            result = await self.connection.call(self.remote_name, args)
        except McpServerError as e:
            return ToolResult(str(e), is_error=True, data={"server": self.connection.name})
        except Exception as e:  # noqa: BLE001 - a protocol error is the model's to read
            return ToolResult(
                f"MCP server {self.connection.name!r}: {type(e).__name__}: {e}", is_error=True
            )
        return await result_to_tool_result(result, self._blobs())


async def result_to_tool_result(result: Any, blobs: BlobSink | None) -> ToolResult:
    """Text as is; images and audio to the blob store (a reference in the text); resources
    and links by URI; structured content as JSON when no text says the same; isError kept."""
    parts: list[str] = []
    data: dict[str, Any] = {}
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(await _media(kind, block.mime_type, block.data, blobs, data))
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            if text is not None:
                parts.append(f"[resource {res.uri}]\n{text}")
            else:
                size = len(base64.b64decode(getattr(res, "blob", "") or "", validate=False))
                parts.append(f"[resource {res.uri}: {res.mime_type or 'binary'}, {size} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}" + (f": {block.name}]" if block.name else "]"))
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        data["structured"] = structured
        text = json.dumps(structured, ensure_ascii=False, default=str)
        if not parts:
            parts.append(text[:_MAX_STRUCTURED_CHARS])
    content = "\n".join(parts) if parts else "(no output)"
    return ToolResult(content, is_error=bool(getattr(result, "is_error", False)), data=data)


async def _media(
    kind: str, mime: str | None, b64: str, blobs: BlobSink | None, data: dict[str, Any]
) -> str:
    try:
        raw = base64.b64decode(b64 or "", validate=False)
    except (ValueError, TypeError):
        return f"[{kind} {mime or ''}: undecodable data]"
    digest = hashlib.sha256(raw).hexdigest()
    if blobs is not None:
        try:
            digest = await blobs(raw)
        except Exception:
            log.warning("could not store an MCP %s in the blob store", kind, exc_info=True)
    data.setdefault("blobs", []).append({"kind": kind, "mime": mime, "sha256": digest, "size": len(raw)})
    return f"[{kind} {mime or 'unknown type'}, {len(raw)} bytes, blob sha256:{digest}]"
