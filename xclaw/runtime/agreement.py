"""[runtime] Workers agree on what a session runs with (docs/postgres.md, "What a session runs
with").

A session records its configuration — the model chain and the approval mode — in
`sessions.metadata["config"]` when it is created or first run. A worker that starts a run of
it (a new message, a resume after a takeover, the sweep) compares that with its own:

- the same: it drives the session;
- another model chain this worker has configured too (each of its providers): it drives with
  the session's chain;
- another chain it cannot build: it refuses while a live worker has the session's chain (the
  session waits for that one), or when nobody asked (a takeover); a user's own message to a
  session no live worker can run continues it here, with this worker's chain, recorded;
- the approval mode: the stricter of the two (ask > auto-edits > yolo), so no takeover ever
  loosens it; an explicit `xclaw run --approval` sets it.

Anything but "the same" is said: a `notice` to the session's clients and a `session_config`
system_alert step. Pure: the runtime reads the record and acts (session_configs.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

# The metadata key a session's configuration is recorded under.
CONFIG_KEY = "config"
ALERT = "session_config"
# Strictness of the approval modes: a worker may tighten a session's mode, never loosen it.
_STRICTNESS = {"yolo": 0, "auto-edits": 1, "ask": 2}


@dataclass(frozen=True, slots=True)
class RunConfig:
    """What a run drives with: the model chain (provider specs, primary first) and the
    approval mode."""

    models: tuple[str, ...]
    approval: str

    def to_json(self) -> dict[str, Any]:
        return {"models": list(self.models), "approval": self.approval}

    @classmethod
    def from_json(cls, data: Any) -> RunConfig | None:
        """None for anything that is not one (metadata and worker rows are read as found)."""
        if not isinstance(data, Mapping):
            return None
        models, approval = data.get("models"), data.get("approval")
        if not (isinstance(models, list) and all(isinstance(m, str) for m in models)):
            return None
        if approval not in _STRICTNESS or not models:
            return None
        return cls(tuple(models), str(approval))

    def words(self) -> str:
        return f"model {', '.join(self.models)} and approval {self.approval}"


def recorded_config(metadata: Mapping[str, Any]) -> RunConfig | None:
    return RunConfig.from_json(metadata.get(CONFIG_KEY))


def with_config(metadata: Mapping[str, Any], config: RunConfig) -> dict[str, Any]:
    """The session's metadata with `config` recorded (the rest kept)."""
    return {**metadata, CONFIG_KEY: config.to_json()}


def stricter(a: str, b: str) -> str:
    return a if _STRICTNESS.get(a, 2) >= _STRICTNESS.get(b, 2) else b


Kind = Literal["same", "first", "adopted", "changed", "refused"]


@dataclass(frozen=True, slots=True)
class Agreement:
    kind: Kind
    mine: RunConfig
    session: RunConfig | None  # what the session had recorded (None: nothing yet)
    use: RunConfig | None  # what the run drives with; None: refused
    record: RunConfig | None  # to record as the session's configuration; None: unchanged
    holder: str | None = None  # refused: a live worker that has the session's models
    worker: str = ""  # this worker's id, for the words

    @property
    def refused(self) -> bool:
        return self.use is None

    def notice(self) -> str | None:
        """The `[worker] …` notice for the session's clients; None when nothing is to say."""
        if self.kind in ("same", "first") or self.session is None:
            return None
        had = f"this session runs with {self.session.words()}"
        here = f"worker {self.worker} has {self.mine.words()}"
        if self.use is None:
            where = (
                f"worker {self.holder} has that model: send your message there (or reconnect there)"
                if self.holder
                else "send a message to continue it here with this worker's model, or start "
                "a worker that has the session's (xclaw workers lists each worker's)"
            )
            return f"[worker] {had}; {here}, so it does not drive it: {where}"
        used = self.use.words()
        if self.kind == "changed":
            return f"[worker] {had}; {here}: on your message it continues with {used}"
        return f"[worker] {had}; {here}: it drives the session with {used}"

    def alert(self) -> dict[str, Any] | None:
        """The `session_config` system_alert's details; None when nothing is to record."""
        if self.kind in ("same", "first"):
            return None
        return {
            "decision": self.kind,
            "session": None if self.session is None else self.session.to_json(),
            "worker": {"id": self.worker, **self.mine.to_json()},
            "used": None if self.use is None else self.use.to_json(),
            "waitingFor": self.holder,
        }


def agree(
    recorded: RunConfig | None,
    mine: RunConfig,
    *,
    available: Iterable[str],
    explicit: bool,
    explicit_approval: bool = False,
    live: Iterable[tuple[str, RunConfig]] = (),
    worker: str = "",
) -> Agreement:
    """What a run of a session recorded with `recorded` drives with on this worker (`mine`,
    able to build the providers in `available`). `explicit`: a user's own message or resume
    request (not a takeover); `explicit_approval`: the user chose this run's approval mode;
    `live`: the other live workers and their configurations."""
    if recorded is None:
        return Agreement("first", mine, None, mine, mine, worker=worker)
    if recorded == mine:
        return Agreement("same", mine, recorded, mine, None, worker=worker)
    approval = mine.approval if explicit_approval else stricter(recorded.approval, mine.approval)
    have = set(available)
    if recorded.models == mine.models or set(recorded.models) <= have:
        use = RunConfig(recorded.models, approval)
        record = use if explicit_approval and use != recorded else None
        return Agreement("adopted", mine, recorded, use, record, worker=worker)
    # A live worker that can run the session's chain: it has each of its providers.
    holder = next((w for w, cfg in live if set(recorded.models) <= set(cfg.models)), None)
    if holder is None and explicit:
        use = RunConfig(mine.models, approval)
        return Agreement("changed", mine, recorded, use, use, worker=worker)
    return Agreement("refused", mine, recorded, None, None, holder=holder, worker=worker)


def disagreeing(
    workers: Iterable[tuple[str, bool | None, Mapping[str, Any]]], me: str, mine: RunConfig
) -> list[str]:
    """Warnings, one per live worker (id, alive, registration info) that runs with another
    configuration than `mine`: `xclaw serve` prints them as it starts."""
    out = []
    for worker_id, alive, info in workers:
        theirs = RunConfig.from_json(info)
        if worker_id == me or alive is not True or theirs is None or theirs == mine:
            continue
        out.append(
            f"warning: live worker {worker_id} runs {theirs.words()}; this one runs "
            f"{mine.words()}. Each session keeps the configuration it started with: this "
            "worker drives another's sessions only with their model chain, when it has it "
            "(docs/postgres.md)"
        )
    return out
