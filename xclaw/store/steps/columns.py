"""[store/steps] The columns of the record's two tables, declared once, and everything made from
them.

A table's columns are the fields of its row value (`model.Session` for `sessions`,
`model.Step` for `traces`) declared with `column(...)`: the field's name is the column's
(unless `name=` says otherwise), its kind says how the value is stored (JSON text, a flag,
an enum's word, NUL-free text), `export=` is its key in `xclaw export`'s lines. From that one
declaration `Table` makes the select list and the row converter, the INSERT of a whole value
(either backend's parameter style), its parameters, the fork's copy of a step, and an export
line's fields; `store/transfer/format.py` reads an import back through it. Adding a column is
therefore a migration, one field here, and the code that fills or reads it
(docs/storage.md, "Adding a column").

Pure: no database is touched here, only SQL text and values made.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Generic, TypeVar

R = TypeVar("R")


class Kind(enum.Enum):
    """How a column's value is stored."""

    VALUE = "value"  # an int (or None) as it is
    TEXT = "text"  # a str (or None): PostgreSQL text cannot hold NUL (Dialect.text)
    JSON = "json"  # any JSON value: compact JSON text, jsonb on PostgreSQL (Dialect.json)
    FLAG = "flag"  # a bool, stored 0 / 1
    ENUM = "enum"  # a StrEnum, stored as its word


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    kind: Kind
    name: str | None  # the SQL column, when it differs from the field's name
    export: str | None  # key in an export line; "a.b" nests; None: written by other means
    enum: type[enum.Enum] | None


def column(
    kind: Kind = Kind.VALUE,
    *,
    default: Any = MISSING,
    default_factory: Any = MISSING,
    name: str | None = None,
    export: str | None = None,
    enum: type[enum.Enum] | None = None,
) -> Any:
    """A dataclass field that is also a column of its table."""
    meta = {"column": ColumnSpec(kind, name, export, enum)}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, slots=True, eq=False)
class Column:
    """One declared column, resolved: its field, its SQL name, kind, export key. Compared
    and hashed by identity: each is made once, by its table."""

    field: str
    name: str
    kind: Kind
    export: str | None
    enum: type[enum.Enum] | None
    nullable: bool  # None is a value of the field (its type says `| None`)
    default: Any  # the field's default (MISSING: none)


# How a value is written to its column: the dialect's JSON and text converters come in.
Encode = Callable[[Any, str], Any]


def text_as_is(value: str | None) -> str | None:
    """A dialect's text converter when its text columns hold any string (SQLite): the
    encoders below then pass text through without calling it."""
    return value


