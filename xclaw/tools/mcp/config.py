"""[tools/mcp] `mcp_servers:` in xclaw.yaml: one entry per server, stdio or streamable HTTP.

    mcp_servers:
      time: {command: mcp-server-time}
      git:  {command: mcp-server-git, args: [--repository, .], trusted: true}
      web:  {url: "https://mcp.example.com/mcp", headers: {Authorization: "Bearer ${TOKEN}"}}

`${VAR}` in any string value is read from the environment (or `.env`), which the settings
reader passes as the validation context (`{"env": ...}`); the values substituted are secrets
as far as the redactor is concerned (they never reach the record or a client).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from xclaw.config.section import Flag, Number, Section

NAME = re.compile(r"^[A-Za-z0-9_-]+$")
# ${VAR}, or ${VAR:-default} (Claude Code's form); any other "${" is refused, never kept as text.
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# Where the values substituted for ${VAR} are gathered while one server entry is read.
_USED = "mcp_substituted"


def _expand(value: Any, info: ValidationInfo) -> Any:
    """A string value with its ${VAR}s replaced (numbers are taken as their text)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return value  # refused as "must be a string" by the type
    context = info.context if isinstance(info.context, dict) else {}
    env: Mapping[str, str] = context.get("env", {})
    used: list[str] = context.setdefault(_USED, [])

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name not in env:
            if default is not None:
                return default
            raise ValueError(f"uses ${{{name}}}, which is not set")
        used.append(env[name])
        return env[name]

    expanded = _VAR.sub(sub, value)
    if "${" in _VAR.sub("", value):
        raise ValueError(
            f"holds {value!r}, which is not a variable reference xclaw understands "
            "(${VAR} or ${VAR:-default})"
        )
    return expanded


# A string of an entry: ${VAR}s expanded.
Expanded = Annotated[str, BeforeValidator(_expand)]


def _server_name(name: str) -> str:
    if not NAME.match(name) or "__" in name:
        raise ValueError(
            f"MCP server name {name!r}: use letters, digits, - and single _ "
            "(tools are named mcp__<server>__<tool>)"
        )
    return name


ServerName = Annotated[str, AfterValidator(_server_name)]


class McpServerConfig(Section):
    """One server: `command` (stdio) or `url` (streamable HTTP), not both."""

    command: Expanded | None = None
    args: tuple[Expanded, ...] = ()
    env: dict[str, Expanded] = Field(default_factory=dict)
    cwd: Expanded | None = None
    url: Expanded | None = None
    headers: dict[str, Expanded] = Field(default_factory=dict)
    # Its tool annotations may loosen approval (read-only tools run without asking).
    trusted: Flag = False
    timeout_s: Annotated[Number, Field(gt=0)] = 120.0
    startup_timeout_s: Annotated[Number, Field(gt=0)] = 60.0
    # Values that came from ${VAR}: the redactor scrubs them.
    _secrets: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _gather_secrets(
        cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> McpServerConfig:
        context = info.context if isinstance(info.context, dict) else None
        if context is not None:
            context[_USED] = []
        server: McpServerConfig = handler(data)
        if context is not None:
            server._secrets = tuple(v for v in context.pop(_USED, []) if len(v) >= 6)
        return server

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "needs either `command` (a stdio server) or `url` (a streamable HTTP server)"
            )
        return self

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._secrets

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def describe(self) -> str:
        if self.url:
            return self.url
        return " ".join([self.command or "", *self.args]).strip()


class McpSettings(Section):
    """The top-level key: MCP servers by name (their tools are mcp__<name>__<tool>)."""

    mcp_servers: dict[ServerName, McpServerConfig] = Field(default_factory=dict)


_SERVERS = TypeAdapter(dict[ServerName, McpServerConfig])


def parse_servers(raw: Any, env: Mapping[str, str]) -> dict[str, McpServerConfig]:
    """`mcp_servers:` read on its own, ${VAR}s from `env` (tests build hubs with it)."""
    return _SERVERS.validate_python(raw or {}, context={"env": env})
