"""[config] One settings object, read from the environment, `.env` and an optional `xclaw.yaml`.

Precedence (highest first): explicit arguments (command-line flags) > environment variables >
`.env` in the working directory > `xclaw.yaml` > defaults. Nothing is read at import time,
and no other module reads the environment for a setting: they receive `Settings`, or (the
sandbox, the tools, the workspaces) the setup of their own made from it here
(`Settings.sandbox_setup()`, `Settings.tool_setup()`).

`Settings` is composed of the sections the packages declare for what they read (each key
declared once, with its one default, its variable if it has one; xclaw/config/section.py):

    home, workspace_root, secret_env     here
    port, allowed_origins (+ host, token) xclaw/gateway/settings.py   GatewaySettings
    database, lease_ttl_s, sweep_*        xclaw/store/settings.py     StoreSettings
    providers, max_*, llm_*, prices, ...  xclaw/llm/settings.py       LlmSettings
    approval, tools, tool_policies        xclaw/tools/settings.py     ToolSettings
    mcp_servers                           xclaw/tools/mcp/config.py   McpSettings
    a2a (the card, remote agents)         xclaw/tools/a2a_settings.py A2aSettings
    sandbox                               xclaw/sandbox/settings.py   SandboxSettings
    otel                                  xclaw/telemetry/config.py   OtelSettings
    agents                                xclaw/agents/settings.py    AgentSettings
    budgets                               xclaw/budgets/settings.py   BudgetSettings

The provider chain is read with the providers' own variables (xclaw/llm/registry.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import yaml
from dotenv import dotenv_values
from pydantic import BaseModel, BeforeValidator, Field, ValidationError, model_validator

from xclaw.agents.settings import AgentSettings
from xclaw.budgets.settings import BudgetSettings
from xclaw.config.errors import Loc, explain
from xclaw.config.section import Default, Env, NotInYaml, Strings, Wording, WrongType
from xclaw.errors import ConfigError
from xclaw.gateway.settings import GatewaySettings
from xclaw.llm import registry
from xclaw.llm.provider import ProviderEntry
from xclaw.llm.settings import LlmSettings
from xclaw.sandbox.settings import SANDBOX_DEFAULTS, SandboxSettings
from xclaw.sandbox.setup import SandboxSetup
from xclaw.security.credentials import known_secrets, url_passwords
from xclaw.store.settings import StoreSettings
from xclaw.telemetry.config import OtelSettings
from xclaw.tools.a2a_settings import A2aSettings
from xclaw.tools.mcp.config import McpSettings
from xclaw.tools.settings import ToolSettings
from xclaw.tools.setup import ToolSetup

# The file's path, when it is not ./xclaw.yaml.
CONFIG_VARIABLE = "XCLAW_CONFIG"


def _path(value: Any) -> Any:
    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise WrongType("not a path")
    return Path(value).expanduser()


PathSetting = Annotated[Path, BeforeValidator(_path), Wording("a path", bounds=False)]


class Settings(
    GatewaySettings,
    StoreSettings,
    LlmSettings,
    ToolSettings,
    McpSettings,
    A2aSettings,
    AgentSettings,
):
    """Everything xclaw is configured with; built by `load_settings` when a command starts."""

    # xclaw's home directory: database, access token, workspaces.
    home: Annotated[PathSetting, Env("XCLAW_HOME"), Field(validate_default=True)] = Path("~/.xclaw")
    workspace_root: Annotated[PathSetting, Default("`$XCLAW_HOME/workspaces`")]
    # Names of environment variables whose values must never reach the record (besides keys).
    secret_env: Strings = ()
    sandbox: SandboxSettings = SANDBOX_DEFAULTS
    otel: OtelSettings = OtelSettings()
    budgets: BudgetSettings = BudgetSettings()
    # Every credential value found when the settings were read (environment, .env, database
    # URL): see xclaw/security/credentials.py. The process may drop them from its environment after.
    known_secrets: Annotated[
        tuple[str, ...], NotInYaml("the credentials found in the environment")
    ] = ()

    @model_validator(mode="before")
    @classmethod
    def _under_home(cls, data: Any) -> Any:
        """The database and the workspaces default to places under home."""
        if not isinstance(data, Mapping):
            return data
        home = data.get("home", cls.model_fields["home"].default)
        if not isinstance(home, (str, Path)):
            return data  # refused as a path
        base = Path(home).expanduser()
        filled = dict(data)
        filled.setdefault("database", str(base / "xclaw.db"))
        filled.setdefault("workspace_root", base / "workspaces")
        return filled

    def secret_values(self) -> list[str]:
        """Values that the redactor scrubs from everything written or sent: provider keys
        (configured in xclaw.yaml too), the token, and every credential found at load time
        (besides secret_env values set in the environment since)."""
        values = [v for p in self.providers for v in p.secrets()]
        if self.token:
            values.append(self.token)
        values += self.known_secrets
        values += url_passwords(self.database)  # --db may override what the env said
        for name in self.secret_env:
            v = os.environ.get(name)
            if v:
                values.append(v)
        for server in self.mcp_servers.values():  # values substituted from ${VAR}
            values.extend(server.secrets)
        for agent in self.a2a.agents.values():  # a2a_call's remote agents: ${VAR}, tokens
            values.extend(agent.secrets)
        return list(dict.fromkeys(v for v in values if len(v) >= 6))

    # The one place the components' own setups are made from the settings: the sandbox, the
    # tools and the workspaces receive these, never `Settings` (tests/test_layering.py).
    def sandbox_setup(self) -> SandboxSetup:
        """What the isolation, the containers and the workspaces are built from."""
        return SandboxSetup(self.sandbox, self.home, self.workspace_root, self.database)

    def tool_setup(self) -> ToolSetup:
        """What the built-in tools and the approval policy are built from (the secret values
        as they are now: `secret_values`)."""
        return ToolSetup(
            sandbox=self.sandbox_setup(),
            approval=self.approval,
            secret_env=tuple(self.secret_env),
            secret_values=tuple(self.secret_values()),
            a2a_agents=dict(self.a2a.agents),
        )


def environment(cwd: Path) -> dict[str, str]:
    """The process environment over `.env` in `cwd`: every variable a setting may come from."""
    merged: dict[str, str] = {}
    dotenv = cwd / ".env"
    if dotenv.is_file():
        merged.update({k: v for k, v in dotenv_values(dotenv).items() if v is not None})
    merged.update(os.environ)
    return merged


def read_yaml(cwd: Path, env: Mapping[str, str]) -> tuple[dict[str, Any], str]:
    """xclaw.yaml's mapping ({} without a file) and how messages name the file."""
    path = Path(env[CONFIG_VARIABLE]) if env.get(CONFIG_VARIABLE) else cwd / "xclaw.yaml"
    if not path.is_file():
        return {}, "xclaw.yaml"
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data, str(path)


