"""[cli] `xclaw container SESSION`: a session's container on this host — whether it runs, its
image and limits, and the processes xclaw's commands left running in it, each with the
lease epoch, worker and step that started it (docs/containers.md). Offline: it reads the
database for the session's pinned policy and asks podman, changing nothing."""

from __future__ import annotations

import json
from typing import Any

import click

from xclaw.cli.commands_store import _fail, with_store, workspace_option
from xclaw.cli.commands_workspace import out_console, workspace_root
from xclaw.cli.exit_status import EXIT_USAGE
from xclaw.store import Access
from xclaw.store.base import Store


@click.command("container", short_help="A session's container and what runs in it.")
@click.argument("session_id", metavar="SESSION")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@workspace_option
@with_store(Access.READ)
def container_cmd(store: Store, session_id: str, as_json: bool, workspace: str | None) -> None:
    """SESSION's container on this host (sandbox.isolation: container): its state, the policy
    the session is pinned to, and the processes still running in it that its commands
    started (background servers, databases), with the step that started each."""
    from xclaw.config.settings import load_settings
    from xclaw.errors import ConfigError
    from xclaw.runtime.sandbox_pin import recorded_policy
    from xclaw.sandbox.container.listing import session_processes
    from xclaw.sandbox.container.shared import containers_for

    session = store.record.get_session(session_id)
    settings = load_settings()
    if settings.sandbox.isolation != "container":
        _fail("sandbox.isolation is not container here: sessions run no container", EXIT_USAGE)
    try:
        containers = containers_for(settings.sandbox_setup(), workspace_root(workspace))
    except ConfigError as e:
        _fail(e.message, EXIT_USAGE)
    pinned = recorded_policy(session.metadata)
    # The list every client shows (the HTTP API, the Python API, /ps): one function.
    listing = session_processes(containers, session_id, settings.sandbox.isolation)
    processes = listing.processes
    report: dict[str, Any] = {
        "sessionId": session_id,
        "container": containers.name(session_id),
        "state": listing.state,
        "policy": None if pinned is None else pinned.to_json(),
        "processes": [p.to_json() for p in processes],
    }
    if as_json:
        click.echo(json.dumps(report))
        return
    out = out_console()
    state = "not on this host" if listing.state is None else listing.state
    out.print(f"container {report['container']}: {state}")
    if pinned is not None:
        out.print(f"policy: {pinned.words()}")
    if not processes:
        out.print("no process of its commands runs in it")
    for p in processes:
        step = "?" if p.seq is None else f"s{p.seq:04d}"
        out.print(f"  pid {p.pid}  epoch {p.epoch}  step {step}  {p.command}")


def register(cli: click.Group) -> None:
    cli.add_command(container_cmd)
