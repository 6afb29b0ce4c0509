"""[cli] `xclaw workers`: which worker drives which session, and until when (leases)."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from xclaw.cli.commands_store import with_store
from xclaw.runtime.agreement import RunConfig
from xclaw.store import Access
from xclaw.store.base import Store
from xclaw.store.leases import LeaseInfo, WorkerInfo
from xclaw.store.steps.model import Status


def _ago(ms: int, now: int) -> str:
    s = (now - ms) / 1000
    return f"{s:.0f}s ago" if s < 120 else f"{s / 60:.0f}m ago"


def _alive(alive: bool | None) -> str:
    return {True: "alive", False: "dead", None: "unknown"}[alive]


def _lease_state(info: LeaseInfo) -> str:
    if info.live:
        return f"driving, expires in {info.expires_in_s:.1f}s"
    if info.owner_alive is False and info.expires_at and info.expires_at > info.now:
        return "owner dead: free to take over"
    return f"free since {_ago(info.expires_at or info.now, info.now)}"


def _config(w: WorkerInfo) -> RunConfig | None:
    return RunConfig.from_json(w.info)


def _config_json(w: WorkerInfo) -> dict[str, Any]:
    """`models` and `approval` (null: a worker that registered without saying)."""
    config = _config(w)
    return {
        "models": None if config is None else list(config.models),
        "approval": None if config is None else config.approval,
    }


def _runs_with(w: WorkerInfo) -> tuple[str, str]:
    """(MODEL, APPROVAL) cells: the model chain, primary first, and the approval mode."""
    config = _config(w)
    if config is None:
        return "-", "-"
    return ",".join(config.models), config.approval


def workers_json(workers: list[WorkerInfo], leases: list[LeaseInfo]) -> dict[str, Any]:
    driving: dict[str, list[str]] = {}
    for lease in leases:
        if lease.live and lease.owner:
            driving.setdefault(lease.owner, []).append(lease.session_id)
    return {
        "workers": [
            {
                "workerId": w.worker_id,
                "host": w.host,
                "pid": w.pid,
                "alive": w.alive,
                "startedAt": w.started_at,
                "seenAt": w.seen_at,
                "info": w.info,
                # What it runs sessions with (None: it registered before workers said so).
                **_config_json(w),
                "sessions": driving.get(w.worker_id, []),
            }
            for w in workers
        ],
        "leases": [
            {
                "sessionId": i.session_id,
                "status": i.status.value,
                "state": i.state.key,
                "stateText": i.state.text,
                "owner": i.owner,
                "ownerAlive": i.owner_alive,
                "token": i.token,
                "expiresAt": i.expires_at,
                "expiresInS": round(i.expires_in_s, 3),
                "live": i.live,
            }
            for i in leases
        ],
    }


def format_workers(workers: list[WorkerInfo], leases: list[LeaseInfo]) -> str:
    now = time.time_ns() // 1_000_000
    if leases:
        now = leases[0].now
    data = workers_json(workers, leases)
    lines = []
    if not workers:
        lines.append("No workers registered.")
    else:
        width = max(len("WORKER"), *(len(w.worker_id) for w in workers))
        cells = [_runs_with(w) for w in workers]
        mw = max(len("MODEL"), *(len(m) for m, _ in cells))
        aw = max(len("APPROVAL"), *(len(a) for _, a in cells))
        lines.append(
            f"{'WORKER':<{width}}  {'STATE':<7}  {'SEEN':<9}  {'MODEL':<{mw}}  "
            f"{'APPROVAL':<{aw}}  SESSIONS DRIVEN"
        )
        for w, row, (model, approval) in zip(workers, data["workers"], cells, strict=True):
            driven = ", ".join(row["sessions"]) or "-"
            lines.append(
                f"{w.worker_id:<{width}}  {_alive(w.alive):<7}  {_ago(w.seen_at, now):<9}  "
                f"{model:<{mw}}  {approval:<{aw}}  {driven}"
            )
    if leases:
        lines.append("")
        sw = max(len("SESSION"), *(len(i.session_id) for i in leases))
        ow = max(len("OWNER"), *(len(i.owner or "-") for i in leases))
        # The session's state in the words of every other listing (session_state).
        tw = max(len("STATE"), *(len(i.state.text) for i in leases))
        lines.append(f"{'SESSION':<{sw}}  {'STATE':<{tw}}  {'OWNER':<{ow}}  {'TOKEN':>5}  LEASE")
        for i in leases:
            lines.append(
                f"{i.session_id:<{sw}}  {i.state.text:<{tw}}  {i.owner or '-':<{ow}}  "
                f"{i.token:>5}  {_lease_state(i)}"
            )
    return "\n".join(lines)


@click.command("workers", short_help="Workers on this database and the sessions they drive.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of tables.")
@click.option(
    "--all", "show_all", is_flag=True, help="Leases of finished sessions too (their last driver)."
)
@with_store(Access.READ)
def workers_cmd(store: Store, as_json: bool, show_all: bool) -> None:
    """The workers registered on the database (alive or dead, last heartbeat, the model chain
    and approval mode each runs sessions with) and the leases of unfinished sessions: each
    session's state in the words of `xclaw sessions` (Running only while a run is in flight),
    which worker drives it, its fencing token, when the lease expires.

    A session whose worker died is taken over by another worker once its lease expires, or
    at once when the worker is known dead.
    """
    statuses = None if show_all else (Status.RUNNING, Status.PAUSED)
    workers, leases = store.leases.workers(), store.leases.leases(statuses=statuses)
    if as_json:
        click.echo(json.dumps(workers_json(workers, leases), ensure_ascii=False))
    else:
        click.echo(format_workers(workers, leases))


def register(cli: click.Group) -> None:
    cli.add_command(workers_cmd)
