"""[tools] `a2a:` in xclaw.yaml: how the gateway's A2A agent card presents it, and the remote agents
the `a2a_call` tool may call (docs/a2a.md).

    a2a:
      name: builder
      agents:
        reviewer:
          card_url: "https://review.example/.well-known/agent-card.json"
          token: "${REVIEWER_TOKEN}"

`${VAR}` in an agent's string values is read from the environment (or `.env`), as in
`mcp_servers:`; the values substituted are secrets to the redactor.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from xclaw.config.section import Default, Number, Section, Text
from xclaw.tools.mcp.config import Expanded

AGENT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Where the values substituted for ${VAR} are gathered while one agent entry is read (the
# key mcp_servers' reader uses: the same expansion function fills it).
_USED = "mcp_substituted"


def _agent_name(name: str) -> str:
    if not AGENT_NAME.match(name):
        raise ValueError(f"agent name {name!r}: use 1-64 letters, digits, - and _")
    return name


AgentName = Annotated[str, AfterValidator(_agent_name)]


class RemoteAgent(Section):
    """One remote A2A agent: where its card is, and what proves who calls it."""

    card_url: Expanded
    # Sent as `Authorization: Bearer …` with every request to it.
    token: Expanded | None = None
    headers: dict[str, Expanded] = Field(default_factory=dict)
    # How long one call waits for the remote task to end (or to ask for input).
    timeout_s: Annotated[Number, Field(gt=0)] = 600.0
    _secrets: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _gather_secrets(
        cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> RemoteAgent:
        context = info.context if isinstance(info.context, dict) else None
        if context is not None:
            context[_USED] = []
        agent: RemoteAgent = handler(data)
        used = list(context.pop(_USED, [])) if context is not None else []
        if agent.token:
            used.append(agent.token)
        agent._secrets = tuple(v for v in used if len(v) >= 6)
        return agent

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._secrets


class A2aSection(Section):
    # The agent card's name and description (/.well-known/agent-card.json).
    name: Text = "xclaw"
    description: Annotated[Text, Default("a sentence saying what xclaw is")] = (
        "An xclaw agent: a durable agent runtime whose runs survive crashes, with approvals "
        "that survive restarts."
    )
    # The JSON-RPC endpoint's public URL, behind a proxy; none: as the request reached it.
    url: Text | None = None
    agents: dict[AgentName, RemoteAgent] = Field(default_factory=dict)


class A2aSettings(Section):
    a2a: A2aSection = A2aSection()