class Table(Generic[R]):
    """A table of the record as its row value declares it."""

    def __init__(self, table: str, row: type[R], *, load: Callable[[Any], Any]) -> None:
        self.table = table
        self._load = load
        self.row = row
        cols = []
        for f in fields(row):  # type: ignore[arg-type]
            spec = f.metadata.get("column")
            if spec is None:
                continue
            default = (
                f.default
                if f.default is not MISSING
                else f.default_factory()
                if f.default_factory is not MISSING
                else MISSING
            )
            cols.append(
                Column(
                    field=f.name,
                    name=spec.name or f.name,
                    kind=spec.kind,
                    export=spec.export,
                    enum=spec.enum,
                    nullable="None" in str(f.type),
                    default=default,
                )
            )
        self.columns: tuple[Column, ...] = tuple(cols)
        # (export key, attribute) of each value the row computes from its columns and
        # declares for export lines (its `EXPORTED` class variable: key -> property).
        self.derived: tuple[tuple[str, str], ...] = tuple(getattr(row, "EXPORTED", {}).items())
        self.by_field = {c.field: c for c in self.columns}
        # The select list, in declaration order: what `from_row` reads.
        self.select = ", ".join(c.name for c in self.columns)
        self.from_row: Callable[[Any], R] = _converter(row, self.columns, load, None)
        self._given: dict[str, Callable[[Any, Any], R]] = {}

    def maker(
        self, args: str, given: Mapping[str, str], env: Mapping[str, Any]
    ) -> Callable[..., R]:
        """`make(<args>)`: a new row value, each column the Python expression `given` names
        for its field (over `args` and the names of `env`), else the column's default. Generated
        once, filling the value's slots directly like the converter below: a frozen value's
        __init__ sets each of a step's sixteen fields through object.__setattr__, as much
        Python as the rest of a step's write path."""
        names: dict[str, Any] = {"_new": object.__new__, "_row": self.row, **env}
        lines = ["    v = _new(_row)"]
        unknown = set(given) - set(self.by_field)
        if unknown:
            raise ValueError(f"no such field in {self.row.__name__}: {sorted(unknown)}")
        for i, c in enumerate(self.columns):
            expr = given.get(c.field)
            if expr is None:
                if c.default is MISSING or isinstance(c.default, dict | list | set):
                    raise TypeError(f"{c.field}: no default to fill a new row with; give it")
                names[f"_d{i}"] = c.default
                expr = f"_d{i}"
            names[f"_s{i}"] = getattr(self.row, c.field).__set__
            lines.append(f"    _s{i}(v, {expr})")
        source = f"def make({args}):\n" + "\n".join(lines) + "\n    return v\n"
        exec(source, names)  # generated from the declaration, as dataclasses does
        return names["make"]  # type: ignore[no-any-return]

    def index(self, field_name: str) -> int:
        """Where a field's column is in the select list and in `params`."""
        return self.columns.index(self.by_field[field_name])

    def names(self, *extra: str) -> str:
        return ", ".join([*(c.name for c in self.columns), *extra])

    def select_without(self, field_name: str) -> str:
        """The select list with one column read as NULL (a completion returns its row
        without the output the caller just gave: `from_row_given(field_name)`)."""
        gone = self.by_field[field_name].name
        return ", ".join("NULL" if c.name == gone else c.name for c in self.columns)

    def from_row_given(self, field_name: str) -> Callable[[Any, Any], R]:
        """`convert(row, given)`: as from_row, `given` standing for that column when NULL."""
        conv = self._given.get(field_name)
        if conv is None:
            conv = self._given[field_name] = _converter(
                self.row, self.columns, self._load, field_name
            )
        return conv

    def placeholders(self, *extra: str) -> str:
        """`?` per column (`?::jsonb` for JSON: PostgreSQL types it, SQLite drops the cast),
        then `extra` placeholders as given."""
        marks = ["?::jsonb" if c.kind is Kind.JSON else "?" for c in self.columns]
        return ", ".join([*marks, *extra])

    def named_placeholders(self, *extra: str) -> str:
        """PostgreSQL's named style (`%(name)s`), for a statement merging other parameters."""
        marks = [
            f"%({c.name})s::jsonb" if c.kind is Kind.JSON else f"%({c.name})s" for c in self.columns
        ]
        return ", ".join([*marks, *(f"%({e})s" for e in extra)])

    def insert(self, *extra: str) -> str:
        """`INSERT INTO table (every column, extra) VALUES (...)` in the shared `?` style."""
        marks = self.placeholders(*("?" for _ in extra))
        return f"INSERT INTO {self.table} ({self.names(*extra)}) VALUES ({marks})"

    def params(self, value: R, json: Encode, text: Callable[[str | None], str | None]) -> list[Any]:
        """The value's columns in declaration order, as the backend stores them."""
        return self.values(value, self.columns, json, text)

    def assignments(self, value_type: type[Any]) -> tuple[tuple[Column, ...], str]:
        """The columns a partial value sets (its fields named as columns: a completion) and
        their `SET` list in the shared `?` style."""
        cols = tuple(self.by_field[f.name] for f in fields(value_type))
        marks = ", ".join(
            f"{c.name}=?::jsonb" if c.kind is Kind.JSON else f"{c.name}=?" for c in cols
        )
        return cols, marks

    @staticmethod
    def values(
        value: Any,
        columns: tuple[Column, ...],
        json: Encode,
        text: Callable[[str | None], str | None],
    ) -> list[Any]:
        """`columns` of `value` (a row value, or a partial one naming the same fields) as
        the backend stores them."""
        key = (columns, text is text_as_is)
        encode = _ENCODERS.get(key)
        if encode is None:
            encode = _ENCODERS[key] = _encoder(columns, convert_text=not key[1])
        return encode(value, json, text)

    def copied(self, overrides: Mapping[str, str]) -> str:
        """A SELECT list copying every column of a row as it is, but those `overrides` gives
        an expression for (the fork's copy of a step: new ids, running -> interrupted)."""
        unknown = set(overrides) - {c.name for c in self.columns}
        if unknown:
            raise ValueError(f"no such column in {self.table}: {sorted(unknown)}")
        return ",\n       ".join(overrides.get(c.name, c.name) for c in self.columns)

    def exported(self, value: R) -> dict[str, Any]:
        """The export line's fields of every column with an export key (nested at `.`), then
        the values the row computes from them (its `EXPORTED`): what an export line says of
        a row, declared with the row."""
        out: dict[str, Any] = {}
        for c in self.columns:
            if c.export is None:
                continue
            v = getattr(value, c.field)
            if isinstance(v, enum.Enum):
                v = v.value
            head, _, tail = c.export.partition(".")
            if tail:
                out.setdefault(head, {})[tail] = v
            else:
                out[head] = v
        for key, name in self.derived:
            out[key] = getattr(value, name)
        return out


