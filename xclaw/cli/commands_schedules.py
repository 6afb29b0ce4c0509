"""[cli] `xclaw schedule` and `xclaw hook`: work that starts by itself (docs/schedules.md). Run
where the database is; every `xclaw serve` on it fires the schedules and takes the webhooks.

A webhook's secret is printed once, when it is made: the sender signs each request with it.
"""

from __future__ import annotations

import datetime as dt
import json
import time

import click

from xclaw.cli.commands_store import with_store
from xclaw.people.teams import SERVER_TOKEN, Identity
from xclaw.schedules.making import add_hook, add_schedule, change_schedule, remove_hook
from xclaw.schedules.spec import Kind, When
from xclaw.store import Access
from xclaw.store.base import Store
from xclaw.store.schedules.sql import Schedule

_AS_HELP = (
    "Make it as this user (recorded as its creator; their rights on the session are checked "
    "now and at each fire). Default: the admin."
)


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _who(store: Store, user: str | None) -> Identity:
    if user is None:
        return SERVER_TOKEN

    found = store.teams.get_user(user)
    if found is None:
        raise click.UsageError(f"no user named {user!r} (xclaw users list)")
    return Identity(user, found.role)


def _describe(s: Schedule) -> str:
    return When(Kind(s.kind), s.spec, s.tz, s.anchor).describe()


@click.group("schedule", short_help="Messages sent to a session by a clock.")
def schedule_group() -> None:
    """Schedules: a message sent to a session (or to a new fork of a template session) at
    each tick of a cron expression, of a period, or once at a moment. Every `xclaw serve` on
    the database fires them, each tick once across workers and kills (docs/schedules.md)."""


@schedule_group.command("add", short_help="Add a schedule; prints its id.")
@click.option("--cron", "cron", metavar="EXPR", help='Five fields: "0 9 * * 1-5".')
@click.option("--every", "every", metavar="PERIOD", help="A period: 30s, 30m, 2h, 1d.")
@click.option("--at", "at", metavar="TIME", help="Once, at an ISO 8601 time: 2026-12-24T09:00.")
@click.option("--session", "session", metavar="ID", help="The session the message goes to.")
@click.option(
    "--fork-of", "fork_of", metavar="ID", help="A template session: each fire forks it anew."
)
@click.option("--message", "-m", "message", required=True, help="The message it sends.")
@click.option(
    "--catch-up",
    type=click.Choice(["skip", "once", "all"]),
    default="skip",
    show_default=True,
    help="Ticks missed while no server ran: none of them, one for all, or each.",
)
@click.option("--tz", default="UTC", show_default=True, help="The time zone of --cron and --at.")
@click.option("--as", "as_user", metavar="USER", default=None, help=_AS_HELP)
@click.option("--json", "as_json", is_flag=True, help="The schedule as JSON.")
@with_store(Access.WRITE)
def schedule_add(
    store: Store,
    cron: str | None,
    every: str | None,
    at: str | None,
    session: str | None,
    fork_of: str | None,
    message: str,
    catch_up: str,
    tz: str,
    as_user: str | None,
    as_json: bool,
) -> None:
    """Add a schedule: one of --cron, --every, --at; one of --session, --fork-of."""
    given = [(k, v) for k, v in ((Kind.CRON, cron), (Kind.EVERY, every), (Kind.AT, at)) if v]
    if len(given) != 1:
        raise click.UsageError("give one of --cron, --every, --at")
    if (session is None) == (fork_of is None):
        raise click.UsageError("give one of --session, --fork-of")
    kind, text = given[0]
    made = add_schedule(
        store,
        _who(store, as_user),
        kind=kind,
        when=text,
        tz=tz,
        session=session,
        fork_of=fork_of,
        message=message,
        catch_up=catch_up,
        now_ms=int(time.time() * 1000),
    )
    if as_json:
        click.echo(json.dumps(made.to_json()))
        return
    click.echo(made.schedule_id)
    click.echo(f"{_describe(made)}; first fire {_when(made.next_fire)}", err=True)


@schedule_group.command("list", short_help="The schedules, their next fire and counts.")
@click.option("--json", "as_json", is_flag=True, help="A JSON array.")
@with_store(Access.READ)
def schedule_list(store: Store, as_json: bool) -> None:
    rows = store.schedules.schedules()
    if as_json:
        click.echo(json.dumps([s.to_json() for s in rows]))
        return
    if not rows:
        click.echo("no schedules (xclaw schedule add)")
        return
    for s in rows:
        where = f"session {s.session_id}" if s.session_id else f"fork of {s.fork_of}"
        state = "paused" if s.paused else f"next {_when(s.next_fire)}"
        click.echo(
            f"{s.schedule_id}  {_describe(s)}  {where}  {state}  fired {s.fired}"
            f" skipped {s.skipped}  catch-up {s.catch_up}  by {s.created_by or 'admin'}"
            f"  {json.dumps(s.message[:60])}"
        )


