"""[cli] Offline commands over the record: sessions, steps, trace, rollback, fork, export.

They open the database directly (no server needed) and work while a server runs on the same
file: SQLite's WAL and busy timeout let a CLI rollback and a serving gateway share it. What
they print from the record is redacted first (xclaw/cli/redaction.py), as a frame would be.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

import click
from rich.console import Console

from xclaw.cli.exit_status import EXIT_FAILED, EXIT_USAGE, fail, fail_on
from xclaw.cli.redaction import output_redactor
from xclaw.config.settings import load_settings
from xclaw.errors import SessionBusy, StepNotFound, XclawError
from xclaw.llm.prices import PriceTable
from xclaw.store import Access, open_store
from xclaw.store.base import LeaseStore, RecordReader, Store, TeamStore
from xclaw.store.common import build_tree
from xclaw.store.leases import Lease, LeaseInfo, new_worker_id
from xclaw.store.steps.model import Status, Step, display_id, session_state
from xclaw.store.teams.sql import SessionAction
from xclaw.views.outside_effects import outside_note, outside_steps, owned_note
from xclaw.wire.protocol import llm_usage, session_json, step_json, tree_json

if TYPE_CHECKING:
    pass
from xclaw.terminal.text import SafeConsole, json_for_terminal, json_text_for_terminal
from xclaw.views.record import format_sessions, format_steps, format_tree, session_cost

F = TypeVar("F", bound=Callable[..., Any])

# How each command may use its database (xclaw.store.access): given as is, or decided from
# the command's own arguments (fsck writes only with --repair).
AccessRule = Access | Callable[[dict[str, Any]], Access]


def _out() -> Console:
    # Plain text: ids and JSON must not be restyled or wrapped.
    return SafeConsole(highlight=False, soft_wrap=True, markup=False, emoji=False)


def _fail(message: str, code: int) -> NoReturn:
    fail(message, code)


def _dump(data: Any) -> str:
    return json_for_terminal(data)


def _prices() -> PriceTable:
    """Prices for the cost columns: the providers' prices plus xclaw.yaml's `prices:`."""
    return PriceTable.with_overrides(load_settings().prices)


_DB_HELP = {
    Access.READ: "An existing xclaw database, only read: never created, upgraded or changed.",
    Access.WRITE: "An existing xclaw database (one of an older xclaw is upgraded).",
    Access.CREATE: "Created if there is none; another program's file is refused.",
}
_DB_HELP_BY_OPTION = "Only read, unless an option here writes (an existing xclaw database)."


def with_store(
    access: AccessRule, *, before: Callable[[dict[str, Any]], None] | None = None
) -> Callable[[F], F]:
    """Add --db and open the store as `access` allows (a reading command: an existing xclaw
    database, nothing written), turning every error into one line and its exit status.
    `before` checks the arguments first (and may put what it read into them, as import's
    parsed file): a wrong call is refused before any database is opened."""

    def decorate(fn: F) -> F:
        return _store_command(fn, access, before)

    return decorate


def _store_command(fn: F, access: AccessRule, before: Callable[[dict[str, Any]], None] | None) -> F:

    @click.option(
        "--db",
        "db",
        default=None,
        metavar="PATH|URL",
        help="SQLite file or postgresql:// URL (default: $XCLAW_DB or $XCLAW_HOME/xclaw.db). "
        + (_DB_HELP[access] if isinstance(access, Access) else _DB_HELP_BY_OPTION),
    )
    @functools.wraps(fn)
    def wrapper(*args: Any, db: str | None, **kwargs: Any) -> Any:
        try:
            if before is not None:
                before(kwargs)
            # Read whether or not --db is given: a bad configuration stops every command the
            # same way (exit 2), before anything is opened.
            settings = load_settings()
            store = open_store(
                db or settings.database,
                access=access(kwargs) if callable(access) else access,
                blob_store=settings.blob_store,
                blob_grace_s=settings.blob_grace_s,
            )
        except XclawError as e:
            fail_on(e)
        except OSError as e:
            _fail(f"cannot open the database: {e}", EXIT_FAILED)
        try:
            if isinstance(kwargs.get("session_id"), str):
                # Every command taking a session id takes a unique prefix of one (as git).
                kwargs["session_id"] = store.record.resolve_session(kwargs["session_id"]).session_id
            return fn(store, *args, **kwargs)
        except StepNotFound as e:
            # Offline, the listing that shows step ids is `xclaw steps`, not /steps.
            fail_on(
                e, e.message.replace("shown by /steps", f"shown by `xclaw steps {e.session_id}`")
            )
        except XclawError as e:
            fail_on(e)
        finally:
            store.close()

    return wrapper  # type: ignore[return-value]


def workspace_option(fn: F) -> F:
    """--workspace ROOT, for the commands that touch session workspaces."""
    return click.option(
        "--workspace",
        "workspace",
        default=None,
        metavar="ROOT",
        help="Workspace root (default: xclaw.yaml's workspace_root or $XCLAW_HOME/workspaces).",
    )(fn)


def workspaces_for(store: Store, root: str | None) -> Any:
    """The one place rollback and fork go through, so the files follow the record
    (files follow memory): xclaw.workspace.timetravel.Workspaces."""
    from xclaw.workspace.timetravel import Workspaces

    settings = load_settings()
    return Workspaces.from_settings(
        store, settings.sandbox_setup(), Path(root).expanduser() if root else None
    )


def _busy(info: LeaseInfo, what: str) -> SessionBusy:
    return SessionBusy(
        f"session {info.session_id} has a run in flight on worker {info.owner} (lease "
        f"#{info.token}, renewed while it runs); to {what} now would race it. Wait for its "
        "reply, or stop it (Ctrl+C in xclaw chat, Stop on the page, a cancel frame), then "
        "try again"
    )


def refuse_while_driven(store: Store, session_id: str, what: str) -> None:
    """SessionBusy, naming the worker, while another process drives the session."""
    info = store.leases.lease_info(session_id)
    if info.live:
        raise _busy(info, what)


@contextlib.contextmanager
def holding_lease(store: Store, session_id: str, what: str) -> Iterator[Lease]:
    """The session's lease, held by this command while it changes the session (one driver):
    SessionBusy, naming the worker, when a live run holds it."""
    from xclaw.config.settings import load_settings

    ttl = load_settings().lease_ttl_s
    worker = f"cli:{new_worker_id()}"
    # Registered like a server's worker, so a command killed half-way (SIGKILL, power) leaves
    # a lease the next run takes at once, not one that blocks the session until it expires.
    store.leases.register_worker(worker, {"command": what})
    try:
        lease = store.leases.acquire_lease(session_id, worker, ttl)
        if lease is None:
            raise _busy(store.leases.lease_info(session_id), what)
        try:
            yield lease
        finally:
            store.leases.release_lease(lease)
    finally:
        store.leases.unregister_worker(worker)


STATES = ("running", "paused", "waiting", "budget", "interrupted", "new", "success", "failed")


class _Listing(Protocol):
    """`xclaw sessions`: the sessions, and which of them a live lease drives."""

    @property
    def record(self) -> RecordReader: ...

    @property
    def leases(self) -> LeaseStore: ...


@click.command("sessions", short_help="List sessions, most recently updated first.")
@click.argument("search", required=False, default=None, metavar="[WORD]")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of a table.")
@click.option(
    "--status",
    "state",
    type=click.Choice(STATES, case_sensitive=False),
    default=None,
    help="Only sessions in this state (running: a run is in flight now; waiting: for your "
    "next instruction).",
)
@click.option(
    "-n",
    "limit",
    type=click.IntRange(min=1),
    default=None,
    help="Only the N most recently updated sessions.",
)
@with_store(Access.READ)
def sessions_cmd(
    store: _Listing, search: str | None, as_json: bool, state: str | None, limit: int | None
) -> None:
    """List the sessions of a database, most recently updated first; WORD keeps those whose
    title or id contains it (case-insensitive)."""
    table = _prices()
    r = output_redactor()
    # Redacted before the search: a WORD must not find what the listing would not show.
    found = [
        r.session(s) for s in store.record.list_sessions(limit=None if (search or state) else limit)
    ]
    busy = running_now(store.leases)
    if search:
        word = search.lower()
        found = [s for s in found if word in s.title.lower() or word in s.session_id.lower()]
    if state:
        found = [s for s in found if session_state(s, busy=busy(s.session_id)).key == state.lower()]
    if limit is not None:
        found = found[:limit]
    costs = {s.session_id: session_cost(store.record.steps(s.session_id), table) for s in found}
    if as_json:
        click.echo(
            _dump(
                [
                    {**session_json(s, busy=busy(s.session_id)), **costs[s.session_id].to_json()}
                    for s in found
                ]
            )
        )
    elif not found and (search or state):
        _out().print("No session matches.")
    else:
        _out().print(format_sessions(found, costs, busy=busy))


def running_now(store: LeaseStore) -> Callable[[str], bool]:
    """Is a run of this session in flight right now, anywhere? The `busy` of session_state
    for commands that run without a server: a run holds a live lease on its session."""
    statuses = (Status.RUNNING, Status.PAUSED)
    live = {info.session_id for info in store.leases(statuses=statuses) if info.run_in_flight}
    return live.__contains__


@click.command("steps", short_help="The latest steps of a session (like /steps).")
@click.argument("session_id", metavar="SESSION")
@click.option(
    "-n",
    "n",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="How many of the latest steps.",
)
@click.option("--json", "as_json", is_flag=True, help="A JSON array of steps.")
@with_store(Access.READ)
def steps_cmd(store: Store, session_id: str, n: int, as_json: bool) -> None:
    """The latest steps of a session, with the ids /rollback and /fork take."""
    table = _prices()
    r = output_redactor()
    session = r.session(store.record.get_session(session_id))
    steps = [r.step(s) for s in store.record.latest_steps(session_id, n)]
    if as_json:
        click.echo(_dump([step_json(s, table) for s in steps]))
    else:
        acts = [
            (a.kind, a.user, a.created_at, a.detail) for a in actions_of(store.teams, session_id)
        ]
        _out().print(format_steps(steps, session, table, offline=True, actions=r(acts)))


@click.command("trace", short_help="The step tree of a session, with times and tokens.")
@click.argument("session_id", metavar="SESSION")
@click.option("--json", "as_json", is_flag=True, help="The tree as nested JSON.")
@with_store(Access.READ)
def trace_cmd(store: Store, session_id: str, as_json: bool) -> None:
    """The step tree of a session: which decision caused which step, with times and tokens."""
    table = _prices()
    store.record.get_session(session_id)
    tree = build_tree([output_redactor().step(s) for s in store.record.steps(session_id)])
    if as_json:
        click.echo(_dump([tree_json(n, table) for n in tree]))
    else:
        _out().print(format_tree(tree, table))


@click.command("rollback", short_help="Rewind a session to just before a step.")
@click.argument("session_id", metavar="SESSION")
@click.argument("step", metavar="STEP", required=False)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--accept-irreversible",
    is_flag=True,
    help="Go on although outside effects nothing undoes stay done (they are named first).",
)
@click.option(
    "--retry", is_flag=True, help="A rollback that stopped half-way: run what failed again."
)
@click.option("--abandon", is_flag=True, help="Stop a rollback that stopped half-way (no STEP).")
@workspace_option
@with_store(Access.WRITE)
def rollback_cmd(
    store: Store,
    session_id: str,
    step: str | None,
    yes: bool,
    accept_irreversible: bool,
    retry: bool,
    abandon: bool,
    workspace: str | None,
) -> None:
    """Delete STEP and every later step of SESSION; it then waits for a new instruction.

    STEP is s0005, 5 or the full step id. The session's workspace files go back to their
    state just before STEP as well (from its snapshots). What the deleted steps did outside
    the workspace is undone first by each tool's declared compensation (the row deleted,
    the object removed), the latest first; what nothing undoes (an email sent) is named and
    needs --accept-irreversible. A rollback cut short (killed) is finished by running the
    same command again; one whose compensation failed waits for --retry,
    --accept-irreversible or --abandon.

    Refused while a server runs the session (its lease is live): a rollback never races a
    run. A server serving the session tells its clients, who get the new history at once.
    """
    if abandon == (step is not None):
        _fail("give STEP, or --abandon alone (see xclaw rollback --help)", EXIT_USAGE)
    refuse_while_driven(store, session_id, "roll it back")
    workspaces = workspaces_for(store, workspace)
    undoing = _Undoing(store, workspaces)
    try:
        if abandon:
            with holding_lease(store, session_id, "abandon its rollback") as lease:
                plan = undoing.run(undoing.rollbacks.abandon(session_id, lease, _CLI_BY))
            store.teams.record_action(session_id, "rollback", None, {"abandoned": plan.display_id})
            _out().print(
                f"[rollback] the rollback {plan.display_id} is abandoned: nothing more is "
                "undone, memory and files stay as they are"
            )
            return
        assert step is not None
        target = store.record.get_step(session_id, step)
        preview = undoing.run(undoing.rollbacks.preview(session_id, target.seq))
        shown = output_redactor().text(preview.text()) if not preview.plain else ""
        if not yes:
            later = len(store.record.steps(session_id, after_seq=target.seq - 1))
            if shown:
                click.secho(shown, fg="yellow", err=True)
            click.confirm(
                f"Delete {target.display_id} and everything after it ({later} step(s)) "
                f"from session {session_id}"
                + (", undoing what is listed above?" if preview.to_undo else "?"),
                abort=True,
                err=True,
            )
            if preview.not_undone and not accept_irreversible:
                accept_irreversible = click.confirm(
                    f"{len(preview.not_undone)} outside effect(s) stay done (listed above); "
                    "roll back anyway, leaving them done?",
                    abort=True,
                    err=True,
                )
        # Held while it runs: no server starts a run of the session meanwhile (one driver).
        with holding_lease(store, session_id, "roll it back") as lease:
            outcome = undoing.run(
                undoing.rollbacks.rollback(
                    session_id,
                    target.seq,
                    lease=lease,
                    by=_CLI_BY,
                    accept_irreversible=accept_irreversible,
                    retry=retry,
                ),
                renew=lease,
            )
    finally:
        undoing.close()
    result = outcome.result
    detail: dict[str, Any] = {"stepId": display_id(result.target_seq), "deleted": result.deleted}
    if outcome.compensated:
        detail["compensated"] = [c.display_id for c in outcome.compensated]
    # Who did it: the admin, whoever may open the database (docs/teams.md).
    store.teams.record_action(session_id, "rollback", None, detail)
    out = _out()
    out.print(
        f"[rollback] session reset to before step {display_id(result.target_seq)} — "
        f"send your new instruction ({result.deleted} step(s) deleted)"
    )
    if result.restore is not None and result.restore.manifest is not None:
        files = sum(1 for e in result.restore.manifest.values() if "hash" in e or "link" in e)
        out.print(
            f"[rollback] workspace restored to its state before {display_id(result.target_seq)}"
            f" ({files} file(s))"
        )
    if outcome.text():
        out.print(output_redactor().text(outcome.text()))
    if (note := workspaces.env_notes.pop(session_id, None)) is not None:
        out.print(f"[rollback] {note}")


# Who asks for a rollback from the command line, as its plan records it.
_CLI_BY = {"kind": "person", "client": "cli", "via": "terminal"}


class _Undoing:
    """What `xclaw rollback` undoes outside effects with: the tools of xclaw.yaml (its MCP
    servers started on first need), on an event loop of its own."""

    def __init__(self, store: Store, workspaces: Any) -> None:
        from xclaw.runtime.rollbacks import Rollbacks
        from xclaw.runtime.wiring import default_toolbox

        settings = load_settings()
        self.store = store
        self.ttl = settings.lease_ttl_s
        self.toolbox = default_toolbox(settings)
        self.loop = asyncio.new_event_loop()
        self.rollbacks = Rollbacks(
            store,
            self._tools,
            workspaces,
            output_redactor(),
            workspace_of=self.toolbox.workspace,
        )

    async def _tools(self) -> Any:
        for server, why in (await self.toolbox.prepare()).items():
            click.secho(f"[tools] MCP server {server}: {why}", fg="yellow", err=True)
        return self.toolbox.tools

    def run(self, work: Any, renew: Any = None) -> Any:
        """`work` to its end; with `renew` (the command's lease), the lease renewed while it
        runs (a compensation may take longer than the lease lasts)."""

        async def renewing() -> Any:
            if renew is None:
                return await work
            lease = [renew]

            async def keep() -> None:
                while True:
                    await asyncio.sleep(self.ttl / 3)
                    lease[0] = await asyncio.to_thread(
                        self.store.leases.renew_lease, lease[0], self.ttl
                    )

            keeper = asyncio.ensure_future(keep())
            try:
                return await work
            finally:
                keeper.cancel()

        return self.loop.run_until_complete(renewing())

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.toolbox.close())
        finally:
            self.loop.close()


@click.command("fork", short_help="Branch a new session off a step.")
@click.argument("session_id", metavar="SESSION")
@click.argument("step", metavar="STEP")
@click.option("--title", default=None, help="Title of the new session.")
@click.option("--json", "as_json", is_flag=True, help="The new session as JSON.")
@workspace_option
@with_store(Access.WRITE)
def fork_cmd(
    store: Store,
    session_id: str,
    step: str,
    title: str | None,
    as_json: bool,
    workspace: str | None,
) -> None:
    """Copy SESSION up to and including STEP into a new session; the original is kept.
    The new session's workspace holds the files as they were just after STEP."""
    r = output_redactor()
    target = store.record.get_step(session_id, step)
    steps = store.record.steps(session_id)
    outside = r.text(outside_note(outside_steps(steps, target.seq + 1)))
    owned = r.text(owned_note(steps, target.seq, session_id))
    title = None if title is None else r.text(title)  # it goes into the record
    forked = workspaces_for(store, workspace).fork(session_id, step, title)
    store.teams.record_action(
        forked.session_id,
        "fork",
        None,
        {"fromSessionId": session_id, "fromStepId": target.display_id},
    )
    if as_json:
        click.echo(_dump(r(session_json(forked))))
        return
    out = _out()
    out.print(f"[fork] new session created: {forked.session_id}")
    out.print(
        f"continue on the forked branch with: xclaw chat --session {forked.session_id} "
        f'(or xclaw run --session {forked.session_id} "…")'
    )
    out.print(f"original session {session_id} is unchanged.")
    if outside:
        out.print(f"[fork] in the original session after that step, {outside}")
    if owned:
        out.print(f"[fork] {owned}")


def who_did(teams: TeamStore, session_id: str) -> dict[str, Any]:
    """The export's `owner` (absent: the admin's) and `actions` (absent: none) of a session,
    as the HTTP API's export gives them (docs/teams.md)."""
    out: dict[str, Any] = {}
    if not teams.users():
        return out  # alone, everything is the admin's doing: the export stays as it was
    owner = teams.session_owner(session_id)
    if owner is not None:
        out["owner"] = owner
    acts = teams.session_actions(session_id)
    if acts:
        out["actions"] = [a.to_json() for a in acts]
    return out


def actions_of(teams: TeamStore, session_id: str) -> list[SessionAction]:
    """What people did to the session that no step records (docs/teams.md); listed once
    the database has users (alone, everything is the admin's doing)."""
    return teams.session_actions(session_id) if teams.users() else []


def _one_or_all(args: dict[str, Any]) -> None:
    if args["everything"] == (args["session_id"] is not None):
        _fail("give either a SESSION or --all", EXIT_USAGE)


@click.command("export", short_help="Sessions and their steps as JSON Lines (see xclaw import).")
@click.argument("session_id", metavar="SESSION", required=False)
@click.option("--all", "everything", is_flag=True, help="Every session of the database.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='One JSON document {"session": …, "steps": […]} (with --all: an array of them).',
)
@with_store(Access.READ, before=_one_or_all)
def export_cmd(store: Store, session_id: str | None, everything: bool, as_json: bool) -> None:
    """JSON Lines: the session on the first line, then one line per step in order (with
    --all, every session so); --json: one JSON document instead. The session carries the
    totals: tokens by kind and the estimated cost. `xclaw import` reads the JSON Lines back,
    here or into another database. Credentials (docs/security.md) show as [REDACTED]."""
    from xclaw.store.transfer.format import export_lines

    table = _prices()
    r = output_redactor()
    record = store.record
    sessions = record.list_sessions() if everything else [record.get_session(session_id)]  # type: ignore[arg-type]
    if as_json:
        docs = []
        for session in sessions:
            steps = store.record.steps(session.session_id)
            head = {
                **session_json(session),
                **session_cost(steps, table).to_json(),
                **who_did(store.teams, session.session_id),
            }
            docs.append(r({"session": head, "steps": [step_json(s, table) for s in steps]}))
        click.echo(_dump(docs if everything else docs[0]))
        return
    for session in sessions:
        extra = who_did(store.teams, session.session_id)

        def totals(steps: list[Step], extra: dict[str, Any] = extra) -> dict[str, Any]:
            return {**session_cost(steps, table).to_json(), **extra}

        lines = export_lines(
            store,
            [session],
            totals=totals,
            redact=r,
            step_extra=lambda st: llm_usage(st, table),
        )
        for line in lines:
            click.echo(json_text_for_terminal(line))  # hostile titles and outputs: inert


def register(cli: click.Group) -> None:
    for command in (sessions_cmd, steps_cmd, trace_cmd, rollback_cmd, fork_cmd, export_cmd):
        cli.add_command(command)
