"""The OpenAPI 3.1 description of `/api/`, written by hand so it says exactly what api.py does
(a generator would need framework annotations the handlers do not otherwise want)."""

from __future__ import annotations

from typing import Any

_REF = "#/components/schemas/"
_SID = {
    "name": "sid",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "session id",
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


_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["code", "error"],
        "properties": {
            "code": {
                "type": "string",
                "description": "stable machine-readable word, as in the WebSocket `error` frame",
            },
            "error": {"type": "string", "description": "human-readable explanation"},
        },
    },
    "Session": {
        "type": "object",
        "required": ["sessionId", "title", "status", "createdAt", "updatedAt", "isForked"],
        "properties": {
            "sessionId": {"type": "string"},
            "title": {"type": "string"},
            "status": {
                "type": "string",
                "enum": ["Init", "Running", "Paused", "Success", "Failed"],
            },
            "createdAt": {"type": "integer", "description": "milliseconds since the epoch"},
            "updatedAt": {"type": "integer"},
            "isForked": {"type": "boolean"},
            "parentSessionId": {"type": ["string", "null"]},
            "forkedFromSeq": {"type": ["integer", "null"]},
            "forkedFrom": {
                "type": ["string", "null"],
                "description": "display id of the fork point",
            },
            "awaitingInput": {
                "type": "boolean",
                "description": "rolled back: waits for a new instruction",
            },
            "metadata": {"type": "object"},
            "busy": {"type": "boolean", "description": "a run is in flight in this gateway"},
        },
    },
    "Step": {
        "type": "object",
        "required": ["id", "stepId", "seq", "type", "name", "status"],
        "properties": {
            "id": {"type": "string", "description": "display id, e.g. s0005"},
            "stepId": {"type": "string", "description": "primary key: SESSION:s0005"},
            "seq": {"type": "integer"},
            "parent": {"type": ["string", "null"], "description": "display id of the parent step"},
            "type": {
                "type": "string",
                "enum": ["llm_call", "tool_call", "user_input", "system_alert"],
            },
            "name": {"type": "string"},
            "status": {"type": "string", "enum": ["running", "completed", "failed"]},
            "agent": {"type": "string"},
            "input": {},
            "output": {},
            "error": {"type": ["string", "null"]},
            "startTime": {"type": "integer"},
            "endTime": {"type": ["integer", "null"]},
            "durationMs": {"type": ["integer", "null"]},
            "tokens": {
                "type": "object",
                # null: the server reported no count (unknown; `output.usage` holds xclaw's
                # estimate, flagged `estimated`).
                "properties": {
                    "prompt": {"type": ["integer", "null"]},
                    "completion": {"type": ["integer", "null"]},
                },
            },
        },
    },
    "TreeNode": {
        "allOf": [
            {"$ref": _REF + "Step"},
            {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": _REF + "TreeNode"}}},
            },
        ]
    },
}


