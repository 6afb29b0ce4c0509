"""[cli] `xclaw mcp`: xclaw's sessions as an MCP server on stdin/stdout, for MCP hosts (Claude
Desktop, Cursor, any MCP client; docs/mcp-server.md)."""

from __future__ import annotations

import click


def register(cli: click.Group) -> None:
    @cli.command(name="mcp")
    @click.option(
        "--db",
        default=None,
        help="Database (SQLite path or postgresql:// URL); default as every command finds it.",
    )
    @click.option("--model", default=None, help="Provider spec (as XCLAW_MODEL).")
    @click.option(
        "--approval",
        type=click.Choice(["ask", "auto-edits", "yolo"]),
        default=None,
        help="Approval mode (default: xclaw.yaml's approval.mode, ask).",
    )
    def mcp_cmd(db: str | None, model: str | None, approval: str | None) -> None:
        """Serve xclaw's sessions as an MCP server on stdin/stdout (an MCP host starts this
        command). Tools: send_message, session_status, list_sessions, steps, approve,
        rollback, fork, cancel; resources: the sessions and their transcripts. Runs happen
        in this process, on the same database, xclaw.yaml and settings as every command;
        an approval is asked through the host (elicitation) where it can ask, else answered
        with the approve tool. docs/mcp-server.md.
        """
        import asyncio

        from xclaw.acp.stderr_log import quiet_logging
        from xclaw.config.settings import load_settings

        load_settings(database=db, approval=approval)  # a bad configuration: said now, exit 2
        quiet_logging("xclaw mcp")
        asyncio.run(_serve(db, model, approval))


async def _serve(db: str | None, model: str | None, approval: str | None) -> None:
    import xclaw
    from xclaw.cli.startup import importing

    with importing():
        from xclaw.mcp_server.over_api import ApiSessions
        from xclaw.mcp_server.stdio import serve_stdio
        from xclaw.mcp_server.tools import build_server

        open_agent = xclaw.open  # imports the in-process API (xclaw/__init__.py)

    async with open_agent(db=db, model=model, approval=approval) as agent:
        await serve_stdio(build_server(ApiSessions(agent)))
