"""[cli] `xclaw users` and `xclaw share`: the people of a shared server and who sees which session
(docs/teams.md). Run where the database is, by whoever may open it: the server's admin.

A new token is printed once and never stored (only its SHA-256 is): it cannot be shown again,
only replaced (`xclaw users token NAME`). Every worker on the database sees a change within a
second: removing a user ends their open connections too.
"""

from __future__ import annotations

import json

import click

from xclaw.cli.commands_store import with_store
from xclaw.people.teams import (
    SHARE_ROLES,
    ShareRole,
    TeamError,
    UserRole,
    check_user_name,
    new_token,
    token_hash,
)
from xclaw.store import Access
from xclaw.store.base import Store


def _when(ms: int | None) -> str:
    import time

    if ms is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ms / 1000))


def _print_token(name: str, token: str) -> None:
    click.echo(token)
    click.echo(
        f"this is {name}'s token, shown once (only its hash is kept): give it to them. "
        f"They connect with `xclaw chat --url http://HOST:PORT --token …`, or open "
        f"http://HOST:PORT/?token=… in a browser.",
        err=True,
    )


@click.group("users", short_help="The people of a shared server and their tokens.")
def users_group() -> None:
    """The people who may use this server, each with a token of their own (docs/teams.md).

    The server's own token (XCLAW_TOKEN, or $XCLAW_HOME/token) stays the admin's. A member
    sees only the sessions they own or that are shared with them (`xclaw share`); an admin
    sees every session."""


@users_group.command("add", short_help="Add a user and print their token (once).")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice([r.value for r in UserRole]),
    default=UserRole.MEMBER.value,
    show_default=True,
    help="admin: every session; member: their own and those shared with them.",
)
@with_store(Access.WRITE)
def users_add(store: Store, name: str, role: str) -> None:
    """Add the user NAME; prints their new token on stdout, once."""
    check_user_name(name)
    token = new_token()
    store.teams.add_user(name, UserRole(role), token_hash(token))
    _print_token(name, token)


@users_group.command("list", short_help="The users, their roles, and when their token was made.")
@click.option("--json", "as_json", is_flag=True, help="A JSON array.")
@with_store(Access.READ)
def users_list(store: Store, as_json: bool) -> None:
    users = store.teams.users()
    if as_json:
        rows = [
            {
                "name": u.name,
                "role": u.role.value,
                "createdAt": u.created_at,
                "hasToken": u.token_hash is not None,
                "tokenCreatedAt": u.token_created_at,
            }
            for u in users
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    if not users:
        click.echo("no users: only the server's token (the admin's) works. Add one with")
        click.echo("  xclaw users add NAME [--role admin|member]")
        return
    click.echo(f"{'NAME':<24} {'ROLE':<7} {'TOKEN SINCE':<17} ADDED")
    for u in users:
        token = _when(u.token_created_at) if u.token_hash else "(proxy sign-on only)"
        click.echo(f"{u.name:<24} {u.role.value:<7} {token:<17} {_when(u.created_at)}")


@users_group.command("remove", short_help="Remove a user: their token stops working at once.")
@click.argument("name")
@with_store(Access.WRITE)
def users_remove(store: Store, name: str) -> None:
    """Remove NAME: their token is refused from now on by every server on this database, and
    their open connections are closed within a second. Their sessions stay, the admin's."""
    store.teams.remove_user(name)
    click.echo(f"user {name} removed; their sessions are the admin's now")


@users_group.command("token", short_help="Issue a new token for a user (the old one stops).")
@click.argument("name")
@with_store(Access.WRITE)
def users_token(store: Store, name: str) -> None:
    """A new token for NAME, printed once; their old token stops working at once."""
    token = new_token()
    store.teams.set_user_token(name, token_hash(token))
    _print_token(name, token)


@click.command("share", short_help="Share a session with a user, or stop sharing it.")
@click.argument("session_id", metavar="SESSION")
@click.argument("user", metavar="USER")
@click.option(
    "--role",
    type=click.Choice([r.value for r in SHARE_ROLES]),
    default=None,
    help="viewer: follows and reads it; approver: also answers approvals; collaborator: "
    "also sends messages, cancels, rolls back and forks.",
)
@click.option("--remove", is_flag=True, help="Stop sharing SESSION with USER.")
@with_store(Access.WRITE)
def share_cmd(store: Store, session_id: str, user: str, role: str | None, remove: bool) -> None:
    """Give USER a role in SESSION (a unique prefix of its id will do), or take it away with
    --remove. Logged in the session's record as done by the admin."""
    teams = store.teams
    if remove == (role is not None):
        raise TeamError("give either --role viewer|approver|collaborator or --remove")
    if remove:
        if teams.unshare_session(session_id, user, by=None):
            click.echo(f"session {session_id} is no longer shared with {user}")
        else:
            click.echo(f"session {session_id} was not shared with {user}")
        return
    assert role is not None
    had = teams.share_session(session_id, user, ShareRole(role), by=None)
    was = f" (was {had.value})" if had is not None else ""
    click.echo(f"session {session_id} shared with {user} as {role}{was}")


def register(cli: click.Group) -> None:
    cli.add_command(users_group)
    cli.add_command(share_cmd)