def openapi_spec(version: str) -> dict[str, Any]:
    session = {"$ref": _REF + "Session"}
    steps = {
        "type": "object",
        "properties": {
            "sessionId": {"type": "string"},
            "steps": {"type": "array", "items": {"$ref": _REF + "Step"}},
        },
    }
    step_ref = {
        "type": "string",
        "description": "a step id shown by /steps: s0005, 5, or SESSION:s0005",
    }
    busy = {"409": _err("a run is in flight (code `busy`)")}
    bad_step = {"400": _err("bad step id or request body (code `bad_step` / `bad_request`)")}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "xclaw gateway API",
            "version": version,
            "description": "Sessions and their trace steps. Every request carries the access token "
            "(Authorization: Bearer TOKEN, or ?token=TOKEN). The WebSocket protocol at /ws is "
            "described in docs/protocol.md.",
        },
        "servers": [{"url": "/api"}],
        "components": {
            "schemas": _SCHEMAS,
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
                    {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "status": {"const": "ok"},
                                    "version": {"type": "string"},
                                    "database": {"type": "string"},
                                    "model": {"type": ["string", "null"]},
                                    "sockets": {"type": "integer"},
                                    "worker": {"type": ["string", "null"]},
                                    "backend": {"enum": ["sqlite", "postgresql"]},
                                    "sessionsDriven": {
                                        "type": "array",
                                        "items": {"type": "string"},
                                    },
                                    "commits": {
                                        "type": ["integer", "null"],
                                        "description": "write transactions committed by this "
                                        "process since it started",
                                    },
                                    "user": {
                                        "type": ["string", "null"],
                                        "description": "the user this request is signed in "
                                        "as; null: the server's own token (the admin)",
                                    },
                                    "role": {"enum": ["admin", "member"]},
                                    "writerBusyMs": {
                                        "type": ["integer", "null"],
                                        "description": "SQLite: milliseconds this process's "
                                        "one writer thread has spent running transactions "
                                        "since it started (over wall time: how saturated it "
                                        "is); null on PostgreSQL",
                                    },
                                },
                            }
                        )
                    },
                    errors=_COMMON_ERRORS,
                )
            },
            "/openapi.json": {
                "get": _op(
                    "this document", {"200": _json({"type": "object"})}, errors=_COMMON_ERRORS
                )
            },
            "/sessions": {
                "get": _op(
                    "sessions, most recently updated first",
                    {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {"sessions": {"type": "array", "items": session}},
                            }
                        )
                    },
                    params=[
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "default": 100},
                        }
                    ],
                    errors={**_COMMON_ERRORS, "400": _err("bad limit")},
                )
            },
            "/sessions/{sid}": {
                "parameters": [_SID],
                "get": _op("one session", {"200": _json(session)}),
                "patch": _op(
                    "rename",
                    {"200": _json(session)},
                    body={
                        "type": "object",
                        "required": ["title"],
                        "properties": {"title": {"type": "string"}},
                    },
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
                    {"200": _json(steps)},
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
                    {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "sessionId": {"type": "string"},
                                    "tree": {"type": "array", "items": {"$ref": _REF + "TreeNode"}},
                                },
                            }
                        )
                    },
                ),
            },
            "/sessions/{sid}/history": {
                "parameters": [_SID],
                "get": _op(
                    "the conversation as the `history` frame carries it",
                    {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "sessionId": {"type": "string"},
                                    "content": {
                                        "type": "string",
                                        "description": "JSON string of [{role, content}] "
                                        "(the format of the original tutorial's clients)",
                                    },
                                    "messages": {"type": "array", "items": {"type": "object"}},
                                },
                            }
                        )
                    },
                ),
            },
            "/sessions/{sid}/rollback": {
                "parameters": [_SID],
                "post": _op(
                    "rewind the session to just before the step "
                    "(it and every later step are deleted)",
                    {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "session": session,
                                    "stepId": {"type": "string"},
                                    "deleted": {"type": "integer"},
                                },
                            }
                        )
                    },
                    body={
                        "type": "object",
                        "required": ["stepId"],
                        "properties": {"stepId": step_ref},
                    },
                    errors={**_SESSION_ERRORS, **busy, **bad_step},
                ),
            },
            "/sessions/{sid}/fork": {
                "parameters": [_SID],
                "post": _op(
                    "a new session whose history is a copy up to and including the step",
                    {
                        "201": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "session": session,
                                    "fromSessionId": {"type": "string"},
                                },
                            }
                        )
                    },
                    body={
                        "type": "object",
                        "required": ["stepId"],
                        "properties": {"stepId": step_ref, "title": {"type": "string"}},
                    },
                    errors={**_SESSION_ERRORS, **busy, **bad_step},
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
                    {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "sessionId": {"type": "string"},
                                    "stepId": {"type": "string"},
                                    "approved": {"type": "boolean"},
                                },
                            }
                        )
                    },
                    body={
                        "type": "object",
                        "required": ["approve"],
                        "properties": {"approve": {"type": "boolean"}},
                    },
                    errors={**_SESSION_ERRORS, **bad_step},
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
        },
    }
