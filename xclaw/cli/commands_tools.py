"""[cli] `xclaw tools`: every tool an agent would get here, with its source and policies."""

from __future__ import annotations

import asyncio
import sys

import click

from xclaw.errors import XclawError
from xclaw.terminal.text import json_for_terminal, printable


async def _listing(as_json: bool, check: bool) -> int:
    from xclaw.config.settings import load_settings
    from xclaw.recorder.redact import Redactor
    from xclaw.runtime.wiring import default_toolbox
    from xclaw.tools.approval import ApprovalPolicy
    from xclaw.tools.listing import format_listing, server_rows, tool_rows

    settings = load_settings()
    toolbox = default_toolbox(settings)
    try:
        servers = await server_rows(toolbox.mcp, start=check)
        if check:
            await toolbox.prepare()  # adds the started servers' tools to the listing
        policy = ApprovalPolicy.from_settings(settings.tool_setup())
        tools = tool_rows(toolbox.tools, policy)
        warnings = toolbox.policy_warnings()
    finally:
        await toolbox.close()
    # Server settings hold `${VAR}` values substituted (args, URL, env echoed on stderr): as
    # everywhere else, every credential xclaw knows of is masked before it is shown.
    redact = Redactor(settings.secret_values())  # the MCP servers' ${VAR} values among them
    tools, servers, warnings = redact(tools), redact(servers), redact(warnings)
    if as_json:
        # Tool names and descriptions come from MCP servers: printed inert (xclaw.terminal.text).
        click.echo(
            json_for_terminal(
                {
                    "approvalMode": settings.approval.mode,
                    "tools": tools,
                    "servers": servers,
                    "warnings": warnings,
                },
                indent=2,
            )
        )
    else:
        click.echo(printable(format_listing(tools, servers, settings.approval.mode)))
        for why in warnings:
            click.secho(printable(f"warning: {why}"), fg="yellow", err=True)
    failed = any(s["status"] == "error" for s in servers) or bool(warnings)
    return 1 if check and failed else 0


def register(cli: click.Group) -> None:
    @cli.command("tools")
    @click.option(
        "--json", "as_json", is_flag=True, help="Tools (with input schemas) and servers as JSON."
    )
    @click.option(
        "--check",
        is_flag=True,
        help="Start every configured MCP server, list its tools, report failures (exit 1).",
    )
    def tools_cmd(as_json: bool, check: bool) -> None:
        """List every tool (built-in, Python, MCP) with its source, approval and resume policy.

        \b
        xclaw tools              built-in and Python tools; MCP servers as configured
        xclaw tools --check      also start each MCP server and list its tools
        xclaw tools --json       the same as JSON, with each tool's input schema
        """
        try:
            code = asyncio.run(_listing(as_json, check))
        except XclawError as e:
            click.secho(f"error: {e.message}", fg="red", err=True)
            sys.exit(e.exit_code)
        sys.exit(code)
