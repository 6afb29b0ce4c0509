"""[cli] `xclaw budget show|set|grant`: the caps on model spend, what was spent and what is left
(docs/budgets.md). Run where the database is, by the server's admin; a running server sees a
change within seconds, and a session that waited for a budget it now has goes on where it
stopped (the server's sweep, or the next client that opens it, resumes it).
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

from xclaw.budgets.settings import CAPS
from xclaw.budgets.words import words
from xclaw.cli.commands_store import with_store
from xclaw.cli.exit_status import EXIT_USAGE, fail
from xclaw.config.settings import load_settings
from xclaw.runtime.budgets import check_caps, parse_target, report
from xclaw.store import Access
from xclaw.store.base import Store
from xclaw.store.steps.model import Status
from xclaw.store.steps.writes import BudgetStop, SetBudget


def _target(store: Store, ref: str) -> str:
    try:
        target = parse_target(ref)
    except ValueError as e:
        fail(str(e), EXIT_USAGE)
    if target.startswith("session:"):  # a unique prefix of an id, as everywhere
        return f"session:{store.record.resolve_session(target.removeprefix('session:')).session_id}"
    return target


def _show(store: Store, target: str, as_json: bool) -> None:
    shown = report(store, load_settings().budgets.caps(), target, time.time())
    if as_json:
        click.echo(json.dumps(shown, indent=2))
        return
    click.echo(f"{target} (UTC day {shown['day']}, month {shown['month']})")
    if not shown["caps"]:
        click.echo("  no cap applies")
    for cap in shown["caps"]:
        click.echo(f"  {words(cap)}")
    if "spent" in shown:
        click.echo(f"  spent by this session: {shown['spent']['tokens']} tokens")
    granted = shown.get("set", {})
    if granted.get("grantedTokens") or granted.get("grantedUsd"):
        click.echo(f"  granted: {granted['grantedTokens']} tokens, ${granted['grantedUsd']:.4f}")


def _go_on(store: Store, target: str) -> None:
    """A session that waits for a budget goes on (not awaiting input): a running server's
    sweep resumes it, or the next client that opens it."""
    if not target.startswith("session:"):
        sessions = [s for s in store.record.list_sessions() if s.state_key == "budget"]
    else:
        sessions = [store.record.get_session(target.removeprefix("session:"))]
    for s in sessions:
        if s.status is Status.RUNNING and s.state_key == "budget":
            store.record.write(BudgetStop(session_id=s.session_id, detail=None))
            click.echo(f"session {s.session_id} goes on where it stopped", err=True)


@click.group("budget", short_help="Caps on model spend: show, set, grant.")
def budget_group() -> None:
    """Caps on what sessions, people and the whole deployment spend on models, in tokens and
    (where a model's price is known) dollars; over xclaw.yaml's `budgets:` (docs/budgets.md).

    TARGET is a session id (or a unique prefix), session:ID, user:NAME or total."""


@budget_group.command("show", short_help="The caps that apply, spent and left.")
@click.argument("target", default="total")
@click.option("--json", "as_json", is_flag=True, help="As JSON.")
@with_store(Access.READ)
def budget_show(store: Store, target: str, as_json: bool) -> None:
    """What TARGET may spend, what it spent and what is left (default: total)."""
    _show(store, _target(store, target), as_json)


def _cap_options(fn: Any) -> Any:
    for key in reversed(list(CAPS)):
        unit = CAPS[key][2]
        fn = click.option(
            f"--{key.replace('_', '-')}",
            key,
            default=None,
            metavar="N|none",
            help=f"the {key} cap ({'whole tokens' if unit == 'tokens' else 'dollars'}; "
            "none: no cap)",
        )(fn)
    return fn


def _amount(key: str, text: str) -> float | None:
    if text.strip().lower() in ("none", "null", "off"):
        return None
    try:
        value = float(text)
    except ValueError:
        fail(f"--{key.replace('_', '-')}: {text!r} is no number (or none)", EXIT_USAGE)
    if value < 0 or value != value or value in (float("inf"), float("-inf")):
        fail(f"--{key.replace('_', '-')}: a cap is 0 or more", EXIT_USAGE)
    if CAPS[key][2] == "tokens" and value != int(value):
        fail(f"--{key.replace('_', '-')}: tokens are whole", EXIT_USAGE)
    return value


@budget_group.command("set", short_help="Set caps of a session, a user or the deployment.")
@click.argument("target")
@_cap_options
@with_store(Access.WRITE)
def budget_set(store: Store, target: str, **given: str | None) -> None:
    """Set TARGET's caps, over xclaw.yaml's: a session takes --session-*, user:NAME
    --user-*, total --total-*. A session waiting for a budget it now has goes on."""
    caps = {k: _amount(k, v) for k, v in given.items() if v is not None}
    if not caps:
        fail("nothing to set: give a cap (see --help)", EXIT_USAGE)
    resolved = _target(store, target)
    try:
        check_caps(resolved, caps)
    except ValueError as e:
        fail(str(e), EXIT_USAGE)
    store.record.write(SetBudget(target=resolved, caps=caps))
    _go_on(store, resolved)
    _show(store, resolved, False)


@budget_group.command("grant", short_help="Give a session more to spend; it goes on.")
@click.argument("session_id")
@click.option("--tokens", type=click.IntRange(min=1), default=None, help="Tokens to add.")
@click.option("--usd", type=click.FloatRange(min=0, min_open=True), default=None, help="Dollars.")
@with_store(Access.WRITE)
def budget_grant(store: Store, session_id: str, tokens: int | None, usd: float | None) -> None:
    """Add to SESSION_ID's allowance, over its caps; if it waits for a budget, it goes on
    where it stopped."""
    if tokens is None and usd is None:
        fail("give --tokens N or --usd X", EXIT_USAGE)
    target = f"session:{session_id}"
    store.record.write(SetBudget(target=target, grant_tokens=tokens or 0, grant_usd=usd or 0.0))
    _go_on(store, target)
    _show(store, target, False)


def register(cli: click.Group) -> None:
    cli.add_command(budget_group)