def _with_environment(
    model: type[BaseModel],
    conf: Mapping[str, Any],
    env: Mapping[str, str],
    source: str,
    at: Loc = (),
) -> tuple[dict[str, Any], dict[Loc, str]]:
    """`conf` (one section of xclaw.yaml) with the values the environment gives (`Env` on a
    field: the variable wins), and which variable each came from. A key xclaw.yaml may not
    hold (`NotInYaml`) is refused here, saying where it comes from instead."""
    raw = dict(conf)
    origins: dict[Loc, str] = {}
    for name, info in model.model_fields.items():
        here = (*at, name)
        not_yaml = next((m for m in info.metadata if isinstance(m, NotInYaml)), None)
        if not_yaml is not None and name in conf:
            path = ".".join(str(p) for p in here)
            raise ConfigError(
                f"{source}: {path} is not a key of xclaw.yaml: it is set by {not_yaml.how}"
            )
        names = next((m.names for m in info.metadata if isinstance(m, Env)), ())
        chosen = next((n for n in names if env.get(n)), None)
        if chosen is not None:
            raw[name] = env[chosen]
            origins[here] = chosen
        section = info.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            inner = conf.get(name, {})
            if isinstance(inner, Mapping):
                found, more = _with_environment(section, inner, env, source, here)
                if more or name in conf:
                    raw[name] = found
                origins.update(more)
    return raw, origins


