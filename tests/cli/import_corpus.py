"""Hostile files for `xclaw import`, each with what the refusal must say and on which line.

Every case is bytes as they would sit on disk. `SESSION` and `STEP` build well-formed lines
to spoil one field at a time; `ACCEPTED` holds valid files at the edges (the largest numbers
both backends hold, text that looks dangerous but is not) that must import."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


def line(obj: Any) -> bytes:
    """One JSON line as export writes it (UTF-8 as is); a lone surrogate, which UTF-8
    cannot hold, as its JSON escape."""
    text = json.dumps(obj, ensure_ascii=False)
    text = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group(0)):04x}", text)
    return text.encode() + b"\n"


def session(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "session",
        "sessionId": "hostile",
        "title": "t",
        "status": "Success",
        "createdAt": 1_700_000_000_000,
        "updatedAt": 1_700_000_000_500,
    }
    base.update(over)
    return {k: v for k, v in base.items() if v is not _DROP}


def step(seq: int = 1, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "step",
        "stepId": f"hostile:s{seq:04d}" if isinstance(seq, int) else "hostile:s0001",
        "seq": seq,
        "parent": None,
        "type": "user_input",
        "name": "user",
        "status": "completed",
        "agent": "main",
        "input": "hi",
        "output": None,
        "error": None,
        "startTime": 1_700_000_000_100,
        "endTime": 1_700_000_000_100,
        "tokens": {"prompt": 0, "completion": 0},
    }
    base.update(over)
    return {k: v for k, v in base.items() if v is not _DROP}


_DROP = object()  # a field left out


@dataclass(frozen=True)
class Case:
    name: str
    data: bytes
    line: int | None  # the line the refusal names (None: the file as a whole)
    why: str  # a piece of the refusal


S = line(session())


def _raw(text: str) -> bytes:
    return text.encode() + b"\n"


def _nested(depth: int) -> bytes:
    return b'{"kind": "step", "seq": 1, "input": ' + b"[" * depth + b"]" * depth + b"}\n"


CASES = [
    # --- the shape of the file
    Case("empty file", b"", None, "holds no session"),
    Case("only blank lines", b"\n\n  \n", None, "holds no session"),
    Case("binary file", bytes(range(256)) * 16, 1, "not JSON"),
    Case("binary, high bytes first", bytes(range(255, -1, -1)) * 16, 1, "not UTF-8 text"),
    Case("invalid utf-8", S + b'{"kind": "step", "name": "\xff\xfe"}\n', 2, "not UTF-8 text"),
    Case("not json", S + b"{nope\n", 2, "not JSON"),
    Case("a json array", S + b"[1, 2]\n", 2, "not a JSON object"),
    Case("unknown kind", line({"kind": "sessions"}), 1, "unknown kind 'sessions'"),
    Case("step before session", line(step()), 1, "a step line before any session line"),
    Case("blob before session", line({"kind": "blob", "hash": "x"}), 1, "before any session"),
    Case("1 MB line of garbage", b"x" * 1_000_000 + b"\n", 1, "not JSON"),
    Case("1 MB session id", line(session(sessionId="a" * 1_000_000)), 1, "invalid session id"),
    Case("1 MB number", S + _raw('{"kind": "step", "seq": ' + "9" * 5000 + "}"), 2, "digits"),
    Case("nested 100k deep", S + _nested(100_000), 2, "nested"),
    Case("nested 600 deep", S + _nested(600), 2, "nested deeper than 500 levels"),
    # --- numbers beyond what the columns hold, or where none is allowed
    Case("seq beyond bigint", S + line(step(seq=2**63)), 2, "seq is 9223372036854775808"),
    Case("seq zero", S + line(step(seq=0, stepId=_DROP)), 2, "seq is 0: it must be at least 1"),
    Case("tokens beyond integer", S + line(step(tokens={"prompt": 2**31})), 2, "tokens.prompt"),
    Case("tokens 2^64", S + line(step(tokens={"completion": 2**64})), 2, "at most 2147483647"),
    Case("negative tokens", S + line(step(tokens={"prompt": -1})), 2, "at least 0"),
    Case("time beyond bigint", S + line(step(startTime=2**63)), 2, "startTime is"),
    Case("created 10^30", line(session(createdAt=10**30)), 1, "createdAt is"),
    Case("negative time", line(session(updatedAt=-5)), 1, "updatedAt is -5"),
    Case("end before start", S + line(step(endTime=5)), 2, "endTime is 5: it must be at least"),
    Case("NaN", S + _raw('{"kind": "step", "seq": 1, "input": NaN}'), 2, "NaN is not a number"),
    Case(
        "Infinity tokens",
        S + _raw('{"kind": "step", "tokens": {"prompt": -Infinity}}'),
        2,
        "-Infinity",
    ),
    Case(
        "float overflow", S + _raw('{"kind": "step", "input": 1e400}'), 2, "too large for a float"
    ),
    Case("fork seq 2^63", line(session(forkedFromSeq=2**63)), 1, "forkedFromSeq is"),
    # --- wrong types
    Case("seq as text", S + line(step(seq="1")), 2, "seq must be an integer, not '1'"),
    Case("seq as float", S + line(step(seq=1.0)), 2, "seq must be an integer, not 1.0"),
    Case("seq as bool", S + line(step(seq=True)), 2, "seq must be an integer, not True"),
    Case("title as number", line(session(title=5)), 1, "title must be a string, not 5"),
    Case("isForked as text", line(session(isForked="yes")), 1, "isForked must be true or false"),
    Case("metadata as list", line(session(metadata=[1])), 1, "metadata must be an object"),
    Case("tokens as list", S + line(step(tokens=[1, 2])), 2, "tokens must be an object"),
    Case("status unknown", line(session(status="Zombie")), 1, "status 'Zombie' is not one of"),
    Case("type unknown", S + line(step(type="robot")), 2, "type 'robot' is not one of"),
    Case("name as object", S + line(step(name={"a": 1})), 2, "name must be a string"),
    Case("parent as number", S + line(step(seq=2, parent=1)), 2, "parent must be a string"),
    Case("parent not a step id", S + line(step(seq=2, parent="x1")), 2, "is not a step id"),
    # --- missing fields
    Case("session without id", line(session(sessionId=_DROP)), 1, "missing field 'sessionId'"),
    Case("session without status", line(session(status=_DROP)), 1, "missing field 'status'"),
    Case("step without type", S + line(step(type=_DROP)), 2, "missing field 'type'"),
    Case("step without startTime", S + line(step(startTime=_DROP)), 2, "missing field 'startTime'"),
    Case("step without seq", S + line(step(seq=_DROP, stepId=_DROP)), 2, "missing field 'seq'"),
    # --- ids
    Case(
        "duplicate session",
        S + line(step()) + S,
        3,
        "session hostile appears twice (first at line 1)",
    ),
    Case("duplicate step", S + line(step()) + line(step()), 3, "step s0001 appears twice"),
    Case(
        "step of a session not in the file",
        S + line(step(stepId="elsewhere:s0001")),
        2,
        "belongs to session 'elsewhere', not to session hostile",
    ),
    Case(
        "stepId and seq disagree",
        S + line(step(seq=2, stepId="hostile:s0003")),
        2,
        "does not match seq 2",
    ),
    Case(
        "parent pointing nowhere",
        S + line(step()) + line(step(seq=2, parent="s0009")),
        3,
        "step s0002 has parent s0009, which is no step of the session hostile",
    ),
    Case(
        "parent pointing later",
        S + line(step(parent="s0002")) + line(step(seq=2)),
        2,
        "step s0001 has parent s0002, which is not an earlier step",
    ),
    Case(
        "blob that lies",
        S + line({"kind": "blob", "hash": "0" * 64, "base64": "aGk="}),
        2,
        "does not match its hash",
    ),
    Case(
        "blob not base64",
        S + line({"kind": "blob", "hash": "0" * 64, "base64": "!!"}),
        2,
        "not base64",
    ),
]

MAX_BIGINT = 2**63 - 1

# Valid at the edges: must import on both backends, every value kept.
ACCEPTED = (
    line(
        session(
            sessionId="edges",
            title="nul\u0000 lone\ud800 sep\u2028 bidi\u202e end",
            createdAt=0,
            updatedAt=MAX_BIGINT,
            metadata={"big": 2**70, "deep": [[[[["ok"]]]]]},
        )
    )
    + line(
        step(
            1,
            stepId="edges:s0001",
            input={"n": 10**30, "text": "a\u2028b"},
            startTime=MAX_BIGINT - 1,
            endTime=MAX_BIGINT,
            tokens={"prompt": 2**31 - 1, "completion": None},
        )
    )
    + line(step(2, stepId="edges:s0002", parent="s0001", output="x" * 1_000_000))  # a 1 MB line
    + line(step(MAX_BIGINT - 1, stepId=f"edges:s{MAX_BIGINT - 1}", parent="s0001", input="last"))
)
