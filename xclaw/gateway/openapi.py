"""[gateway] The OpenAPI 3.1 description of `/api/`: the paths as api.py routes them, every body's
schema generated from the class that declares it (xclaw/wire/http_bodies.py, xclaw/wire/frames.py) —
the same classes the Python API's remote client reads the answers with."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from xclaw.wire.frames import STATES, SessionInfo, Step, TreeNode
from xclaw.wire.http_bodies import (
    AgentList,
    ApiError,
    ApprovalAnswer,
    ApprovalBody,
    BudgetCapsBody,
    BudgetGrantBody,
    BudgetReport,
    FireList,
    ForkAnswer,
    ForkBody,
    Health,
    HistoryAnswer,
    HookList,
    HookMade,
    NewHookBody,
    NewScheduleBody,
    NewSessionBody,
    QueueAnswer,
    RenameBody,
    RollbackAnswer,
    RollbackBody,
    RollbackPreview,
    ScheduleInfo,
    ScheduleList,
    SessionList,
    SessionProcesses,
    StepList,
    StepTree,
    ToolList,
    UnqueueAnswer,
)

_REF = "#/components/schemas/"
_SID = {
    "name": "sid",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "session id",
}


_TARGET = {
    "name": "target",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "session:<id> (or a session id), user:<name> or total",
}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _err(description: str) -> dict[str, Any]:
    return _json({"$ref": _REF + "Error"}, description)


_COMMON_ERRORS = {
    "401": _err("missing or wrong access token (code `unauthorized`)"),
    "403": _err(
        "browser Origin not allowed (code `forbidden_origin`), or the signed-in user may "
        "not do this to the session (code `forbidden`: a viewer's rollback, docs/teams.md)"
    ),
    "429": _err("too many failed sign-ins from this address (code `too_many_attempts`)"),
}
_SESSION_ERRORS = {
    **_COMMON_ERRORS,
    "404": _err(
        "no such session, or one the signed-in user has no part in (code `unknown_session`)"
    ),
}

_BUDGET_ERRORS = {
    **_SESSION_ERRORS,
    "400": _err("no such target or cap, or a bad amount (code `bad_request`)"),
}


def _op(
    summary: str,
    responses: dict[str, Any],
    *,
    params: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    errors: dict[str, Any] | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {**responses, **(errors or _SESSION_ERRORS)},
    }
    if params:
        op["parameters"] = params
    if body:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


# Each component is generated from the class that declares it (xclaw/wire/frames.py,
# xclaw/wire/http_bodies.py), under the names this document has always given the first four.
_COMPONENTS: tuple[type[BaseModel], ...] = (
    ApiError,
    SessionInfo,
    Step,
    TreeNode,
    SessionList,
    StepList,
    StepTree,
    HistoryAnswer,
    RollbackAnswer,
    RollbackPreview,
    ForkAnswer,
    ApprovalAnswer,
    QueueAnswer,
    UnqueueAnswer,
    SessionProcesses,
    Health,
    ToolList,
    AgentList,
    NewSessionBody,
    RenameBody,
    RollbackBody,
    ForkBody,
    ApprovalBody,
    ScheduleList,
    ScheduleInfo,
    FireList,
    HookList,
    HookMade,
    NewScheduleBody,
    NewHookBody,
    BudgetReport,
    BudgetCapsBody,
    BudgetGrantBody,
)
_NAMES = {"ApiError": "Error", "SessionInfo": "Session"}


def _name(model: type[BaseModel]) -> str:
    return _NAMES.get(model.__name__, model.__name__)


def _schemas() -> dict[str, Any]:
    """Every component's JSON Schema, $refs pointing into `components/schemas`."""
    _, top = models_json_schema(
        [(m, "validation") for m in _COMPONENTS], ref_template=_REF + "{model}"
    )
    defs: dict[str, Any] = top.get("$defs", {})
    text = json.dumps(defs)
    for old, new in _NAMES.items():
        text = text.replace(f'"{_REF}{old}"', f'"{_REF}{new}"')
    renamed: dict[str, Any] = json.loads(text)
    return {_NAMES.get(k, k): v for k, v in renamed.items()}


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": _REF + _name(model)}


