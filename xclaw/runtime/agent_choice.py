"""[runtime] Which declared agent a session runs, recorded with it (docs/agents.md, "In the
record").

A session records its agent — name and the digest of its definition (xclaw/agents/
definition.py) — in `sessions.metadata["agent"]`, written with the first message that runs a
declared agent (none recorded: xclaw's own, `default`). A run of it is decided here:

- a message: runs the agent it names (a switch, recorded), else the recorded one; a changed
  definition under the same name is the user's to take — their message continues with it,
  recorded, said in a `session_agent` step;
- a resume, a takeover, a compaction — a turn that is not new: only the recorded definition
  runs it. Another definition, or none by that name, refuses, saying which and what to do:
  a turn half-run by one definition is never finished by another.

Pure: the runtime reads the record and acts (xclaw/runtime/turn_start.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from xclaw.agents.catalog import AgentCatalog
from xclaw.agents.definition import DEFAULT_AGENT, DEFAULT_NAME, AgentDefinition

AGENT_KEY = "agent"
ALERT = "session_agent"


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """What the record says of a session's agent."""

    name: str
    digest: str | None  # None: xclaw's own agent (it has no definition to compare)

    @classmethod
    def of(cls, definition: AgentDefinition) -> AgentRecord:
        return cls(definition.name, None if definition.is_default else definition.digest)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "digest": self.digest}

    @classmethod
    def from_json(cls, data: Any) -> AgentRecord | None:
        if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
            return None
        digest = data.get("digest")
        return cls(data["name"], digest if isinstance(digest, str) else None)

    def words(self) -> str:
        if self.digest is None:
            return f"agent {self.name!r}"
        return f"agent {self.name!r} (definition {self.digest})"


def recorded_agent(metadata: Mapping[str, Any]) -> AgentRecord | None:
    return AgentRecord.from_json(metadata.get(AGENT_KEY))


def with_agent(metadata: Mapping[str, Any], record: AgentRecord) -> dict[str, Any]:
    return {**metadata, AGENT_KEY: record.to_json()}


Kind = Literal["same", "first", "switched", "changed", "refused"]


@dataclass(frozen=True, slots=True)
class AgentChoice:
    kind: Kind
    definition: AgentDefinition | None  # what runs; None: refused
    recorded: AgentRecord | None
    record: AgentRecord | None = None  # to write as the session's agent; None: unchanged
    reason: str = ""  # refused: why, and what to do

    @property
    def refused(self) -> bool:
        return self.definition is None

    def alert(self) -> dict[str, Any] | None:
        """The `session_agent` step's details for a switch or a changed definition."""
        if self.kind not in ("switched", "changed") or self.record is None:
            return None
        return {
            "decision": self.kind,
            "was": None if self.recorded is None else self.recorded.to_json(),
            "now": self.record.to_json(),
        }

    def notice(self) -> str | None:
        if self.kind == "changed" and self.recorded is not None and self.record is not None:
            return (
                f"[agent] {self.recorded.words()} changed here to definition "
                f"{self.record.digest}: this message runs the new one (recorded)"
            )
        if self.kind == "switched" and self.record is not None:
            return f"[agent] this session now runs {self.record.words()}"
        return None


def choose(
    recorded: AgentRecord | None,
    catalog: AgentCatalog,
    *,
    requested: str | None = None,
    new_turn: bool,
) -> AgentChoice:
    """What a run of a session that recorded `recorded` runs (see the module docstring).
    `requested`: the agent a message names; `new_turn`: a message (not a resume, a takeover
    or a compaction). An agent name nobody declared is refused (UnknownAgent's words)."""
    if requested is not None:
        wanted = catalog.get(requested)
        if wanted is None:
            return AgentChoice("refused", None, recorded, reason=_unknown(requested, catalog))
        now = AgentRecord.of(wanted)
        if recorded is None:
            if wanted.is_default:
                return AgentChoice("same", wanted, None)
            return AgentChoice("first", wanted, None, record=now)
        if recorded == now:
            return AgentChoice("same", wanted, recorded)
        if recorded.name == now.name:
            if new_turn:
                return AgentChoice("changed", wanted, recorded, record=now)
            return AgentChoice("refused", None, recorded, reason=_changed(recorded, wanted))
        if not new_turn:
            return AgentChoice(
                "refused",
                None,
                recorded,
                reason=f"this session's unfinished turn runs {recorded.words()}; a resume "
                f"cannot hand it to agent {now.name!r}: send a message to switch",
            )
        return AgentChoice("switched", wanted, recorded, record=now)
    if recorded is None or (recorded.name == DEFAULT_NAME and recorded.digest is None):
        return AgentChoice("same", DEFAULT_AGENT, recorded)
    found = catalog.get(recorded.name)
    if found is None:
        return AgentChoice("refused", None, recorded, reason=_not_here(recorded, catalog))
    now = AgentRecord.of(found)
    if now == recorded:
        return AgentChoice("same", found, recorded)
    if new_turn:
        return AgentChoice("changed", found, recorded, record=now)
    return AgentChoice("refused", None, recorded, reason=_changed(recorded, found))


def _known(catalog: AgentCatalog) -> str:
    return ", ".join(d.name for d in catalog.named()) or "none but default"


def _unknown(name: str, catalog: AgentCatalog) -> str:
    return (
        f"no agent named {name!r} is declared here (xclaw.yaml's agents:, or xclaw.open(agent="
        f"...)); declared: {_known(catalog)}"
    )


def _not_here(recorded: AgentRecord, catalog: AgentCatalog) -> str:
    return (
        f"this session runs {recorded.words()}, which is not declared here (declared: "
        f"{_known(catalog)}): continue it where that agent is declared, or declare it "
        "(xclaw.yaml's agents:, xclaw.open(agent=...))"
    )


def _changed(recorded: AgentRecord, found: AgentDefinition) -> str:
    return (
        f"this session's unfinished turn was run by {recorded.words()}; here, agent "
        f"{found.name!r} has definition {found.digest}. It is not resumed with another "
        "definition: resume it where the recorded one is declared (the same instructions, "
        "tools, model, output type and hooks), or send a message to continue with this one"
    )
