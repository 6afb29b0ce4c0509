"""[xclaw] xclaw: an agent runtime whose state survives anything — as a library.

    import xclaw

    async with xclaw.open(db="app.db", model="openai:gpt-4o-mini") as agent:
        session = await agent.new_session(title="release notes")
        async for event in session.send("prepare the release notes"):
            ...

`open` drives sessions in this process, `connect` through a running gateway, `open_sync`
and `connect_sync` are the same without an event loop; `tool` marks a Python function as a
tool. Events are the typed frames of `xclaw.frames`. docs/python-api.md has the whole
surface and the versioning policy: what `__all__` lists here (and `xclaw.frames`) is
public; every other module is private and may change in any release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # what type checkers see; at run time each name is imported on first use
    from xclaw.agents.definition import ModelSettings
    from xclaw.agents.hooks import (
        AfterTool,
        BeforeModel,
        BeforeTool,
        HookDecision,
        Hooks,
        allow,
        ask,
        deny,
        rewrite,
    )
    from xclaw.api.base import Agent, Approval, Approve, Event, Events, RunResult, Session
    from xclaw.api.local import open
    from xclaw.api.remote import connect
    from xclaw.api.sync import SyncAgent, SyncEvents, SyncSession, connect_sync, open_sync
    from xclaw.errors import (
        AgentClosed,
        AgentMismatch,
        AgentNotOpen,
        AmbiguousSession,
        BadCommand,
        BadFrame,
        BadRequest,
        BadStep,
        BlobStoreLost,
        BlobStoreUnavailable,
        Busy,
        CompensationFailed,
        ConfigError,
        ConfigMismatch,
        DatabaseRefused,
        DiskFull,
        Forbidden,
        ForbiddenOrigin,
        GatewayUnavailable,
        HookDenied,
        InternalError,
        IrreversibleEffects,
        LlmError,
        MaxIterations,
        NotAttached,
        OutputInvalid,
        RollbackPending,
        StoreError,
        Timeout,
        TooManyAttempts,
        Unauthorized,
        UnknownAgent,
        UnknownSchedule,
        UnknownSession,
        XclawError,
    )
    from xclaw.tools.base import ToolContext
    from xclaw.tools.python_tools import tool
    from xclaw.wire.frames import CostSummary, SessionInfo, Step, TreeNode
    from xclaw.wire.http_bodies import (
        AgentInfo,
        FireInfo,
        HookInfo,
        HookMade,
        ProcessInfo,
        RollbackAnswer,
        RollbackPreview,
        ScheduleInfo,
        SessionProcesses,
        ToolInfo,
    )

_WHERE = {
    "Agent": "xclaw.api.base",
    "Approval": "xclaw.api.base",
    "Approve": "xclaw.api.base",
    "ModelSettings": "xclaw.agents.definition",
    "ToolContext": "xclaw.tools.base",
    "AgentInfo": "xclaw.wire.http_bodies",
    **dict.fromkeys(
        (
            "AfterTool",
            "BeforeModel",
            "BeforeTool",
            "HookDecision",
            "Hooks",
            "allow",
            "ask",
            "deny",
            "rewrite",
        ),
        "xclaw.agents.hooks",
    ),
    "Event": "xclaw.api.base",
    "Events": "xclaw.api.base",
    "RunResult": "xclaw.api.base",
    "Session": "xclaw.api.base",
    "open": "xclaw.api.local",
    "connect": "xclaw.api.remote",
    "SyncAgent": "xclaw.api.sync",
    "SyncEvents": "xclaw.api.sync",
    "SyncSession": "xclaw.api.sync",
    "connect_sync": "xclaw.api.sync",
    "open_sync": "xclaw.api.sync",
    "CostSummary": "xclaw.wire.frames",
    "SessionInfo": "xclaw.wire.frames",
    "Step": "xclaw.wire.frames",
    "TreeNode": "xclaw.wire.frames",
    "RollbackAnswer": "xclaw.wire.http_bodies",
    "RollbackPreview": "xclaw.wire.http_bodies",
    "ProcessInfo": "xclaw.wire.http_bodies",
    "ScheduleInfo": "xclaw.wire.http_bodies",
    "FireInfo": "xclaw.wire.http_bodies",
    "HookInfo": "xclaw.wire.http_bodies",
    "HookMade": "xclaw.wire.http_bodies",
    "SessionProcesses": "xclaw.wire.http_bodies",
    "ToolInfo": "xclaw.wire.http_bodies",
    "tool": "xclaw.tools.python_tools",
    **dict.fromkeys(
        (
            "AgentClosed",
            "AgentMismatch",
            "AgentNotOpen",
            "AmbiguousSession",
            "BadCommand",
            "BadFrame",
            "BadRequest",
            "BadStep",
            "BlobStoreLost",
            "BlobStoreUnavailable",
            "Busy",
            "CompensationFailed",
            "ConfigError",
            "ConfigMismatch",
            "DatabaseRefused",
            "DiskFull",
            "Forbidden",
            "ForbiddenOrigin",
            "GatewayUnavailable",
            "HookDenied",
            "InternalError",
            "IrreversibleEffects",
            "LlmError",
            "MaxIterations",
            "NotAttached",
            "RollbackPending",
            "OutputInvalid",
            "StoreError",
            "Timeout",
            "TooManyAttempts",
            "Unauthorized",
            "UnknownAgent",
            "UnknownSchedule",
            "UnknownSession",
            "XclawError",
        ),
        "xclaw.errors",
    ),
}

__all__ = [
    "AfterTool",
    "Agent",
    "AgentClosed",
    "AgentInfo",
    "AgentMismatch",
    "AgentNotOpen",
    "AmbiguousSession",
    "Approval",
    "Approve",
    "BadCommand",
    "BadFrame",
    "BadRequest",
    "BadStep",
    "BeforeModel",
    "BeforeTool",
    "BlobStoreLost",
    "BlobStoreUnavailable",
    "Busy",
    "CompensationFailed",
    "ConfigError",
    "ConfigMismatch",
    "CostSummary",
    "DatabaseRefused",
    "DiskFull",
    "Event",
    "Events",
    "FireInfo",
    "Forbidden",
    "ForbiddenOrigin",
    "GatewayUnavailable",
    "HookDecision",
    "HookDenied",
    "HookInfo",
    "HookMade",
    "Hooks",
    "InternalError",
    "IrreversibleEffects",
    "LlmError",
    "MaxIterations",
    "ModelSettings",
    "NotAttached",
    "OutputInvalid",
    "ProcessInfo",
    "RollbackAnswer",
    "RollbackPending",
    "RollbackPreview",
    "RunResult",
    "ScheduleInfo",
    "Session",
    "SessionInfo",
    "SessionProcesses",
    "Step",
    "StoreError",
    "SyncAgent",
    "SyncEvents",
    "SyncSession",
    "Timeout",
    "TooManyAttempts",
    "ToolContext",
    "ToolInfo",
    "TreeNode",
    "Unauthorized",
    "UnknownAgent",
    "UnknownSchedule",
    "UnknownSession",
    "XclawError",
    "allow",
    "ask",
    "connect",
    "connect_sync",
    "deny",
    "open",
    "open_sync",
    "rewrite",
    "tool",
]


def __getattr__(name: str) -> Any:
    """`import xclaw` stays light (the command line imports it first): each public name is
    imported when it is first used."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'xclaw' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return [*__all__, "__version__"]
