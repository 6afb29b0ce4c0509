"""`xclaw acp` driven by an editor written on the official TypeScript SDK
(`@agentclientprotocol/sdk` from npm, installed by .ci/run into .ci/node): a streamed answer,
an approval through `session/request_permission`, and `session/load` replaying the history in
a second process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acp.client import agent_env

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / ".ci" / "node" / "node_modules"
SDK = NODE_MODULES / "@agentclientprotocol" / "sdk"
SCRIPT = Path(__file__).with_name("node_client.mjs")

pytestmark = pytest.mark.slow


def _node() -> str:
    node = shutil.which("node")
    if node is None or not SDK.is_dir():
        if os.environ.get("XCLAW_TEST_REQUIRE_NPM_ACP"):
            pytest.fail(f"node and {SDK} are required (XCLAW_TEST_REQUIRE_NPM_ACP is set)")
        pytest.skip("node or @agentclientprotocol/sdk missing (.ci/run installs it)")
    return node


def _run(node: str, tmp: Path, *args: str) -> dict[str, Any]:
    # The script imports the SDK by name: it runs from a copy beside .ci/node's packages.
    script = NODE_MODULES.parent / "xclaw_node_client.mjs"
    shutil.copyfile(SCRIPT, script)
    env = agent_env(XCLAW_MODEL=f"script:{tmp / 'script.json'}", XCLAW_DB=str(tmp / "x.db"))
    done = subprocess.run(
        [node, str(script), *args, "--", sys.executable, "-m", "xclaw", "acp"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_typescript_sdk_client_prompts_approves_and_loads(tmp_path: Path) -> None:
    node = _node()
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "script.json").write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "text": "Writing the note.",
                        "tool_calls": [
                            {"name": "write_file", "input": {"path": "note.md", "content": "hi\n"}}
                        ],
                    },
                    {"text": "The note is written."},
                ]
            }
        )
    )
    first = _run(node, tmp_path, "new", str(project), "write a note")
    assert first["stopReason"] == "end_turn" and first["loadSession"] is True
    assert first["asked"] == ["write_file note.md"]
    assert first["text"] == "Writing the note.The note is written."
    assert "tool_call" in first["updates"] and "tool_call_update" in first["updates"]
    assert (project / "note.md").read_text() == "hi\n"
    second = _run(node, tmp_path, "load", str(project), first["sessionId"])
    assert second["replayed"] > 0 and second["updates"][0] == "user_message_chunk"
    assert "The note is written." in second["text"]
    assert second["listed"] == [first["sessionId"]]
