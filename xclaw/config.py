"""One settings object, read from the environment, `.env` and an optional `xclaw.yaml`.

Precedence (highest first): explicit arguments (command-line flags) > environment variables >
`.env` in the working directory > `xclaw.yaml` > defaults. Nothing is read at import time.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from dotenv import dotenv_values

from xclaw.credentials import known_secrets, url_passwords
from xclaw.errors import ConfigError

if TYPE_CHECKING:
    from xclaw.telemetry.config import OtelConfig
    from xclaw.tools.traits import ToolPolicy

DEFAULT_PORT = 3000
DEFAULT_MAX_ITERATIONS = 10

# Commands the shell tool may run without asking (first word), unless approval mode says more.
DEFAULT_SAFE_COMMANDS = (
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "pwd",
    "echo",
    "grep",
    "find",
    "sort",
    "uniq",
    "date",
    "whoami",
    "stat",
    "file",
    "diff",
    "du",
    "df",
    "tree",
    "true",
    "sleep",
)
# Refused outright, never even asked.
DEFAULT_DENIED_PATTERNS = (
    r"rm\s+-[a-zA-Z]*r[a-zA-Z]*f?\s+/(\s|$)",
    r"mkfs",
    r":\(\)\s*\{",
    r"dd\s+.*of=/dev/",
    r"shutdown|reboot|halt\b",
)


# Every key xclaw.yaml may hold, in one place: a top-level key maps to the set of keys its
# section may hold, or to None when its content is free-form (checked by its own reader).
# A key not listed here is refused with a "did you mean" (a typo must not be ignored in
# silence). A feature that reads a new key adds it here.
KNOWN_KEYS: dict[str, frozenset[str] | None] = {
    "home": None,
    "database": None,
    "workspace_root": None,
    "port": None,
    "providers": None,
    "max_iterations": None,
    "max_tokens": None,
    "temperature": None,
    "context_window_tokens": None,
    # Share of the window at which the conversation is summarised (docs/llm-providers.md).
    "compact_at": None,
    "approval": frozenset({"mode", "timeout_s", "safe_commands", "deny"}),
    "sandbox": frozenset(
        {
            "shell_timeout_s",
            "output_cap",
            "parallel_side_effects",
            "isolation",
            "network",
            "ignore",
            "max_file_mb",
            "max_snapshot_mb",
            "snapshots",
        }
    ),
    "allowed_origins": None,
    "secret_env": None,
    "llm_retries": None,
    "llm_timeout_s": None,
    "llm_retry_base_delay": None,
    "llm_retry_max_delay": None,
    "llm_retry_after_max": None,
    # How long a model server that is still starting is waited for (docs/llm-providers.md).
    "llm_startup_wait_s": None,
    # Per-model prices, dollars per million tokens (docs/llm-providers.md).
    "prices": None,
    # OpenTelemetry export (docs/operations.md), checked by xclaw.telemetry.config.
    "otel": frozenset(
        {"endpoint", "protocol", "service_name", "headers", "capture_message_content"}
    ),
    # Multi-worker timing (docs/postgres.md); the XCLAW_* variables of the same names win.
    "lease_ttl_s": None,
    "sweep_grace_s": None,
    "sweep_every_s": None,
    # Bring-your-own tools (docs/tools.md): checked in detail by xclaw.tools.config.
    "mcp_servers": None,
    "tools": None,
    "tool_policies": None,
}


# Keys of the mappings nested in free-form sections, checked by their readers below (and
# `mcp_servers.<name>` by xclaw.tools.mcp.config, `tool_policies.<name>` by xclaw.tools.traits).
PROVIDER_KEYS = ("model", "api_key", "base_url", "thinking", "cache", "first_tool_choice")
THINKING_KEYS = ("budget_tokens",)
PRICE_KEYS = ("input", "output", "cache_read", "cache_write")

# The environment variables read here, besides the providers' own (see docs/configuration.md).
ENV_LEASE_TTL = "XCLAW_LEASE_TTL_S"
ENV_SWEEP_GRACE = "XCLAW_SWEEP_GRACE_S"
ENV_SWEEP_EVERY = "XCLAW_SWEEP_EVERY_S"
ISOLATION_MODES = ("auto", "bwrap", "none")
APPROVAL_MODES = ("ask", "auto-edits", "yolo")


def _did_you_mean(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_known_keys(conf: Mapping[str, Any], where: str = "xclaw.yaml") -> None:
    """ConfigError naming the first unknown key (top level or inside a checked section)."""
    known = sorted(KNOWN_KEYS)
    for key in conf:
        if key not in KNOWN_KEYS:
            hint = _did_you_mean(str(key), known) or f" (known keys: {', '.join(known)})"
            raise ConfigError(f"{where}: unknown key {key!r}{hint}")
        section, sub = conf[key], KNOWN_KEYS[key]
        if sub is None or section is None:
            continue
        if not isinstance(section, Mapping):
            raise ConfigError(f"{where}: `{key}` must be a mapping, got {section!r}")
        for inner in section:
            if inner not in sub:
                hint = _did_you_mean(str(inner), sorted(sub)) or (
                    f" (known in {key}: {', '.join(sorted(sub))})"
                )
                raise ConfigError(f"{where}: unknown key {key}.{inner}{hint}")


def nearest(word: str, known: list[str]) -> str:
    """`; did you mean 'x'?` or nothing: for errors about other misspelled names."""
    return _did_you_mean(word, known)


def refuse_unknown(section: Mapping[str, Any], known: Iterable[str], where: str) -> None:
    """ConfigError naming the first key of `section` (found at `where` in xclaw.yaml) that is
    not in `known`, with a "did you mean"."""
    names = sorted(known)
    for key in section:
        if key not in names:
            hint = _did_you_mean(str(key), names) or f" (known: {', '.join(names)})"
            raise ConfigError(f"xclaw.yaml: unknown key {where}.{key}{hint}")


# --- typed readers: a bad value is a ConfigError naming the key and the value ---------------
def _whole(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where} must be a whole number >= {minimum}, got {value!r}")
    return value


def _real(value: Any, where: str, minimum: float, *, above: bool = False) -> float:
    """A number from xclaw.yaml, or the text of an environment variable."""
    number = value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    ok = (
        isinstance(number, (int, float))
        and not isinstance(number, bool)
        and math.isfinite(number)
        and (number > minimum if above else number >= minimum)
    )
    if not ok:
        bound = f"> {minimum:g}" if above else f">= {minimum:g}"
        raise ConfigError(f"{where} must be a number {bound}, got {value!r}")
    return float(number)


def _optional_real(value: Any, where: str, minimum: float, *, above: bool = False) -> float | None:
    return None if value is None else _real(value, where, minimum, above=above)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ConfigError(f"{where} must be a list of strings, got {value!r}")
    for item in value:
        if not isinstance(item, str):
            raise ConfigError(f"{where} must be a list of strings, got {item!r} in it")
    return tuple(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must be a non-empty string, got {value!r}")
    return value


def _choice(value: Any, where: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{where} {value!r}: expected {', '.join(choices)}")
    return str(value)


def _section(conf: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """A mapping section (already checked for unknown keys), or {} when absent."""
    section = conf.get(key)
    return section if isinstance(section, Mapping) else {}


def _env_or_yaml(
    env: Mapping[str, str], name: str, conf: Mapping[str, Any], key: str
) -> tuple[Any, str]:
    """(raw value, how to name it in an error): the variable wins over the yaml key."""
    if env.get(name):
        return env[name], name
    return conf.get(key), f"xclaw.yaml: {key}"


@dataclass(frozen=True)
class ProviderConfig:
    """One link of the provider chain: `anthropic:<model>`, `openai:<model>`, `script:<path>`."""

    spec: str
    api_key: str | None = None
    base_url: str | None = None
    # Anthropic extended thinking (`thinking: {budget_tokens: N}` in xclaw.yaml); None: off.
    thinking_budget: int | None = None
    # Anthropic prompt-cache breakpoints (`cache: false` turns them off).
    cache: bool = True
    # OpenAI-compatible: the `tool_choice` of each turn's first call — "required" (any tool)
    # or a tool's name — for small models that answer in words instead of acting (None: the
    # server's default, every call).
    first_tool_choice: str | None = None

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
    # Summarise the conversation when it fills this share of the window (None: trim only).
    compact_at: float | None = 0.8
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
    # Per-model prices from xclaw.yaml (dollars per million tokens), over the built-in table.
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # xclaw.tools.mcp.config.McpServerConfig per `mcp_servers:` entry (${VAR}s expanded).
    mcp_servers: tuple[Any, ...] = ()
    # xclaw.tools.traits.ToolPolicy per `tool_policies:` entry (MCP and Python tools).
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict)
    # `tools:` in xclaw.yaml: Python tools, 'module:function' (docs/tools.md).
    python_tools: tuple[str, ...] = ()
    # The provider retry schedule (docs/llm-providers.md), in seconds.
    llm_retry_base_delay: float = 0.5
    llm_retry_max_delay: float = 8.0
    llm_retry_after_max: float = 30.0
    # A model server still starting (connection refused, 503 "loading") is waited for this
    # long, apart from the retries; 0: not at all.
    llm_startup_wait_s: float = 120.0
    # How long a silent worker keeps its sessions' leases (renewed every third of it), and
    # the sweep of sessions left Running by a dead worker: None means the lease TTL.
    lease_ttl_s: float = 15.0
    sweep_grace_s: float | None = None
    sweep_every_s: float | None = None
    # `sandbox:` in xclaw.yaml: OS isolation of the shell tool (xclaw.sandbox.isolation) ...
    isolation: str = "auto"
    sandbox_network: bool = False
    # ... and workspace snapshots (xclaw.workspace.snapshots; None: the default ignore list).
    snapshots: bool = True
    snapshot_ignore: tuple[str, ...] | None = None
    max_file_mb: float = 50.0
    max_snapshot_mb: float = 500.0
    # xclaw.telemetry.config.OtelConfig: span export (None: off).
    otel: OtelConfig | None = None

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
        for server in self.mcp_servers:  # values substituted from ${VAR} in mcp_servers
            values.extend(server.secrets)
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
    check_known_keys(data, str(path))
    return data


def _providers(env: Mapping[str, str], conf: Mapping[str, Any]) -> tuple[ProviderConfig, ...]:
    """XCLAW_MODEL overrides the chain; else xclaw.yaml's `providers`; else whatever keys
    the environment has (Anthropic first, then OpenAI-compatible), as the seed does."""
    openai_base = env.get("OPENAI_API_BASE_URL") or env.get("OPENAI_BASE_URL")

    def make(spec: str, entry: Mapping[str, Any] | None = None) -> ProviderConfig:
        entry = entry or {}
        refuse_unknown(entry, PROVIDER_KEYS, f"providers[{spec}]")
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
        cache = entry.get("cache", True)
        if not isinstance(cache, bool):
            raise ConfigError(f"xclaw.yaml: {spec}: cache must be true or false, got {cache!r}")
        return ProviderConfig(
            spec=spec,
            api_key=key,
            base_url=base,
            thinking_budget=_thinking_budget(spec, entry.get("thinking")),
            cache=cache,
            first_tool_choice=_first_tool_choice(spec, entry.get("first_tool_choice")),
        )

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


def provider_chain(spec: str, cwd: Path | None = None) -> tuple[ProviderConfig, ...]:
    """The chain `spec` names (as XCLAW_MODEL would), keys and base URLs taken from the
    environment and `.env`: for a command's `--model`."""
    env = {**_env(cwd or Path.cwd()), "XCLAW_MODEL": spec}
    return _providers(env, {})