@cache
def openapi_spec(version: str) -> dict[str, Any]:
    session = _ref(SessionInfo)
    busy = {"409": _err("a run is in flight (code `busy`)")}
    bad_step = {"400": _err("bad step id or request body (code `bad_step` / `bad_request`)")}
    step_ref = {"type": "string", "description": RollbackBody.model_fields["step_id"].description}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "xclaw gateway API",
            "version": version,
            "description": "Sessions and their trace steps. Every request carries the access token "
            "(Authorization: Bearer TOKEN, or ?token=TOKEN). The WebSocket protocol at /ws is "
            "described in docs/protocol.md, its frames in docs/frames.schema.json.",
        },
        "servers": [{"url": "/api"}],
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "query": {"type": "apiKey", "in": "query", "name": "token"},
            },
        },
        "security": [{"bearer": []}, {"query": []}],
        "paths": {
            "/health": {
                "get": _op(
                    "liveness, version, database, model, this worker and the sessions it drives",
                    {"200": _json(_ref(Health))},
                    errors=_COMMON_ERRORS,
                )
            },
            "/openapi.json": {
                "get": _op(
                    "this document", {"200": _json({"type": "object"})}, errors=_COMMON_ERRORS
                )
            },
            "/agents": {
                "get": _op(
                    "the agents a session may run here: xclaw's own (`default`) first, then "
                    "the ones xclaw.yaml declares (docs/agents.md)",
                    {"200": _json(_ref(AgentList))},
                    errors=_COMMON_ERRORS,
                )
            },
            "/tools": {
                "get": _op(
                    "every tool a session's agent may call (built-in, Python, MCP) with its "
                    "approval and resume policies, as `xclaw tools --json` lists them",
                    {"200": _json(_ref(ToolList))},
                    errors=_COMMON_ERRORS,
                )
            },
            "/sessions": {
                "get": _op(
                    "sessions, most recently updated first",
                    {"200": _json(_ref(SessionList))},
                    params=[
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "default": 100},
                        },
                        {
                            "name": "q",
                            "in": "query",
                            "schema": {"type": "string"},
                            "description": "only sessions whose title or id contains this "
                            "word (case-insensitive), as `xclaw sessions WORD`",
                        },
                        {
                            "name": "state",
                            "in": "query",
                            "schema": {"enum": list(STATES)},
                            "description": "only sessions in this state (docs/protocol.md, "
                            "Session state)",
                        },
                        {
                            "name": "prefix",
                            "in": "query",
                            "schema": {"type": "string"},
                            "description": "only sessions whose id starts with this",
                        },
                    ],
                    errors={**_COMMON_ERRORS, "400": _err("bad limit or state")},
                ),
                "post": _op(
                    "a new session, written now (with its title, as `/new TITLE`)",
                    {"201": _json(session)},
                    body=_ref(NewSessionBody),
                    errors={**_COMMON_ERRORS, "400": _err("bad body")},
                ),
            },
            "/sessions/{sid}": {
                "parameters": [_SID],
                "get": _op("one session", {"200": _json(session)}),
                "patch": _op(
                    "rename",
                    {"200": _json(session)},
                    body=_ref(RenameBody),
                    errors={**_SESSION_ERRORS, "400": _err("bad body")},
                ),
                "delete": _op(
                    "delete the session and its steps (forks live on)",
                    {"204": {"description": "deleted"}},
                    errors={**_SESSION_ERRORS, **busy},
                ),
            },
            "/sessions/{sid}/steps": {
                "parameters": [_SID],
                "get": _op(
                    "the latest N steps, oldest first",
                    {"200": _json(_ref(StepList))},
                    params=[
                        {
                            "name": "n",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 0, "default": 10},
                            "description": "how many; 0 for all",
                        }
                    ],
                    errors={**_SESSION_ERRORS, "400": _err("bad n")},
                ),
            },
            "/sessions/{sid}/tree": {
                "parameters": [_SID],
                "get": _op(
                    "the step tree (parent_step_id links): roots with their descendants",
                    {"200": _json(_ref(StepTree))},
                ),
            },
            "/sessions/{sid}/history": {
                "parameters": [_SID],
                "get": _op(
                    "the conversation as the `history` frame carries it",
                    {"200": _json(_ref(HistoryAnswer))},
                ),
            },
            "/sessions/{sid}/rollback": {
                "parameters": [_SID],
                "post": _op(
                    "undo the outside effects after the step (their compensations, latest "
                    "first), then rewind the session to just before it (it and every later "
                    "step are deleted, the files restored)",
                    {"200": _json(_ref(RollbackAnswer))},
                    body=_ref(RollbackBody),
                    errors={
                        **_SESSION_ERRORS,
                        **bad_step,
                        "409": _err(
                            "a run is in flight (`busy`); outside effects nothing undoes, not "
                            "accepted (`irreversible_effects`, with `effects`: the preview); a "
                            "compensation failed and the rollback waits (`compensation_failed`); "
                            "another rollback stopped half-way (`rollback_pending`)"
                        ),
                    },
                ),
            },
            "/sessions/{sid}/rollback/{step}": {
                "parameters": [
                    _SID,
                    {"name": "step", "in": "path", "required": True, "schema": step_ref},
                ],
                "get": _op(
                    "what a rollback to just before the step would undo outside the "
                    "workspace, and what it would leave done; nothing is done",
                    {"200": _json(_ref(RollbackPreview))},
                    errors={**_SESSION_ERRORS, **bad_step},
                ),
            },
            "/sessions/{sid}/rollback/abandon": {
                "parameters": [_SID],
                "post": _op(
                    "stop a rollback that stopped half-way: nothing more is undone, memory and "
                    "files stay as they are",
                    {"200": _json(session)},
                    errors={**_SESSION_ERRORS, **busy, "400": _err("no rollback is pending")},
                ),
            },
            "/sessions/{sid}/fork": {
                "parameters": [_SID],
                "post": _op(
                    "a new session whose history is a copy up to and including the step",
                    {"201": _json(_ref(ForkAnswer))},
                    body=_ref(ForkBody),
                    errors={**_SESSION_ERRORS, **busy, **bad_step},
                ),
            },
            "/sessions/{sid}/processes": {
                "parameters": [_SID],
                "get": _op(
                    "the processes the session's commands left running between steps in its "
                    "container on the answering worker's host, each with the step that "
                    "started it; a session without a container answers an empty list and "
                    "the reason",
                    {"200": _json(_ref(SessionProcesses))},
                    errors=_SESSION_ERRORS,
                ),
            },
            "/sessions/{sid}/approvals/{step}": {
                "parameters": [
                    _SID,
                    {"name": "step", "in": "path", "required": True, "schema": step_ref},
                ],
                "post": _op(
                    "answer an approval the run waits for (as an `approval` frame does); the "
                    "approval step records that a person answered through the HTTP API",
                    {"200": _json(_ref(ApprovalAnswer))},
                    body=_ref(ApprovalBody),
                    errors={**_SESSION_ERRORS, **bad_step},
                ),
            },
            "/sessions/{sid}/queue": {
                "parameters": [_SID],
                "get": _op(
                    "the messages waiting for the session's run (sent while it was busy with "
                    "`busy` queue, steer or interrupt), in the order they run",
                    {"200": _json(_ref(QueueAnswer))},
                ),
            },
            "/sessions/{sid}/queue/{mid}": {
                "parameters": [
                    _SID,
                    {"name": "mid", "in": "path", "required": True, "schema": {"type": "string"}},
                ],
                "delete": _op(
                    "cancel a waiting message (its id: the `messageId` it was sent with, or "
                    "the one the `queue` frame shows)",
                    {"200": _json(_ref(UnqueueAnswer))},
                ),
            },
            "/budgets/{target}": {
                "parameters": [_TARGET],
                "get": _op(
                    "the caps on a session, a person or the deployment, what was spent and "
                    "what is left (docs/budgets.md); a member sees their own only",
                    {"200": _json(_ref(BudgetReport))},
                    errors=_BUDGET_ERRORS,
                ),
                "put": _op(
                    "an admin sets the target's caps over xclaw.yaml's; a session waiting "
                    "for a budget it now has goes on where it stopped",
                    {"200": _json(_ref(BudgetReport))},
                    body=_ref(BudgetCapsBody),
                    errors=_BUDGET_ERRORS,
                ),
            },
            "/budgets/{target}/grant": {
                "parameters": [_TARGET],
                "post": _op(
                    "an admin adds tokens or dollars to a session's allowance; if it waits "
                    "for a budget, it goes on where it stopped",
                    {"200": _json(_ref(BudgetReport))},
                    body=_ref(BudgetGrantBody),
                    errors=_BUDGET_ERRORS,
                ),
            },
            "/sessions/{sid}/export": {
                "parameters": [_SID],
                "get": _op(
                    "JSON Lines, as `xclaw export`: a {kind: session} line, then one "
                    "{kind: step} line per step in sequence order",
                    {
                        "200": {
                            "description": "OK",
                            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                        }
                    },
                ),
            },
            **_schedule_paths(),
        },
    }


