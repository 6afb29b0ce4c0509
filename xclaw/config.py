"""One settings object, read from the environment, `.env` and an optional `xclaw.yaml`.

Precedence (highest first): explicit arguments (command-line flags) > environment variables >
`.env` in the working directory > `xclaw.yaml` > defaults. Nothing is read at import time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from dotenv import dotenv_values

from xclaw.credentials import known_secrets, url_passwords
from xclaw.errors import ConfigError

DEFAULT_PORT = 3000
DEFAULT_MAX_ITERATIONS = 10

# Commands the shell tool may run without asking (first word), unless approval mode says more.
DEFAULT_SAFE_COMMANDS = (
    "ls", "cat", "head", "tail", "wc", "pwd", "echo", "grep", "find", "sort", "uniq", "date",
    "whoami", "stat", "file", "diff", "du", "df", "tree", "true", "sleep",
)
# Refused outright, never even asked.
DEFAULT_DENIED_PATTERNS = (
    r"rm\s+-[a-zA-Z]*r[a-zA-Z]*f?\s+/(\s|$)",
    r"mkfs",
    r":\(\)\s*\{",
    r"dd\s+.*of=/dev/",
    r"shutdown|reboot|halt\b",
)


@dataclass(frozen=True)
class ProviderConfig:
    """One link of the provider chain: `anthropic:<model>`, `openai:<model>`, `script:<path>`."""

    spec: str
    api_key: str | None = None
    base_url: str | None = None

    @property
    def kind(self) -> str:
        return self.spec.partition(":")[0]

    @property
    def model(self) -> str:
        return self.spec.partition(":")[2]


@dataclass(frozen=True)
class Settings:
    home: Path
    db: str  # SQLite path or postgresql:// URL
    workspace_root: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None
    providers: tuple[ProviderConfig, ...] = ()
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    max_tokens: int = 4096
    temperature: float | None = None
    context_window_tokens: int = 150_000
    # ask | auto-edits | yolo  (see xclaw.tools.approval)
    approval_mode: str = "ask"
    approval_timeout_s: float | None = None
    safe_commands: tuple[str, ...] = DEFAULT_SAFE_COMMANDS
    denied_patterns: tuple[str, ...] = DEFAULT_DENIED_PATTERNS
    shell_timeout_s: float = 120.0
    tool_output_cap: int = 30_000
    # Let parallel sub-agents' side-effecting tools overlap (snapshots then inexact).
    parallel_side_effects: bool = False
    allowed_origins: tuple[str, ...] = ()
    # Names of environment variables whose values must never reach the record (besides keys).
    secret_env: tuple[str, ...] = ()
    # Every credential value found when the settings were read (environment, .env, database
    # URL): see xclaw/credentials.py. The process may drop them from its environment after.
    known_secrets: tuple[str, ...] = ()
    llm_retries: int = 3
    llm_timeout_s: float = 120.0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def secret_values(self) -> list[str]:
        """Values that the redactor scrubs from everything written or sent: provider keys
        (configured in xclaw.yaml too), the token, and every credential found at load time
        (besides secret_env values set in the environment since)."""
        values = [p.api_key for p in self.providers if p.api_key]
        if self.token:
            values.append(self.token)
        values += self.known_secrets
        values += url_passwords(str(self.db))  # --db may override what the env said
        for name in self.secret_env:
            v = os.environ.get(name)
            if v:
                values.append(v)
        return list(dict.fromkeys(v for v in values if len(v) >= 6))


def _env(cwd: Path) -> dict[str, str]:
    merged: dict[str, str] = {}
    dotenv = cwd / ".env"
    if dotenv.is_file():
        merged.update({k: v for k, v in dotenv_values(dotenv).items() if v is not None})
    merged.update(os.environ)
    return merged


def _yaml(cwd: Path, env: Mapping[str, str]) -> dict[str, Any]:
    path = Path(env["XCLAW_CONFIG"]) if env.get("XCLAW_CONFIG") else cwd / "xclaw.yaml"
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def _providers(env: Mapping[str, str], conf: Mapping[str, Any]) -> tuple[ProviderConfig, ...]:
    """XCLAW_MODEL overrides the chain; else xclaw.yaml's `providers`; else whatever keys
    the environment has (Anthropic first, then OpenAI-compatible), as the seed does."""
    openai_base = env.get("OPENAI_API_BASE_URL") or env.get("OPENAI_BASE_URL")

    def make(spec: str, entry: Mapping[str, Any] | None = None) -> ProviderConfig:
        entry = entry or {}
        kind, sep, model = spec.partition(":")
        if not sep or not model or kind not in ("anthropic", "openai", "script"):
            raise ConfigError(
                f"model {spec!r}: expected anthropic:<model>, openai:<model> or script:<path>"
            )
        key = entry.get("api_key")
        base = entry.get("base_url")
        if kind == "anthropic":
            key = key or env.get("ANTHROPIC_API_KEY")
            base = base or env.get("ANTHROPIC_BASE_URL")
        elif kind == "openai":
            key = key or env.get("OPENAI_API_KEY")
            base = base or openai_base
        return ProviderConfig(spec=spec, api_key=key, base_url=base)

    if env.get("XCLAW_MODEL"):
        return tuple(make(s.strip()) for s in env["XCLAW_MODEL"].split(",") if s.strip())
    chain = conf.get("providers")
    if chain:
        if not isinstance(chain, list):
            raise ConfigError("xclaw.yaml: `providers` must be a list")
        out = []
        for item in chain:
            if isinstance(item, str):
                out.append(make(item))
            elif isinstance(item, dict) and "model" in item:
                out.append(make(str(item["model"]), item))
            else:
                raise ConfigError(f"xclaw.yaml: bad provider entry {item!r}")
        return tuple(out)
    found = []
    if env.get("ANTHROPIC_API_KEY"):
        found.append(make("anthropic:" + env.get("ANTHROPIC_MODEL", "claude-sonnet-4-5")))
    if env.get("OPENAI_API_KEY") or openai_base:
        found.append(make("openai:" + env.get("OPENAI_MODEL", "gpt-4o-mini")))
    return tuple(found)


def _flag(section: Mapping[str, Any], key: str, default: bool, where: str = "sandbox") -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"xclaw.yaml: {where}.{key} must be true or false, got {value!r}")
    return value


def load_settings(cwd: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings; keyword overrides (from flags) win when not None."""
    cwd = cwd or Path.cwd()
    env = _env(cwd)
    conf = _yaml(cwd, env)
    home = Path(env.get("XCLAW_HOME") or conf.get("home") or Path.home() / ".xclaw").expanduser()
    db = env.get("XCLAW_DB") or conf.get("database") or str(home / "xclaw.db")
    workspace_root = Path(
        conf.get("workspace_root") or home / "workspaces"
    ).expanduser()
    try:
        port = int(env.get("WEB_PORT") or conf.get("port") or DEFAULT_PORT)
    except ValueError as e:
        raise ConfigError(f"WEB_PORT must be a number, got {env.get('WEB_PORT')!r}") from e
    approval = conf.get("approval") or {}
    sandbox = conf.get("sandbox") or {}
    settings = Settings(
        home=home,
        db=db,
        workspace_root=workspace_root,
        port=port,
        token=env.get("XCLAW_TOKEN") or None,
        providers=_providers(env, conf),
        max_iterations=int(conf.get("max_iterations", DEFAULT_MAX_ITERATIONS)),
        max_tokens=int(conf.get("max_tokens", 4096)),
        temperature=conf.get("temperature"),
        context_window_tokens=int(conf.get("context_window_tokens", 150_000)),
        approval_mode=str(approval.get("mode", "ask")),
        approval_timeout_s=approval.get("timeout_s"),
        safe_commands=tuple(approval.get("safe_commands", DEFAULT_SAFE_COMMANDS)),
        denied_patterns=tuple(approval.get("deny", DEFAULT_DENIED_PATTERNS)),
        shell_timeout_s=float(sandbox.get("shell_timeout_s", 120.0)),
        tool_output_cap=int(sandbox.get("output_cap", 30_000)),
        parallel_side_effects=_flag(sandbox, "parallel_side_effects", False),
        allowed_origins=tuple(conf.get("allowed_origins", ())),
        secret_env=tuple(conf.get("secret_env", ())),
        known_secrets=tuple(known_secrets(env, conf.get("secret_env", ()), db)),
        llm_retries=int(conf.get("llm_retries", 3)),
        llm_timeout_s=float(conf.get("llm_timeout_s", 120.0)),
        extra=conf,
    )
    if settings.approval_mode not in ("ask", "auto-edits", "yolo"):
        raise ConfigError(
            f"approval mode {settings.approval_mode!r}: expected ask, auto-edits or yolo"
        )
    return settings.with_(**overrides)
