"""[tools/mcp] How an MCP server's tool is named to the model: `mcp__<server>__<tool>` (Claude
Code's naming). Apart from the tool adapter, so the configuration checks need not import the MCP
SDK."""

from __future__ import annotations

import re

PREFIX = "mcp__"
MAX_NAME = 64  # what Anthropic and OpenAI accept as a tool name
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>`, with characters the providers refuse in tool names (dots,
    spaces, ...) replaced by `_` and cut to 64 characters; calls use the server's own name."""
    return _NOT_IN_NAMES.sub("_", f"{PREFIX}{server}__{tool}")[:MAX_NAME]