# One generated encoder per column list (a table's, a completion's).
_ENCODERS: dict[
    tuple[tuple[Column, ...], bool], Callable[[Any, Encode, Callable[[Any], Any]], list[Any]]
] = {}


def _encoder(
    columns: tuple[Column, ...], *, convert_text: bool = True
) -> Callable[[Any, Encode, Callable[[Any], Any]], list[Any]]:
    """`encode(value, json, text)`: the columns' values as stored, in order. Generated as
    one function, like the converter below: a step's write encodes two of them."""
    parts = []
    for c in columns:
        get = f"v.{c.field}"
        if c.kind is Kind.JSON:
            parts.append(f"json({get}, {c.field!r})")
        elif c.kind is Kind.TEXT and convert_text:
            parts.append(f"text({get})")
        elif c.kind is Kind.FLAG:
            parts.append(f"int({get})")
        elif c.kind is Kind.ENUM:
            # The member's own attribute: `.value` is a property of Enum, run in Python
            # (~0.8 us on a small VM, several a step).
            parts.append(f"{get}._value_")
        else:
            parts.append(get)
    names: dict[str, Any] = {}
    source = f"def encode(v, json, text):\n    return [{', '.join(parts)}]\n"
    exec(source, names)  # generated from the declaration, as dataclasses does
    return names["encode"]  # type: ignore[no-any-return]


def _converter(
    row: type[Any], columns: tuple[Column, ...], load: Callable[[Any], Any], given: str | None
) -> Callable[..., Any]:
    """`from_row(r)` (with `given`: `from_row(r, given)`): the row value of a tuple in
    select-list order. Generated once as one function from the declaration, as dataclasses
    makes its __init__, and filling the value's slots directly: resume converts 100,000 rows,
    and a loop over converters per column, or binding sixteen keywords, costs up to twice as
    much. A JSON column whose field defaults to {} reads a NULL or a non-object as {}."""
    fields_of_row = [f.name for f in fields(row)]
    if fields_of_row != [c.field for c in columns]:
        raise TypeError(f"every field of {row.__name__} must be a column, in order")
    names: dict[str, Any] = {"_new": object.__new__, "_row": row, "_load": load}
    lines = ["    v = _new(_row)"]
    for i, c in enumerate(columns):
        if c.kind is Kind.JSON and c.field == given:
            expr = f"given if r[{i}] is None else _load(r[{i}])"
        elif c.kind is Kind.JSON and c.default == {}:
            expr = f"(_v if isinstance(_v := _load(r[{i}]), dict) else {{}})"
        elif c.kind is Kind.JSON:
            expr = f"_load(r[{i}])"
        elif c.kind is Kind.FLAG:
            expr = f"bool(r[{i}])"
        elif c.kind is Kind.ENUM:
            assert c.enum is not None, f"{c.field}: an enum column names its enum"
            names[f"_e{i}"] = {m.value: m for m in c.enum}
            expr = f"_e{i}[r[{i}]]"
        else:
            expr = f"r[{i}]"
        # The slot's own setter: a frozen value is built once, here, as its __init__ would.
        names[f"_s{i}"] = getattr(row, c.field).__set__
        lines.append(f"    _s{i}(v, {expr})")
    args = "r" if given is None else "r, given"
    source = f"def from_row({args}):\n" + "\n".join(lines) + "\n    return v\n"
    exec(source, names)  # generated from the declaration, as dataclasses does
    return names["from_row"]  # type: ignore[no-any-return]
