"""The export format (`xclaw export`, JSON Lines) read back for `xclaw import`.

A file holds one or more sessions, each as a `session` line followed by its `step` lines in
seq order (`xclaw export --all` writes every session of a database). Import keeps session and
step ids, or gives the session a new id when the target already has one with that id (its
steps' ids and parent links follow: ids are `<session>:sNNNN`). It goes through
`Store.import_session`, so it is the same for SQLite and PostgreSQL: a session moves between
machines and between backends. The file is hostile input: every line is checked before
anything is written, and a bad one is named with its line number.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from xclaw.errors import MissingBlobs, XclawError
from xclaw.protocol import session_json, step_json
from xclaw.store.base import Store
from xclaw.store.model import Session, Status, Step, StepStatus, StepType, full_step_id
from xclaw.store.rows import check_session_id, new_session_id
from xclaw.store.snapshot_model import content_hash


class BadExport(XclawError):
    """A file `xclaw import` cannot read; nothing was written."""


def export_lines(
    store: Store,
    sessions: Iterable[Session],
    totals: Callable[[list[Step]], dict[str, Any]] | None = None,
) -> Iterator[str]:
    """The session line (with `totals` of its steps, e.g. tokens and cost), then one line per
    step (with its call id, which pairs tool results with the model's calls on resume).
    Import reads only the fields it needs from the session line."""
    for session in sessions:
        steps = store.steps(session.session_id)
        extra = totals(steps) if totals is not None else {}
        yield _dump({"kind": "session", **session_json(session), **extra})
        for st in steps:
            yield _dump({"kind": "step", **step_json(st), "callId": st.call_id})
        # Images a tool returned live in the blob store; the steps name them by hash.
        hashes = sorted({h for st in steps for h in _image_hashes(st.output_data)})
        if hashes:
            try:
                blobs = store.get_blobs(hashes)
            except MissingBlobs as e:  # exported without: fsck names them on either side
                blobs = (
                    store.get_blobs(set(hashes) - set(e.hashes))
                    if set(hashes) - set(e.hashes)
                    else {}
                )
            for h, data in sorted(blobs.items()):
                yield _dump(
                    {"kind": "blob", "hash": h, "base64": base64.b64encode(data).decode("ascii")}
                )


@dataclass
class Exported:
    session: Session
    steps: list[Step] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)
    line: int = 0


@dataclass(frozen=True)
class Imported:
    old_id: str
    session: Session
    steps: int

    @property
    def remapped(self) -> bool:
        return self.old_id != self.session.session_id


def parse_export(lines: Iterable[str], where: str = "the file") -> list[Exported]:
    out: list[Exported] = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
            if not isinstance(obj, dict):
                raise TypeError("not a JSON object")
            kind = obj.get("kind")
            if kind == "session":
                out.append(Exported(_session(obj), line=n))
            elif kind == "step":
                if not out:
                    raise ValueError("a step line before any session line")
                out[-1].steps.append(_step(obj, out[-1].session.session_id))
            elif kind == "blob":
                if not out:
                    raise ValueError("a blob line before any session line")
                h, data = _blob(obj)
                out[-1].blobs[h] = data
            else:
                raise ValueError(f"unknown kind {kind!r} (expected 'session', 'step' or 'blob')")
        except KeyError as e:
            raise BadExport(f"{where} line {n}: missing field {e}") from None
        except (ValueError, TypeError) as e:
            raise BadExport(f"{where} line {n}: {e}") from None
    if not out:
        raise BadExport(f"{where} holds no session (expected what `xclaw export` writes)")
    for ex in out:
        seqs = [s.seq for s in ex.steps]
        if len(set(seqs)) != len(seqs):
            raise BadExport(f"{where}: session at line {ex.line} repeats a step seq")
        seq_of = {s.step_id: s.seq for s in ex.steps}
        # A parent link must name an earlier step of the same session; any other is dropped.
        ex.steps = sorted(
            (
                s
                if s.parent_step_id is None or seq_of.get(s.parent_step_id, s.seq) < s.seq
                else replace(s, parent_step_id=None)
                for s in ex.steps
            ),
            key=lambda s: s.seq,
        )
    return out


def import_sessions(store: Store, exported: list[Exported]) -> list[Imported]:
    """Each session in its own durable transaction, parents before forks (by creation time),
    so a fork imported with its parent stays linked to it (remapped or not)."""
    done: list[Imported] = []
    renamed: dict[str, str] = {}
    for ex in sorted(exported, key=lambda e: e.session.created_at):
        old = ex.session.session_id
        sid = old if store.find_session(old) is None else new_session_id()
        session = ex.session
        if session.parent_session_id in renamed:
            session = replace(session, parent_session_id=renamed[session.parent_session_id])
        steps = ex.steps if sid == old else [_moved(s, old, sid) for s in ex.steps]
        next_seq = max((s.seq for s in steps), default=0) + 1
        if ex.blobs:
            store.put_blobs(ex.blobs)  # durable with the session's own (synced) transaction
        imported = store.import_session(replace(session, session_id=sid), steps, next_seq)
        renamed[old] = sid
        done.append(Imported(old, imported, len(steps)))
    return done


def _image_hashes(output: Any) -> list[str]:
    if not isinstance(output, dict) or not isinstance(output.get("images"), list):
        return []
    return [
        i["hash"]
        for i in output["images"]
        if isinstance(i, dict) and isinstance(i.get("hash"), str)
    ]


def _blob(o: dict[str, Any]) -> tuple[str, bytes]:
    h = _str(o["hash"], "hash")
    try:
        data = base64.b64decode(_str(o["base64"], "base64"), validate=True)
    except binascii.Error as e:
        raise ValueError(f"blob {h[:12]}: not base64 ({e})") from None
    if content_hash(data) != h:
        raise ValueError(f"blob {h[:12]}: its content does not match its hash")
    return h, data


def _moved(st: Step, old: str, new: str) -> Step:
    parent = st.parent_step_id
    if parent is not None:
        parent = new + parent[len(old) :]
    return replace(st, step_id=full_step_id(new, st.seq), session_id=new, parent_step_id=parent)


def _session(o: dict[str, Any]) -> Session:
    sid = check_session_id(o["sessionId"])
    meta = o.get("metadata") or {}
    if not isinstance(meta, dict):
        raise TypeError("metadata must be an object")
    parent = o.get("parentSessionId")
    if parent is not None:
        check_session_id(parent)
    return Session(
        session_id=sid,
        title=_str(o.get("title") or "", "title"),
        status=Status(o["status"]),
        created_at=_int(o["createdAt"], "createdAt"),
        updated_at=_int(o["updatedAt"], "updatedAt"),
        metadata=meta,
        is_forked=bool(o.get("isForked")),
        parent_session_id=parent,
        awaiting_input=bool(o.get("awaitingInput")),
        forked_from_seq=None
        if o.get("forkedFromSeq") is None
        else _int(o["forkedFromSeq"], "forkedFromSeq"),
    )


def _step(o: dict[str, Any], sid: str) -> Step:
    seq = _int(o["seq"], "seq")
    if seq < 1:
        raise ValueError("seq must be >= 1")
    parent = o.get("parent")
    parent_id = None
    if parent is not None:
        p = _str(parent, "parent")
        if not (p.startswith("s") and p[1:].isdigit()):
            raise ValueError(f"parent {p!r} is not a step id like s0003")
        parent_id = full_step_id(sid, int(p[1:]))
    tokens = o.get("tokens") or {}
    if not isinstance(tokens, dict):
        raise TypeError("tokens must be an object")
    end = o.get("endTime")
    call_id = o.get("callId")
    return Step(
        step_id=full_step_id(sid, seq),
        session_id=sid,
        seq=seq,
        parent_step_id=parent_id,
        step_type=StepType(o["type"]),
        name=_str(o["name"], "name"),
        status=StepStatus(o["status"]),
        agent=_str(o.get("agent") or "main", "agent"),
        call_id=None if call_id is None else _str(call_id, "callId"),
        input_data=o.get("input"),
        output_data=o.get("output"),
        error_message=None if o.get("error") is None else _str(o["error"], "error"),
        start_time=_int(o["startTime"], "startTime"),
        end_time=None if end is None else _int(end, "endTime"),
        token_usage_prompt=_count(tokens, "prompt"),
        token_usage_completion=_count(tokens, "completion"),
    )


def _count(tokens: dict[str, Any], key: str) -> int | None:
    """A token column: a whole number, or null (the provider reported none) kept as NULL;
    absent means 0, as exports written before NULLs existed did."""
    if key in tokens and tokens[key] is None:
        return None
    return _int(tokens.get(key, 0), f"tokens.{key}")


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{what} must be an integer, not {v!r}")
    return v


def _str(v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{what} must be a string, not {v!r}")
    return v


def _dump(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)