def _chain(conf: Mapping[str, Any], env: Mapping[str, str], source: str) -> tuple[Any, ...]:
    """The provider chain: XCLAW_MODEL (comma-separated specs) over xclaw.yaml's `providers`,
    else every provider the environment switches on (a key variable set)."""
    if env.get(registry.MODEL_VARIABLE):
        specs = [s.strip() for s in env[registry.MODEL_VARIABLE].split(",") if s.strip()]
        return tuple(_entry(spec, {}, env, source) for spec in specs)
    listed = conf.get("providers")
    if not listed:
        return tuple(_entry(spec, {}, env, source) for spec in registry.detected(env))
    if not isinstance(listed, list):
        raise ConfigError(f"{source}: providers must be a list, got {listed!r}")
    out = []
    for item in listed:
        if isinstance(item, str):
            out.append(_entry(item, {}, env, source))
        elif isinstance(item, dict) and isinstance(item.get("model"), str):
            out.append(_entry(item["model"], item, env, source))
        else:
            raise ConfigError(
                f"{source}: providers: {item!r} is not '<kind>:<model>' or a mapping with a `model`"
            )
    return tuple(out)


def _entry(
    spec: str, options: Mapping[str, Any], env: Mapping[str, str], source: str
) -> ProviderEntry:
    try:
        return registry.entry(spec, options, env)
    except ValidationError as e:
        found = registry.provider(spec.partition(":")[0])
        model = found.entry if found is not None else ProviderEntry
        message = explain(e, model, source=source, prefix=f"providers[{spec}]")
        first = e.errors(include_url=False)[0]
        key = str(first["loc"][-1])
        owners = registry.option_owners(key)
        if first["type"] == "extra_forbidden" and len(first["loc"]) == 1 and owners:
            kinds = ", ".join(f"{k}:" for k in owners)
            message = (
                f"{source}: unknown key providers[{spec}].{key}: {key} is an option of "
                f"{kinds} providers only"
            )
        raise ConfigError(message) from None


def read_settings(
    conf: Mapping[str, Any], env: Mapping[str, str], *, source: str = "xclaw.yaml"
) -> Settings:
    """The settings from xclaw.yaml's mapping and the environment (no flags): every value
    checked, a bad one a ConfigError naming the key (or variable) and the value."""
    raw, origins = _with_environment(Settings, conf, env, source)
    try:
        raw["providers"] = _chain(conf, env, source)
        settings = Settings.model_validate(raw, context={"env": env})
    except ValidationError as e:
        raise ConfigError(explain(e, Settings, source=source, origins=origins)) from None
    found = known_secrets(env, settings.secret_env, settings.database)
    return settings.model_copy(update={"known_secrets": tuple(found)})


def load_settings(
    cwd: Path | None = None,
    *,
    database: str | None = None,
    port: int | None = None,
    host: str | None = None,
    workspace_root: Path | None = None,
    approval: str | None = None,
) -> Settings:
    """The settings of a command started in `cwd`; the keyword arguments are its flags, which
    win when given."""
    cwd = cwd or Path.cwd()
    env = environment(cwd)
    conf, source = read_yaml(cwd, env)
    settings = read_settings(conf, env, source=source)
    changes: dict[str, Any] = {
        k: v
        for k, v in (
            ("database", database),
            ("port", port),
            ("host", host),
            ("workspace_root", workspace_root),
        )
        if v is not None
    }
    if approval is not None:
        changes["approval"] = settings.approval.model_copy(update={"mode": approval})
    return settings.model_copy(update=changes) if changes else settings


def provider_chain(spec: str, cwd: Path | None = None) -> tuple[ProviderEntry, ...]:
    """The chain `spec` names (as XCLAW_MODEL would), keys and base URLs taken from the
    environment and `.env`: for a command's `--model`."""
    env = {**environment(cwd or Path.cwd()), registry.MODEL_VARIABLE: spec}
    return _chain({}, env, registry.MODEL_VARIABLE)