def _change(store: Store, schedule_id: str, as_user: str | None, paused: bool | None) -> None:
    change_schedule(store, _who(store, as_user), schedule_id, paused=paused)


@schedule_group.command("pause", short_help="Stop a schedule firing (until resumed).")
@click.argument("schedule_id")
@click.option("--as", "as_user", metavar="USER", default=None, help="Act as this user.")
@with_store(Access.WRITE)
def schedule_pause(store: Store, schedule_id: str, as_user: str | None) -> None:
    _change(store, schedule_id, as_user, True)
    click.echo(f"paused {schedule_id}")


@schedule_group.command("resume", short_help="Fire a paused schedule again.")
@click.argument("schedule_id")
@click.option("--as", "as_user", metavar="USER", default=None, help="Act as this user.")
@with_store(Access.WRITE)
def schedule_resume(store: Store, schedule_id: str, as_user: str | None) -> None:
    """Its ticks during the pause are missed ones: its catch-up policy decides."""
    _change(store, schedule_id, as_user, False)
    click.echo(f"resumed {schedule_id}")


@schedule_group.command("remove", short_help="Remove a schedule (its fires stay recorded).")
@click.argument("schedule_id")
@click.option("--as", "as_user", metavar="USER", default=None, help="Act as this user.")
@with_store(Access.WRITE)
def schedule_remove(store: Store, schedule_id: str, as_user: str | None) -> None:
    _change(store, schedule_id, as_user, None)
    click.echo(f"removed {schedule_id}")


@schedule_group.command("fires", short_help="A schedule's or webhook's latest fires.")
@click.argument("source")
@click.option("--json", "as_json", is_flag=True, help="A JSON array.")
@with_store(Access.READ)
def schedule_fires(store: Store, source: str, as_json: bool) -> None:
    """SOURCE: a schedule id or a webhook name. Newest first: state, note, the step."""
    fires = store.schedules.fires_of(source)
    if as_json:
        click.echo(json.dumps([f.to_json() for f in fires]))
        return
    for f in fires:
        step = "-" if f.seq is None else f"s{f.seq:04d}"
        click.echo(
            f"{f.fire_id}  {f.state}  session {f.session_id} {step}"
            f"  deferred {f.deferrals}{'  ' + f.note if f.note else ''}"
        )


@click.group("hook", short_help="Webhooks: a signed POST sends a message to a session.")
def hook_group() -> None:
    """Webhooks: `POST /hooks/NAME` on the gateway, signed with the hook's secret
    (HMAC-SHA256; headers in docs/schedules.md), sends the hook's template, filled from the
    request's JSON, to its session; a delivery id runs once however often it is sent."""


@hook_group.command("add", short_help="Add a webhook; prints its secret (once) and URL.")
@click.argument("name")
@click.option("--session", "session", metavar="ID", required=True, help="Its session.")
@click.option(
    "--template",
    required=True,
    help="The message: {body} is the request's body, {a.b} a field of its JSON.",
)
@click.option("--as", "as_user", metavar="USER", default=None, help=_AS_HELP)
@with_store(Access.WRITE)
def hook_add(store: Store, name: str, session: str, template: str, as_user: str | None) -> None:
    hook = add_hook(
        store,
        _who(store, as_user),
        name=name,
        session=session,
        template=template,
        now_ms=int(time.time() * 1000),
    )
    click.echo(hook.secret)
    click.echo(
        f"this is the secret of webhook {name}, shown once: the sender signs with it. "
        f"URL: POST http://HOST:PORT/hooks/{name}",
        err=True,
    )


@hook_group.command("list", short_help="The webhooks (never their secrets).")
@click.option("--json", "as_json", is_flag=True, help="A JSON array.")
@with_store(Access.READ)
def hook_list(store: Store, as_json: bool) -> None:
    hooks = store.schedules.hooks()
    if as_json:
        click.echo(json.dumps([h.to_json() for h in hooks]))
        return
    if not hooks:
        click.echo("no webhooks (xclaw hook add)")
    for h in hooks:
        click.echo(
            f"{h.name}  /hooks/{h.name}  session {h.session_id}  by {h.created_by or 'admin'}"
            f"  {json.dumps(h.template[:60])}"
        )


@hook_group.command("remove", short_help="Remove a webhook: its URL answers 401 from then on.")
@click.argument("name")
@click.option("--as", "as_user", metavar="USER", default=None, help="Act as this user.")
@with_store(Access.WRITE)
def hook_remove(store: Store, name: str, as_user: str | None) -> None:
    remove_hook(store, _who(store, as_user), name)
    click.echo(f"removed {name}")


def register(cli: click.Group) -> None:
    cli.add_command(schedule_group)
    cli.add_command(hook_group)