MIN_THINKING_BUDGET = 1024  # Anthropic's smallest budget_tokens


def _thinking_budget(spec: str, value: Any) -> int | None:
    """`thinking: {budget_tokens: N}` (or `thinking: false`) of one provider entry."""
    if value is None or value is False:
        return None
    if isinstance(value, dict):
        refuse_unknown(value, THINKING_KEYS, f"providers[{spec}].thinking")
    budget = value.get("budget_tokens") if isinstance(value, dict) else None
    if (
        not isinstance(budget, int)
        or isinstance(budget, bool)
        or budget < MIN_THINKING_BUDGET
        or not spec.startswith("anthropic:")
    ):
        raise ConfigError(
            f"xclaw.yaml: {spec}: thinking must be {{budget_tokens: N}} with N >= "
            f"{MIN_THINKING_BUDGET}, on an anthropic: provider (OpenAI-compatible reasoning "
            f"models think on their own), got {value!r}"
        )
    return budget


def _first_tool_choice(spec: str, value: Any) -> str | None:
    """`first_tool_choice: required` or a tool's name, on an openai: provider entry."""
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not value.strip()
        or value in ("auto", "none")
        or not spec.startswith("openai:")
    ):
        raise ConfigError(
            f"xclaw.yaml: {spec}: first_tool_choice must be `required` (any tool) or the name "
            f"of a tool, on an openai: provider (leave it out for the server's default), "
            f"got {value!r}"
        )
    return value.strip()


