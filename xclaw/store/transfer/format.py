"""[store/transfer] The export format (`xclaw export`, JSON Lines) read back for `xclaw import`.

A file holds one or more sessions, each as a `session` line followed by its `step` lines in
seq order (`xclaw export --all` writes every session of a database). Import keeps session and
step ids, or gives the session a new id when the target already has one with that id (its
steps' ids and parent links follow: ids are `<session>:sNNNN`). It goes through
`Store.import_sessions`, so it is the same for SQLite and PostgreSQL: a session moves between
machines and between backends. The file is hostile input: every line is checked before
anything is written, a bad one is named with its line number and what is wrong with it, and
the whole file is then imported in one transaction (all of it, or nothing).
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import MISSING, dataclass, field, replace
from typing import Any, Protocol, TypeVar

from xclaw.errors import EXIT_USAGE, MissingBlobs, XclawError
from xclaw.store.base import RecordReader, RecordStore, SnapshotStore
from xclaw.store.snapshots.model import content_hash
from xclaw.store.steps.columns import Column, Kind, Table
from xclaw.store.steps.model import (
    Session,
    Step,
    display_id,
    full_step_id,
)
from xclaw.store.steps.rows import SESSIONS, STEPS, check_session_id, new_session_id, valid_unicode


class BadExport(XclawError):
    """A file `xclaw import` cannot read; nothing was written."""

    code = "bad_export"
    exit_code = EXIT_USAGE


class ExportSource(Protocol):
    """The roles an export reads: the record, and the images its steps name (snapshots)."""

    @property
    def record(self) -> RecordReader: ...

    @property
    def snapshots(self) -> SnapshotStore: ...


def export_lines(
    store: ExportSource,
    sessions: Iterable[Session],
    totals: Callable[[list[Step]], dict[str, Any]] | None = None,
    redact: Callable[[Any], Any] | None = None,
    *,
    step_extra: Callable[[Step], dict[str, Any]] | None = None,
) -> Iterator[str]:
    """The session line (with `totals` of its steps, e.g. tokens and cost), then one line per
    step (with its call id, which pairs tool results with the model's calls on resume):
    each what its row declares for export (store/steps/columns.py: the columns' export keys and
    the derived values), plus what the caller adds (`totals`; `step_extra` of each step, e.g.
    an llm_call's priced usage). Import reads only the fields it needs. `redact` (a Redactor)
    is applied to every session and step line; images go as they are (like workspace
    files)."""
    clean = redact or (lambda data: data)
    for session in sessions:
        steps = store.record.steps(session.session_id)
        extra = totals(steps) if totals is not None else {}
        yield _dump(clean({"kind": "session", **SESSIONS.exported(session), **extra}))
        for st in steps:
            more = step_extra(st) if step_extra is not None else {}
            yield _dump(clean({"kind": "step", **STEPS.exported(st), **more}))
        # Images a tool returned live in the blob store; the steps name them by hash.
        hashes = sorted({h for st in steps for h in _image_hashes(st.output_data)})
        if hashes:
            try:
                blobs = store.snapshots.get_blobs(hashes)
            except MissingBlobs as e:  # exported without: fsck names them on either side
                blobs = (
                    store.snapshots.get_blobs(set(hashes) - set(e.hashes))
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
    step_lines: dict[int, int] = field(default_factory=dict)  # seq -> line of the file


@dataclass(frozen=True)
class Imported:
    old_id: str
    session: Session
    steps: int

    @property
    def remapped(self) -> bool:
        return self.old_id != self.session.session_id


# What the columns hold on both backends (PostgreSQL's bigint; its `integer` for tokens): a
# number beyond them is refused on its line rather than failing the insert.
MAX_BIGINT = 2**63 - 1
MAX_SEQ = MAX_BIGINT - 1  # next_seq, one past the last step, must fit too
MAX_TOKENS = 2**31 - 1
# Nesting a value may have: json.loads, and everything that later walks a step's input and
# output recursively (rendering, redaction, the JSON encoder), stay well within Python's
# recursion limit.
MAX_NESTING = 500
# A reason quoting a hostile value (a 1 MB id, a huge number) is cut to this many characters.
MAX_REASON = 300


def parse_export(lines: Iterable[bytes | str], where: str = "the file") -> list[Exported]:
    """The sessions of an export, every line checked: one refusal (BadExport) naming the
    first bad line and what is wrong with it, before anything is written."""
    out: list[Exported] = []
    first_line: dict[str, int] = {}
    for n, raw in enumerate(lines, start=1):
        try:
            text = _text_of(raw)
            if not text.strip():
                continue
            obj = _json_of(text)
            kind = obj.get("kind")
            if kind == "session":
                ex = Exported(_session(obj), line=n)
                sid = ex.session.session_id
                if sid in first_line:
                    raise ValueError(
                        f"session {sid} appears twice (first at line {first_line[sid]})"
                    )
                first_line[sid] = n
                out.append(ex)
            elif kind == "step":
                if not out:
                    raise ValueError("a step line before any session line")
                _add_step(out[-1], _step(obj, out[-1].session.session_id), n)
            elif kind == "blob":
                if not out:
                    raise ValueError("a blob line before any session line")
                h, data = _blob(obj)
                out[-1].blobs[h] = data
            else:
                raise ValueError(
                    f"unknown kind {_shown(kind)} (expected 'session', 'step' or 'blob')"
                )
        except KeyError as e:
            raise BadExport(_reason(where, n, f"missing field {e}")) from None
        except RecursionError:
            raise BadExport(_reason(where, n, "nested too deeply")) from None
        except (ValueError, TypeError) as e:
            raise BadExport(_reason(where, n, str(e))) from None
    if not out:
        raise BadExport(f"{where} holds no session (expected what `xclaw export` writes)")
    for ex in out:
        _check_parents(ex, where)
        ex.steps.sort(key=lambda s: s.seq)
    return out


def import_sessions(store: RecordStore, exported: list[Exported]) -> list[Imported]:
    """Every session of the file in one durable transaction (Store.import_sessions): all of
    them are imported, or none."""
    return store.import_sessions(exported)


def placed(
    ex: Exported, taken: Callable[[str], bool], renamed: dict[str, str]
) -> tuple[Session, list[Step]]:
    """Where one exported session goes: its own id, or a new one when `taken` (its steps'
    ids and parent links follow), its fork parent renamed as earlier sessions of the same
    file were (`renamed`, updated here). Called in the import's transaction, parents
    before forks (by creation time)."""
    old = ex.session.session_id
    sid = old if not taken(old) else new_session_id()
    session = ex.session
    if session.parent_session_id in renamed:
        session = replace(session, parent_session_id=renamed[session.parent_session_id])
    steps = ex.steps if sid == old else [_moved(s, old, sid) for s in ex.steps]
    renamed[old] = sid
    return replace(session, session_id=sid), steps


def _add_step(ex: Exported, step: Step, line: int) -> None:
    if step.seq in ex.step_lines:
        raise ValueError(
            f"step {display_id(step.seq)} appears twice in session {ex.session.session_id} "
            f"(first at line {ex.step_lines[step.seq]})"
        )
    ex.step_lines[step.seq] = line
    ex.steps.append(step)


def _check_parents(ex: Exported, where: str) -> None:
    """A parent link names an earlier step of the same session (as the store requires of
    every step it writes, and fsck checks): one pointing anywhere else is refused."""
    seqs = set(ex.step_lines)
    for st in ex.steps:
        if st.parent_step_id is None:
            continue
        parent = int(st.parent_step_id.rpartition(":s")[2])
        if parent not in seqs or parent >= st.seq:
            why = "no step of the session" if parent not in seqs else "not an earlier step"
            raise BadExport(
                _reason(
                    where,
                    ex.step_lines[st.seq],
                    f"step {display_id(st.seq)} has parent {display_id(parent)}, which is "
                    f"{why} {ex.session.session_id} in the file",
                )
            )


def _reason(where: str, line: int, why: str) -> str:
    why = " ".join(why.split())  # one line, whatever the value quoted
    if len(why) > MAX_REASON:
        why = why[:MAX_REASON] + " …"
    return f"{where} line {line}: {why}"


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:60] + "…"


def _text_of(raw: bytes | str) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"not UTF-8 text (byte {raw[e.start]:#04x} at column {e.start + 1})"
        ) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:30]} is too large for a float")
    return value


def _json_of(text: str) -> dict[str, Any]:
    """One JSON object: strict JSON (no NaN or Infinity), lone surrogates made U+FFFD (as
    everywhere a client's JSON enters), nested at most MAX_NESTING deep."""
    try:
        obj = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict):
        raise TypeError("not a JSON object")
    _check_nesting(obj)
    return valid_unicode(obj)  # type: ignore[no-any-return]


def _check_nesting(value: Any) -> None:
    """Iteratively: a value nested deeper than the limit is refused before anything walks it
    recursively."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ValueError(f"nested deeper than {MAX_NESTING} levels")
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)


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


# What an import accepts of a number column beyond a whole number in [0, MAX_BIGINT] (a
# column not named here takes that); fields an export line must have although the value has
# a default.
_BOUNDS = {
    "seq": (1, MAX_SEQ),
    "forked_from_seq": (1, MAX_SEQ),
    "token_usage_prompt": (0, MAX_TOKENS),
    "token_usage_completion": (0, MAX_TOKENS),
}
_REQUIRED = frozenset({"start_time"})


def _columns(table: Table[Any], o: dict[str, Any], special: Iterable[str] = ()) -> dict[str, Any]:
    """Every exported column of a line (store/steps/columns.py) but `special`, checked by its kind:
    a field left out takes its default (a line without a field that has none is refused), a
    null is None where the field allows None, else its default."""
    skip = set(special)
    values: dict[str, Any] = {}
    for c in table.columns:
        if c.export is None or c.field in skip:
            continue
        head, _, tail = c.export.partition(".")
        v: Any = o.get(head)
        present = head in o
        if tail:
            if v is None:
                v = {}
            if not isinstance(v, dict):
                raise TypeError(f"{head} must be an object, not {_shown(v)}")
            present, v = tail in v, v.get(tail)
        if v is None:
            if c.default is MISSING or (c.field in _REQUIRED and not present):
                raise KeyError(c.export)
            values[c.field] = None if c.nullable and present else c.default
            continue
        values[c.field] = _READ[c.kind](c, v)
    return values


def _read_value(c: Column, v: Any) -> int:
    low, high = _BOUNDS.get(c.field, (0, MAX_BIGINT))
    return _int(v, c.export or c.field, low, high)


def _read_enum(c: Column, v: Any) -> Any:
    assert c.enum is not None
    return _enum(c.enum, v, c.export or c.field)


_READ: dict[Kind, Callable[[Column, Any], Any]] = {
    Kind.VALUE: _read_value,
    Kind.TEXT: lambda c, v: _str(v, c.export or c.field),
    Kind.JSON: lambda c, v: v,
    Kind.FLAG: lambda c, v: _bool(v, c.export or c.field),
    Kind.ENUM: _read_enum,
}


def _session(o: dict[str, Any]) -> Session:
    sid = check_session_id(o["sessionId"])
    values = _columns(SESSIONS, o, special=("session_id", "title"))
    if not isinstance(values["metadata"], dict):
        raise TypeError(f"metadata must be an object, not {_shown(values['metadata'])}")
    if values["parent_session_id"] is not None:
        check_session_id(values["parent_session_id"])
    return Session(session_id=sid, title=_str(_or(o.get("title"), ""), "title"), **values)


def _step(o: dict[str, Any], sid: str) -> Step:
    values = _columns(STEPS, o, special=("step_id",))
    seq = values["seq"]
    step_id = o.get("stepId")
    if step_id is not None:
        owner, _, tail = _str(step_id, "stepId").rpartition(":")
        if owner != sid:
            raise ValueError(
                f"step {_shown(step_id)} belongs to session {_shown(owner)}, not to session "
                f"{sid} above it: every step follows its own session's line"
            )
        if tail != display_id(seq) and tail != f"s{seq}":
            raise ValueError(f"stepId {_shown(step_id)} does not match seq {seq}")
    parent = o.get("parent")
    parent_id = None
    if parent is not None:
        p = _str(parent, "parent")
        if not (p.startswith("s") and p[1:].isdigit() and len(p) <= 20):
            raise ValueError(f"parent {_shown(p)} is not a step id like s0003")
        parent_id = full_step_id(sid, int(p[1:]))
    end = values["end_time"]
    if end is not None:
        _int(end, "endTime", values["start_time"], MAX_BIGINT)
    return Step(
        **values
        | {"step_id": full_step_id(sid, seq), "session_id": sid, "parent_step_id": parent_id}
    )


E = TypeVar("E", bound=enum.Enum)


def _enum(cls: type[E], v: Any, what: str) -> E:
    try:
        return cls(v)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in cls)
        raise ValueError(f"{what} {_shown(v)} is not one of {choices}") from None


def _int(v: Any, what: str, low: int, high: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{what} must be an integer, not {_shown(v)}")
    if not low <= v <= high:
        shown = str(v) if len(str(v)) <= 30 else f"a {len(str(v))}-digit number"
        bound = f"at least {low}" if v < low else f"at most {high}"
        raise ValueError(f"{what} is {shown}: it must be {bound}")
    return v


def _or(v: Any, default: Any) -> Any:
    """A field left out or null takes its default; any other value is checked as given."""
    return default if v is None else v


def _bool(v: Any, what: str) -> bool:
    if v is None:
        return False
    if not isinstance(v, bool):
        raise TypeError(f"{what} must be true or false, not {_shown(v)}")
    return v


def _str(v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{what} must be a string, not {_shown(v)}")
    return v


def _dump(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)
