"""[tools/mcp] An MCP server's tool as an xclaw tool: `mcp__<server>__<tool>` (Claude Code's
naming), its input schema as the server gives it, its annotations as traits, its results as text."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from mcp.types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from mcp.types import Tool as McpToolSpec

from xclaw.llm.messages import ImageBlock
from xclaw.tools.base import Tool, ToolContext, ToolResult, cap_result_text, idempotency_key
from xclaw.tools.effects import (
    Compensation,
    CompensationUnavailable,
    Evidence,
    Outcome,
    fill_template,
    recorded_output,
)
from xclaw.tools.files import IMAGE_MAX_BYTES
from xclaw.tools.mcp.client import McpConnection, McpServerError
from xclaw.tools.mcp.names import tool_name
from xclaw.tools.traits import NO_OVERRIDE, ToolPolicy, ToolTraits

# What the providers accept as image blocks (as view_file shows).
MODEL_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_MAX_STRUCTURED_CHARS = 20_000


class McpTool(Tool):
    def __init__(
        self,
        connection: McpConnection,
        mcp_tool: McpToolSpec,
        *,
        policy: ToolPolicy = NO_OVERRIDE,
    ) -> None:
        self.connection = connection
        self.remote_name: str = mcp_tool.name
        self.name = tool_name(connection.name, mcp_tool.name)
        self.description = (mcp_tool.description or mcp_tool.title or mcp_tool.name).strip()
        schema = mcp_tool.input_schema if isinstance(mcp_tool.input_schema, dict) else {}
        self.input_schema: dict[str, Any] = dict(schema) or {"type": "object", "properties": {}}
        self.input_schema.setdefault("type", "object")
        hints = mcp_tool.annotations or ToolAnnotations()
        read_only = bool(hints.read_only_hint)
        # Destructive only when the server says so (a tool without annotations is asked as
        # "may change things", but not in yolo mode); an absent openWorldHint counts as open
        # world, as MCP's default.
        # An untrusted server's readOnlyHint cannot cancel its own destructiveHint either.
        trusted = connection.config.trusted
        destructive = bool(hints.destructive_hint)
        open_world = hints.open_world_hint
        self.traits = ToolTraits(
            source=f"MCP server {connection.name!r}",
            read_only=read_only,
            idempotent=bool(hints.idempotent_hint),
            destructive=not (read_only and trusted) and destructive,
            open_world=open_world is None or bool(open_world),
            trusted=trusted,
            policy=policy,
            compensable=policy.compensate is not None,
            settle_check=policy.settle is not None,
            idempotency_key=policy.idempotency_key is not None,
        )
        self.policy = policy
        # What the loop acts on (no snapshot before it, no side-effect turn): trusted only.
        self.read_only = self.traits.trusted_read_only
        self.retry_on_resume = self.traits.retry_on_resume
        self.effect = self.traits.effect
        self.outside_effects = self.traits.outside_effects

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        key = self.policy.idempotency_key
        if key is not None:  # the same for every attempt of this call: the server deduplicates
            args = {**args, key: idempotency_key(ctx.session_id, args)}
        return await self._call(self.remote_name, args)

    async def _call(self, remote: str, args: dict[str, Any]) -> ToolResult:
        try:
            result = await self.connection.call(remote, args)
        except McpServerError as e:
            return ToolResult(str(e), is_error=True, data={"server": self.connection.name})
        except Exception as e:  # noqa: BLE001 - a protocol error is the model's to read
            return ToolResult(
                f"MCP server {self.connection.name!r}: {type(e).__name__}: {e}", is_error=True
            )
        return result_to_tool_result(result)

    # --- effects (tool_policies: compensate, settle; xclaw/tools/effects.py) -----------------
    async def find_outcome(self, args: dict[str, Any], ctx: ToolContext) -> Evidence | None:
        """The configured lookup, a tool of the same server, called with arguments built from
        the call's input: an error is unknown; its answer (or `done_field` of it) empty,
        false or null is not done, anything else done."""
        settle = self.policy.settle
        if settle is None:
            return None
        who = f"{settle.tool} on MCP server {self.connection.name!r}"
        try:
            lookup = fill_template(settle.args, args, None)
        except KeyError as e:
            return Evidence(Outcome.UNKNOWN, f"{who}: its argument names {e.args[0]}, absent")
        try:
            found = await asyncio.wait_for(
                self._call(settle.tool, lookup), self.policy.effect_timeout_s
            )
        except TimeoutError:
            return Evidence(
                Outcome.UNKNOWN, f"{who} did not answer within {self.policy.effect_timeout_s:g} s"
            )
        if found.is_error:
            return Evidence(Outcome.UNKNOWN, f"{who} failed: {found.content[:200]}")
        answer = recorded_output(found.content)
        if settle.done_field is not None:
            try:
                answer = fill_template(f"{{output.{settle.done_field}}}", None, answer)
            except KeyError:
                return Evidence(Outcome.UNKNOWN, f"{who} answered without {settle.done_field!r}")
        done = answer not in (None, False, "", [], {}, "null", "false", "0", 0)
        detail = f"{who} says {'done' if done else 'not done'}"
        if not done:
            return Evidence(Outcome.NOT_DONE, detail)
        result = f"[settled] {self.name} was interrupted by a crash; {detail}: it ran"
        return Evidence(Outcome.DONE, detail, result)

    def compensation(self, args: dict[str, Any], output: Any) -> Compensation | None:
        comp = self.policy.compensate
        if comp is None:
            return None
        try:
            built = fill_template(comp.args, args, output)
        except KeyError as e:
            raise CompensationUnavailable(
                f"its compensation {comp.tool} needs {e.args[0]}, which the recorded call "
                "does not hold"
            ) from None
        return Compensation(comp.tool, built, comp.idempotent)

    async def compensate(
        self, comp: Compensation, args: dict[str, Any], output: Any, ctx: ToolContext
    ) -> ToolResult:
        """The compensating tool of the same server, with the arguments `comp` holds."""
        try:
            return await asyncio.wait_for(
                self._call(comp.action, dict(comp.args)), self.policy.effect_timeout_s
            )
        except TimeoutError:
            return ToolResult(
                f"{comp.action} on MCP server {self.connection.name!r} did not finish within "
                f"{self.policy.effect_timeout_s:g} s",
                is_error=True,
            )


def result_to_tool_result(result: CallToolResult) -> ToolResult:
    """Text as is; images the providers take (PNG, JPEG, GIF, WebP up to 5 MB) go to the model
    as image blocks (the recorder keeps their bytes in the blob store, their hashes in the
    step); other media are described; resources and links by URI; structured content as JSON
    when no text says the same; isError kept."""
    parts: list[str] = []
    data: dict[str, Any] = {}
    images: list[ImageBlock] = []
    for block in result.content or []:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, (ImageContent, AudioContent)):
            parts.append(_media(block.type, block.mime_type, block.data, images))
        elif isinstance(block, EmbeddedResource):
            res = block.resource
            if isinstance(res, TextResourceContents):
                parts.append(f"[resource {res.uri}]\n{res.text}")
            else:
                size = len(_decode(res.blob or ""))
                parts.append(f"[resource {res.uri}: {res.mime_type or 'binary'}, {size} bytes]")
        elif isinstance(block, ResourceLink):
            parts.append(
                f"[resource link {block.uri}" + (f": {block.name}]" if block.name else "]")
            )
        else:  # a content type newer than this xclaw
            parts.append(f"[{block.type or 'unknown'} content]")
    structured = result.structured_content
    if structured is not None:
        data["structured"] = structured
        if not parts:
            text = json.dumps(structured, ensure_ascii=False, default=str)
            parts.append(text[:_MAX_STRUCTURED_CHARS])
    content = cap_result_text("\n".join(parts)) if parts else "(no output)"
    return ToolResult(
        content,
        is_error=bool(result.is_error),
        data=data,
        images=tuple(images),
    )


def _decode(b64: str) -> bytes:
    try:
        return base64.b64decode(b64 or "", validate=False)
    except (ValueError, TypeError):
        return b""


def _media(kind: str, mime: str | None, b64: str, images: list[ImageBlock]) -> str:
    raw = _decode(b64)
    label = f"[{kind} {mime or 'unknown type'}, {len(raw)} bytes"
    if kind == "image" and mime in MODEL_IMAGE_TYPES and 0 < len(raw) <= IMAGE_MAX_BYTES:
        images.append(ImageBlock(media_type=mime, data=raw))
        return label + ", shown as an image]"
    return label + ", not shown]"