def _compact_at(value: Any) -> float | None:
    """`compact_at: 0.8` (share of the context window), or false to only trim."""
    if value is False or value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.1 <= value <= 1:
        raise ConfigError(
            f"xclaw.yaml: compact_at must be a share of the context window between 0.1 and 1 "
            f"(or false to trim the oldest turns instead), got {value!r}"
        )
    return float(value)


def _prices(value: Any) -> dict[str, dict[str, float]]:
    """`prices: {model: {input, output, cache_read, cache_write}}` in dollars per million
    tokens; they extend and override the built-in table (xclaw/llm/prices.py)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError("xclaw.yaml: prices must map model names to {input, output, ...}")
    out: dict[str, dict[str, float]] = {}
    for model, entry in value.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"xclaw.yaml: prices.{model} must be a mapping")
        refuse_unknown(entry, PRICE_KEYS, f"prices.{model}")
        rates: dict[str, float] = {}
        for k, v in entry.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ConfigError(f"xclaw.yaml: prices.{model}.{k} must be a number >= 0")
            rates[k] = float(v)
        if "input" not in rates or "output" not in rates:
            raise ConfigError(f"xclaw.yaml: prices.{model} needs at least input and output")
        out[str(model)] = rates
    return out


def _flag(section: Mapping[str, Any], key: str, default: bool, where: str = "sandbox") -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"xclaw.yaml: {where}.{key} must be true or false, got {value!r}")
    return value


def _mcp_servers(conf: Mapping[str, Any], env: Mapping[str, str]) -> tuple[Any, ...]:
    if not conf.get("mcp_servers"):
        return ()
    from xclaw.tools.mcp.config import parse_servers  # the tools layer owns the details

    return tuple(parse_servers(conf["mcp_servers"], env))


def _tool_policies(conf: Mapping[str, Any]) -> dict[str, ToolPolicy]:
    from xclaw.tools.traits import parse_policies  # the tools layer owns the details

    return parse_policies(conf.get("tool_policies"))


def _otel(conf: Mapping[str, Any]) -> OtelConfig:
    # The process environment, not .env: the OpenTelemetry SDK reads OTEL_* from there too.
    from xclaw.telemetry.config import otel_config

    return otel_config(conf, os.environ)


def load_settings(cwd: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings; keyword overrides (from flags) win when not None. Every value is
    checked here: a bad one is a ConfigError naming the key and the value."""
    cwd = cwd or Path.cwd()
    env = _env(cwd)
    conf = _yaml(cwd, env)
    y = "xclaw.yaml: "
    home_raw = env.get("XCLAW_HOME") or _text(conf.get("home", "~/.xclaw"), y + "home")
    home = Path(home_raw).expanduser()
    db = env.get("XCLAW_DB") or _text(conf.get("database", str(home / "xclaw.db")), y + "database")
    workspace_root = Path(
        _text(conf.get("workspace_root", str(home / "workspaces")), y + "workspace_root")
    ).expanduser()
    port_raw, port_where = _env_or_yaml(env, "WEB_PORT", conf, "port")
    port = _whole(DEFAULT_PORT if port_raw is None else port_raw, port_where, 1)
    if port > 65535:
        raise ConfigError(f"{port_where} must be a TCP port (1-65535), got {port_raw!r}")
    approval = _section(conf, "approval")
    sandbox = _section(conf, "sandbox")
    ttl_raw, ttl_where = _env_or_yaml(env, ENV_LEASE_TTL, conf, "lease_ttl_s")
    grace_raw, grace_where = _env_or_yaml(env, ENV_SWEEP_GRACE, conf, "sweep_grace_s")
    every_raw, every_where = _env_or_yaml(env, ENV_SWEEP_EVERY, conf, "sweep_every_s")
    secret_env = _strings(conf.get("secret_env", []), y + "secret_env")
    denied = _strings(approval.get("deny", list(DEFAULT_DENIED_PATTERNS)), y + "approval.deny")
    for pattern in denied:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ConfigError(
                f"{y}approval.deny: {pattern!r} is not a regular expression: {e}"
            ) from e
    ignore = sandbox.get("ignore")
    temperature = conf.get("temperature")
    settings = Settings(
        home=home,
        db=db,
        workspace_root=workspace_root,
        port=port,
        token=env.get("XCLAW_TOKEN") or None,
        providers=_providers(env, conf),
        max_iterations=_whole(
            conf.get("max_iterations", DEFAULT_MAX_ITERATIONS), y + "max_iterations", 1
        ),
        max_tokens=_whole(conf.get("max_tokens", 4096), y + "max_tokens", 1),
        temperature=None if temperature is None else _real(temperature, y + "temperature", 0),
        context_window_tokens=_whole(
            conf.get("context_window_tokens", 150_000), y + "context_window_tokens", 1
        ),
        compact_at=_compact_at(conf.get("compact_at", 0.8)),
        approval_mode=_choice(approval.get("mode", "ask"), y + "approval.mode", APPROVAL_MODES),
        approval_timeout_s=_optional_real(
            approval.get("timeout_s"), y + "approval.timeout_s", 0, above=True
        ),
        safe_commands=_strings(
            approval.get("safe_commands", list(DEFAULT_SAFE_COMMANDS)), y + "approval.safe_commands"
        ),
        denied_patterns=denied,
        shell_timeout_s=_real(
            sandbox.get("shell_timeout_s", 120.0), y + "sandbox.shell_timeout_s", 0, above=True
        ),
        tool_output_cap=_whole(sandbox.get("output_cap", 30_000), y + "sandbox.output_cap", 1),
        parallel_side_effects=_flag(sandbox, "parallel_side_effects", False),
        allowed_origins=_strings(conf.get("allowed_origins", []), y + "allowed_origins"),
        secret_env=secret_env,
        known_secrets=tuple(known_secrets(env, secret_env, db)),
        llm_retries=_whole(conf.get("llm_retries", 3), y + "llm_retries", 0),
        llm_timeout_s=_real(conf.get("llm_timeout_s", 120.0), y + "llm_timeout_s", 0, above=True),
        llm_retry_base_delay=_real(
            conf.get("llm_retry_base_delay", 0.5), y + "llm_retry_base_delay", 0
        ),
        llm_retry_max_delay=_real(
            conf.get("llm_retry_max_delay", 8.0), y + "llm_retry_max_delay", 0
        ),
        llm_retry_after_max=_real(
            conf.get("llm_retry_after_max", 30.0), y + "llm_retry_after_max", 0
        ),
        llm_startup_wait_s=_real(
            conf.get("llm_startup_wait_s", 120.0), y + "llm_startup_wait_s", 0
        ),
        prices=_prices(conf.get("prices")),
        mcp_servers=_mcp_servers(conf, env),
        tool_policies=_tool_policies(conf),
        python_tools=_strings(conf.get("tools") or [], y + "tools"),
        lease_ttl_s=15.0 if ttl_raw is None else _real(ttl_raw, ttl_where, 0.5),
        sweep_grace_s=_optional_real(grace_raw, grace_where, 0),
        sweep_every_s=_optional_real(every_raw, every_where, 0, above=True),
        isolation=_choice(
            sandbox.get("isolation", "auto"), y + "sandbox.isolation", ISOLATION_MODES
        ),
        sandbox_network=_flag(sandbox, "network", False),
        snapshots=_flag(sandbox, "snapshots", True),
        snapshot_ignore=None if ignore is None else _strings(ignore, y + "sandbox.ignore"),
        max_file_mb=_real(
            sandbox.get("max_file_mb", 50.0), y + "sandbox.max_file_mb", 0, above=True
        ),
        max_snapshot_mb=_real(
            sandbox.get("max_snapshot_mb", 500.0), y + "sandbox.max_snapshot_mb", 0, above=True
        ),
        otel=_otel(conf),
    )
    return settings.with_(**overrides)
