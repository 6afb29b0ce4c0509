"""[api] `xclaw.open(...)`'s arguments as the one Settings object every xclaw command starts from:
read from the environment, `.env` and xclaw.yaml as `load_settings` reads them
(docs/configuration.md), the arguments winning as a command's flags do."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xclaw.config.settings import CONFIG_VARIABLE, environment, read_settings, read_yaml
from xclaw.errors import ConfigError
from xclaw.llm.registry import MODEL_VARIABLE

if TYPE_CHECKING:
    from xclaw.config.settings import Settings
    from xclaw.llm.provider import Provider
    from xclaw.tools.python_tools import PythonTool


def build_settings(
    *,
    db: str | Path | None = None,
    model: str | None = None,
    approval: str | None = None,
    workspace: str | Path | None = None,
    home: str | Path | None = None,
    config: str | Path | Mapping[str, Any] | None = None,
    tools: Sequence[Callable[..., Any] | str] = (),
    mcp_servers: Mapping[str, Mapping[str, Any]] | None = None,
    providers: Sequence[str | Mapping[str, Any]] | None = None,
    provider_kinds: Sequence[Provider[Any]] = (),
    cwd: str | Path | None = None,
) -> tuple[Settings, list[PythonTool]]:
    """The settings, and the Python tools given as functions (the `module:function`
    references join xclaw.yaml's `tools:`, loaded with the built-in tools)."""
    from xclaw.llm import registry
    from xclaw.tools.python_tools import PythonTool

    for kind in provider_kinds:
        if registry.provider(kind.kind) is not kind:
            registry.register(kind)
    where = Path(cwd) if cwd is not None else Path.cwd()
    env = dict(environment(where))
    if isinstance(config, Mapping):
        conf, source = dict(config), "xclaw.open(config=…)"
    else:
        if config is not None:
            env[CONFIG_VARIABLE] = str(config)
        conf, source = read_yaml(where, env)
    if home is not None:
        conf["home"] = str(home)
        env.pop("XCLAW_HOME", None)
    refs = [t for t in tools if isinstance(t, str)]
    if refs:
        conf["tools"] = [*(conf.get("tools") or ()), *refs]
    if mcp_servers is not None:
        conf["mcp_servers"] = {**(conf.get("mcp_servers") or {}), **mcp_servers}
    if providers is not None:
        conf["providers"] = list(providers)
        env.pop(MODEL_VARIABLE, None)  # given here: over the environment's chain
    if model is not None:
        env[MODEL_VARIABLE] = model
    settings = read_settings(conf, env, source=source)
    changes: dict[str, Any] = {}
    if db is not None:
        changes["database"] = str(db)
    if workspace is not None:
        changes["workspace_root"] = Path(workspace).expanduser()
    elif home is not None and "workspace_root" not in conf:
        changes["workspace_root"] = Path(home).expanduser() / "workspaces"
    if approval is not None:
        if approval not in ("ask", "auto-edits", "yolo"):
            raise ConfigError(f"approval {approval!r}: expected ask, auto-edits, yolo")
        changes["approval"] = settings.approval.model_copy(update={"mode": approval})
    if changes:
        settings = settings.model_copy(update=changes)
    functions = []
    for fn in tools:
        if isinstance(fn, str):
            continue
        if not callable(fn):
            raise ConfigError(f"tools: {fn!r} is neither a function nor 'module:function'")
        ref = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', fn)}"
        tool = PythonTool(ref, fn)
        policy = settings.tool_policies.get(tool.name)
        functions.append(tool if policy is None else PythonTool(ref, fn, policy))
    return settings, functions