_SCHEDULE_ERRORS = {
    **_COMMON_ERRORS,
    "404": _err(
        "no such schedule or webhook, or one the signed-in member did not make (code "
        "`unknown_schedule`)"
    ),
}
_SCHEDULE = {
    "name": "schedule",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "schedule id",
}


_HOOK = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}


def _schedule_paths() -> dict[str, Any]:
    """Schedules and webhooks (docs/schedules.md)."""
    made = {
        **_SESSION_ERRORS,
        "400": _err("a wrong schedule or webhook: its field named (code `bad_request`)"),
    }
    one = _json(_ref(ScheduleInfo))
    return {
        "/schedules": {
            "get": _op(
                "the schedules (a member: those they made)",
                {"200": _json(_ref(ScheduleList))},
                errors=_COMMON_ERRORS,
            ),
            "post": _op(
                "a schedule: a message sent to a session, or to a fork of a template, at "
                "each tick; the signed-in person is its creator",
                {"201": one},
                body=_ref(NewScheduleBody),
                errors=made,
            ),
        },
        "/schedules/{schedule}": {
            "parameters": [_SCHEDULE],
            "get": _op("one schedule", {"200": one}, errors=_SCHEDULE_ERRORS),
            "delete": _op(
                "remove it (its fires stay recorded)",
                {"204": {"description": "removed"}},
                errors=_SCHEDULE_ERRORS,
            ),
        },
        "/schedules/{schedule}/pause": {
            "parameters": [_SCHEDULE],
            "post": _op("stop it firing", {"200": one}, errors=_SCHEDULE_ERRORS),
        },
        "/schedules/{schedule}/resume": {
            "parameters": [_SCHEDULE],
            "post": _op(
                "fire it again (the ticks of the pause: its catch-up policy)",
                {"200": one},
                errors=_SCHEDULE_ERRORS,
            ),
        },
        "/schedules/{schedule}/fires": {
            "parameters": [_SCHEDULE],
            "get": _op(
                "its latest fires, newest first",
                {"200": _json(_ref(FireList))},
                errors=_SCHEDULE_ERRORS,
            ),
        },
        "/hooks": {
            "get": _op(
                "the webhooks, never their secrets (a member: those they made)",
                {"200": _json(_ref(HookList))},
                errors=_COMMON_ERRORS,
            ),
            "post": _op(
                "a webhook: POST /hooks/NAME, signed with the secret this answer shows once",
                {"201": _json(_ref(HookMade))},
                body=_ref(NewHookBody),
                errors=made,
            ),
        },
        "/hooks/{name}": {
            "parameters": [_HOOK],
            "delete": _op(
                "remove it: its URL answers 401 from then on",
                {"204": {"description": "removed"}},
                errors=_SCHEDULE_ERRORS,
            ),
        },
        "/hooks/{name}/fires": {
            "parameters": [_HOOK],
            "get": _op(
                "its latest deliveries' fires, newest first",
                {"200": _json(_ref(FireList))},
                errors=_SCHEDULE_ERRORS,
            ),
        },
    }
