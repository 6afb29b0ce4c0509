"""What a session's agent works with: its tools, the approval policy and its workspace."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from xclaw.agent.loop import Policy
from xclaw.config import Settings
from xclaw.tools.base import Tool


@dataclass(frozen=True)
class Toolbox:
    tools: Mapping[str, Tool]
    policy: Policy
    workspace_root: Path

    def is_read_only(self, name: str) -> bool:
        tool = self.tools.get(name)
        return bool(tool is not None and tool.read_only)

    def is_resumable(self, name: str) -> bool:
        return bool(getattr(self.tools.get(name), "resumable", False))

    def workspace(self, session_id: str) -> Path:
        from xclaw.workspace.paths import workspace_dir

        return workspace_dir(self.workspace_root, session_id)


def default_toolbox(settings: Settings) -> Toolbox:
    from xclaw.tools.approval import ApprovalPolicy
    from xclaw.tools.registry import default_tools

    registry = default_tools(settings)
    return Toolbox(
        tools={t.name: t for t in registry},
        policy=ApprovalPolicy.from_settings(settings),
        workspace_root=settings.workspace_root,
    )
