"""[tools] Every tool an agent may call, with where it comes from and the policies it gets: what
`xclaw tools` prints and `/tools` answers in both clients."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from xclaw.tools.approval import SHELL_TOOLS, ApprovalPolicy
from xclaw.tools.base import Tool, retries_on_resume
from xclaw.tools.effects import EffectClass, effect_of

# How the listing says each effect class.
EFFECT_WORDS = {
    EffectClass.READ_ONLY: "",
    EffectClass.WORKSPACE: "",
    EffectClass.COMPENSABLE: "effects outside the workspace, undone on rollback by its "
    "compensation",
    EffectClass.IRREVERSIBLE: "effects outside the workspace, irreversible (rollback cannot "
    "undo them)",
}


def tool_row(tool: Tool, policy: ApprovalPolicy) -> dict[str, Any]:
    traits = tool.traits
    if tool.name in SHELL_TOOLS:
        approval = "by command (safe commands run; denied patterns never)"
    else:
        decision = policy.decide(tool, {})
        approval = "runs" if decision.kind == "allow" else f"asked ({decision.reason})"
    settles = traits is not None and traits.settle_check
    if tool.resumable:
        resume = "continues from its record"
    elif traits is not None and traits.idempotency_key:
        resume = "retried with the same idempotency key (the remote side deduplicates)"
    elif retries_on_resume(tool):
        resume = "retried"
    elif traits is not None and traits.resume_note:
        resume = f"asked again (may have run; {traits.resume_note})"
    else:
        resume = "asked again (may have run)"
    if settles and not retries_on_resume(tool):
        resume = (
            f"its settle check decides (done: settled, not done: retried); if unknown, {resume}"
        )
    return {
        "name": tool.name,
        "source": traits.source if traits is not None else "built-in",
        "description": tool.description,
        "readOnly": bool(tool.read_only),
        "approval": approval,
        "resume": resume,
        "outsideEffects": tool.outside_effects,
        "effect": effect_of(tool).value,
        "traits": traits.as_json() if traits is not None else None,
        "inputSchema": tool.input_schema,
    }


def tool_rows(tools: Mapping[str, Tool], policy: ApprovalPolicy) -> list[dict[str, Any]]:
    return [tool_row(t, policy) for t in tools.values()]


async def server_rows(hub: Any, *, start: bool) -> list[dict[str, Any]]:
    """One row per configured MCP server; with `start`, each is started (and timed) first."""
    if not hub:
        return []
    rows = []
    for name, conn in hub.connections.items():
        row: dict[str, Any] = {
            "name": name,
            "transport": conn.config.transport,
            "target": conn.config.describe(),
            "trusted": conn.config.trusted,
            "timeoutS": conn.config.timeout_s,
        }
        if start:
            began = time.monotonic()
            errors = await hub.start([name])
            row["seconds"] = round(time.monotonic() - began, 2)
            row["status"] = "error" if name in errors else "ok"
            if name in errors:
                row["error"] = errors[name]
        else:
            row["status"] = (
                "running" if conn.alive else (hub.errors.get(name) and "error") or "not started"
            )
            if name in hub.errors:
                row["error"] = hub.errors[name]
        row["tools"] = [t.name for t in conn.tools]
        rows.append(row)
    return rows


def format_listing(tools: list[dict[str, Any]], servers: list[dict[str, Any]], mode: str) -> str:
    lines = [f"tools (approval mode: {mode}):"]
    for t in tools:
        flags = ", ".join(
            f
            for f in (
                "read-only" if t["readOnly"] else "",
                EFFECT_WORDS.get(EffectClass(t.get("effect") or "workspace"), ""),
            )
            if f
        )
        lines.append(f"  {t['name']}")
        lines.append(f"      {t['source']}" + (f"; {flags}" if flags else ""))
        lines.append(f"      approval: {t['approval']} · after a crash: {t['resume']}")
    if servers:
        lines.append("")
        lines.append("MCP servers:")
        for s in servers:
            head = f"  {s['name']}: {s['transport']} {s['target']}"
            head += (
                " (trusted)"
                if s["trusted"]
                else " (not trusted: its annotations neither spare questions nor re-run calls)"
            )
            lines.append(head)
            status = s["status"]
            if status == "ok":
                status = f"ok: started in {s.get('seconds', 0):g} s, {len(s['tools'])} tool(s)"
            elif status == "error":
                status = f"error: {s.get('error', '')}"
            elif status == "not started":
                status = (
                    "not started yet (starts on first use; `xclaw tools --check` starts it now)"
                )
            lines.append(f"    {status}")
    return "\n".join(lines)
