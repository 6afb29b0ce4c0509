"""[a2a] The gateway's A2A agent card (`/.well-known/agent-card.json`): who it is, where its
JSON-RPC interface is, that it streams, that it wants a bearer token (the gateway's or a
user's), a skill for each tool it works with, and one for the commands a message may be
(`/steps`, `/rollback`, `/fork`)."""

from __future__ import annotations

from collections.abc import Iterable

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from xclaw import __version__
from xclaw.tools.a2a_settings import A2aSection
from xclaw.tools.base import Tool

RPC_PATH = "/a2a"
BEARER = "bearer"


def agent_card(section: A2aSection, tools: Iterable[Tool], base_url: str) -> AgentCard:
    """The card, its interface at `section.url` or `base_url` + RPC_PATH."""
    url = section.url or base_url.rstrip("/") + RPC_PATH
    return AgentCard(
        name=section.name,
        description=section.description,
        version=__version__,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={
            BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer",
                    description="the gateway's access token, or a user's (docs/teams.md)",
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={BEARER: StringList()})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/octet-stream"],
        skills=[
            AgentSkill(
                id=tool.name,
                name=tool.name,
                description=tool.description.strip() or tool.name,
                tags=["tool", "read-only" if tool.read_only else "side-effects"],
            )
            for tool in tools
        ]
        + [COMMANDS_SKILL],
    )


# The commands a message may be instead of words for the model (docs/a2a.md): said on the
# card, as an editor is told them (ACP's available commands).
COMMANDS_SKILL = AgentSkill(
    id="xclaw.commands",
    name="steps, rollback, fork, ps",
    description=(
        "A message (with its contextId) that is a command is answered without the model: "
        "/steps [N] lists the context's steps; /rollback sNNNN shows what rewinding to just "
        "before that step would undo outside the workspace and what would stay done, and "
        "does nothing; /rollback sNNNN --confirm runs the compensations and rewinds "
        "(--accept-irreversible when some effects stay done; --retry or /rollback --abandon "
        "for one stopped half-way; metadata.rollback says the same with structure); "
        "/fork sNNNN [title] branches a new context after that step; /ps lists the "
        "processes the context's commands left running in its container."
    ),
    tags=["command", "time-travel"],
    examples=[
        "/steps 20",
        "/rollback s0004",
        "/rollback s0004 --confirm",
        "/fork s0004 retry",
        "/ps",
    ],
)
