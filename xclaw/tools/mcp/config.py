"""`mcp_servers:` in xclaw.yaml: one entry per server, stdio or streamable HTTP.

    mcp_servers:
      time: {command: mcp-server-time}
      git:  {command: mcp-server-git, args: [--repository, .], trusted: true}
      web:  {url: "https://mcp.example.com/mcp", headers: {Authorization: "Bearer ${TOKEN}"}}

`${VAR}` in any string value is read from the environment (or `.env`); the values substituted
are secrets as far as the redactor is concerned (they never reach the record or a client).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from xclaw.config import nearest
from xclaw.errors import ConfigError

NAME = re.compile(r"^[A-Za-z0-9_-]+$")
# ${VAR}, or ${VAR:-default} (Claude Code's form); any other "${" is refused, never kept as text.
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
SERVER_KEYS = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "trusted",
    "timeout_s",
    "startup_timeout_s",
)
DEFAULT_CALL_TIMEOUT_S = 120.0
DEFAULT_STARTUP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # Its tool annotations may loosen approval (read-only tools run without asking).
    trusted: bool = False
    timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    # Values that came from ${VAR}: the redactor scrubs them.
    secrets: tuple[str, ...] = ()

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def describe(self) -> str:
        if self.url:
            return self.url
        return " ".join([self.command or "", *self.args]).strip()


def _expand(value: Any, where: str, env: Mapping[str, str], used: list[str]) -> str:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ConfigError(f"xclaw.yaml: {where} must be a string, got {value!r}")
    text = str(value)

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name not in env:
            if default is not None:
                return default
            raise ConfigError(f"xclaw.yaml: {where} uses ${{{name}}}, which is not set")
        used.append(env[name])
        return env[name]

    expanded = _VAR.sub(sub, text)
    if "${" in _VAR.sub("", text):
        raise ConfigError(
            f"xclaw.yaml: {where}: {text!r} is not a variable reference xclaw understands "
            "(${VAR} or ${VAR:-default})"
        )
    return expanded


def parse_servers(raw: Any, env: Mapping[str, str]) -> list[McpServerConfig]:
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise ConfigError("xclaw.yaml: `mcp_servers` must map a server name to its settings")
    out = []
    for name, entry in raw.items():
        name = str(name)
        where = f"mcp_servers.{name}"
        if not NAME.match(name) or "__" in name:
            raise ConfigError(
                f"xclaw.yaml: MCP server name {name!r}: use letters, digits, - and single _ "
                "(tools are named mcp__<server>__<tool>)"
            )
        if not isinstance(entry, Mapping):
            raise ConfigError(
                f"xclaw.yaml: {where} must be a mapping ({{command: ...}} or {{url: ...}})"
            )
        for key in entry:
            if key not in SERVER_KEYS:
                raise ConfigError(
                    f"xclaw.yaml: unknown key {where}.{key}{nearest(str(key), list(SERVER_KEYS))} "
                    f"(known: {', '.join(SERVER_KEYS)})"
                )
        has_cmd, has_url = "command" in entry, "url" in entry
        if has_cmd == has_url:
            raise ConfigError(
                f"xclaw.yaml: {where} needs either `command` (a stdio server) or `url` "
                "(a streamable HTTP server)"
            )
        used: list[str] = []
        args = entry.get("args") or []
        if not isinstance(args, list):
            raise ConfigError(f"xclaw.yaml: {where}.args must be a list")
        for key in ("env", "headers"):
            if not isinstance(entry.get(key) or {}, Mapping):
                raise ConfigError(f"xclaw.yaml: {where}.{key} must be a mapping")
        trusted = entry.get("trusted", False)
        if not isinstance(trusted, bool):
            raise ConfigError(f"xclaw.yaml: {where}.trusted must be true or false")
        timeouts = {}
        for key, default in (
            ("timeout_s", DEFAULT_CALL_TIMEOUT_S),
            ("startup_timeout_s", DEFAULT_STARTUP_TIMEOUT_S),
        ):
            try:
                timeouts[key] = float(entry.get(key, default))
            except (TypeError, ValueError):
                raise ConfigError(
                    f"xclaw.yaml: {where}.{key} must be a number of seconds"
                ) from None
            if timeouts[key] <= 0:
                raise ConfigError(f"xclaw.yaml: {where}.{key} must be positive")
        out.append(
            McpServerConfig(
                name=name,
                command=_expand(entry["command"], f"{where}.command", env, used)
                if has_cmd
                else None,
                args=tuple(_expand(a, f"{where}.args", env, used) for a in args),
                env={
                    str(k): _expand(v, f"{where}.env.{k}", env, used)
                    for k, v in (entry.get("env") or {}).items()
                },
                cwd=_expand(entry["cwd"], f"{where}.cwd", env, used) if entry.get("cwd") else None,
                url=_expand(entry["url"], f"{where}.url", env, used) if has_url else None,
                headers={
                    str(k): _expand(v, f"{where}.headers.{k}", env, used)
                    for k, v in (entry.get("headers") or {}).items()
                },
                trusted=trusted,
                timeout_s=timeouts["timeout_s"],
                startup_timeout_s=timeouts["startup_timeout_s"],
                secrets=tuple(v for v in used if len(v) >= 6),
            )
        )
    return out
